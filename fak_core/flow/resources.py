"""Runtime resources a task needs (sandbox, service, task secret) behind one interface.

Preflight never touches this interface; only a task whose preflight passed asks for
resources, and a task whose runner refuses to start releases them. The in-memory
:class:`RecordingResources` keeps every request so tests can observe exactly what was
created and released.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["Resource", "RecordingResources", "Resources"]


@dataclass(frozen=True, slots=True)
class Resource:
    kind: str  # "sandbox", "service" or "task-secret"
    task_id: str
    name: str


@runtime_checkable
class Resources(Protocol):
    """Creates and releases the runtime resources of a task."""

    def create_sandbox(self, task_id: str, manifest: bytes) -> Resource: ...

    def create_service(self, task_id: str, node_id: str) -> Resource: ...

    def create_task_secret(self, task_id: str, credential_refs: tuple[str, ...]) -> Resource: ...

    def release(self, resource: Resource) -> None: ...


class RecordingResources:
    """An in-memory :class:`Resources` that records every creation and release."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.created: list[Resource] = []
        self.released: list[Resource] = []
        self.mounted: dict[str, bytes] = {}
        self.secrets: dict[str, tuple[str, ...]] = {}

    def _add(self, r: Resource) -> Resource:
        with self._lock:
            self.created.append(r)
        return r

    def create_sandbox(self, task_id: str, manifest: bytes) -> Resource:
        self.mounted[task_id] = bytes(manifest)  # read-only: a copy of the frozen bytes
        return self._add(Resource("sandbox", task_id, f"sandbox-{task_id}"))

    def create_service(self, task_id: str, node_id: str) -> Resource:
        return self._add(Resource("service", task_id, f"svc-{task_id}-{node_id}"))

    def create_task_secret(self, task_id: str, credential_refs: tuple[str, ...]) -> Resource:
        self.secrets[task_id] = tuple(credential_refs)
        return self._add(Resource("task-secret", task_id, f"secret-{task_id}"))

    def release(self, resource: Resource) -> None:
        with self._lock:
            self.released.append(resource)

    def live(self) -> list[Resource]:
        """Resources created and not yet released."""
        with self._lock:
            gone = list(self.released)
            return [r for r in self.created if r not in gone]
