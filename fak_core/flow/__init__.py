"""Plan preflight and freezing: a flow is re-checked, compiled, frozen, digested, re-validated.

Load a flow (:func:`load_flow`), run :func:`preflight` under an identity against a
:class:`Resolver` (:class:`FileWorkspace` by default) and get a :class:`Manifest` whose
digest is SHA-256 over RFC 8785 canonical JSON. The runner re-validates it with the same
compiler (:func:`revalidate`, :func:`load_verified_manifest`); :func:`kernel_policy_for`
compiles a node's capability lock into the kernel's policy; :func:`project` gives the
secret-free UI view. :func:`launch_task` ties it together and creates runtime resources
only after preflight passed.
"""

from fak_core.flow.canonical import CanonicalError, canonical_bytes, digest, digest_json_text
from fak_core.flow.compiler import Compilation, compile_flow
from fak_core.flow.findings import Finding, StepResult, StepStatus, repair_hint
from fak_core.flow.manifest import MANIFEST_FORMAT, Manifest, ManifestError, kernel_policy_for
from fak_core.flow.model import (
    FLOW_VERSION,
    Artifact,
    Flow,
    FlowPolicy,
    FlowSpecError,
    InputSpec,
    Node,
    RequirementSpec,
    SubAgent,
    flow_from_dict,
    flow_to_dict,
    load_flow,
)
from fak_core.flow.preflight import (
    STEPS,
    ExistingFlow,
    GeneratedFlow,
    GenerationContext,
    PreflightOutcome,
    PrivateLayer,
    Repair,
    preflight,
)
from fak_core.flow.projection import PRIVATE_LAYER_NOTE, project
from fak_core.flow.refs import CapabilityRef, LockEntry, RefError, parse_ref
from fak_core.flow.resolver import CapabilityInfo, FileWorkspace, Resolver, User, VersionInfo
from fak_core.flow.resources import RecordingResources, Resource, Resources
from fak_core.flow.risk import NodeRisk, RiskAssessment, assess
from fak_core.flow.runner import (
    FileFetcher,
    RequirementIndex,
    Runner,
    RunnerRefused,
    load_verified_manifest,
    revalidate,
)
from fak_core.flow.secretscan import SecretScanner, scan
from fak_core.flow.task import ExecutionSpec, TaskRecord, launch_task

__all__ = [
    "FLOW_VERSION",
    "MANIFEST_FORMAT",
    "PRIVATE_LAYER_NOTE",
    "STEPS",
    "Artifact",
    "CanonicalError",
    "CapabilityInfo",
    "CapabilityRef",
    "Compilation",
    "ExecutionSpec",
    "ExistingFlow",
    "FileFetcher",
    "FileWorkspace",
    "Finding",
    "Flow",
    "FlowPolicy",
    "FlowSpecError",
    "GeneratedFlow",
    "GenerationContext",
    "InputSpec",
    "LockEntry",
    "Manifest",
    "ManifestError",
    "Node",
    "NodeRisk",
    "PreflightOutcome",
    "PrivateLayer",
    "RecordingResources",
    "RefError",
    "Repair",
    "RequirementIndex",
    "RequirementSpec",
    "Resolver",
    "Resource",
    "Resources",
    "RiskAssessment",
    "Runner",
    "RunnerRefused",
    "SecretScanner",
    "StepResult",
    "StepStatus",
    "SubAgent",
    "TaskRecord",
    "User",
    "VersionInfo",
    "assess",
    "canonical_bytes",
    "compile_flow",
    "digest",
    "digest_json_text",
    "flow_from_dict",
    "flow_to_dict",
    "kernel_policy_for",
    "launch_task",
    "load_flow",
    "load_verified_manifest",
    "parse_ref",
    "preflight",
    "project",
    "repair_hint",
    "revalidate",
    "scan",
]
