"""Binary MCP content as text the result screen can read.

An MCP result may carry base64 data: ``ImageContent``, ``AudioContent`` and an
``EmbeddedResource`` holding ``BlobResourceContents``. None of it may pass unscreened:

- data that is not valid base64 is screened as the text it is (a client may show it);
- a text-typed blob (``text/*``, JSON, XML, YAML, JavaScript, form data) is decoded as
  UTF-8 and screened as text, like any text block;
- any other binary is screened by its embedded printable ASCII runs of six or more
  characters (what ``strings`` shows: EXIF comments, PNG text chunks, a PDF's plain text),
  so a secret or an injection phrase written into a file's bytes is still caught.

What the screen cannot read (text drawn in an image's pixels, compressed streams) stays
unread; the session is TAINTED by the wire admission like any downstream answer.
Everything here is linear in the data. The Anthropic proxy reads the base64 ``source`` of
image and document blocks in a ``tool_result`` with :func:`base64_text` too.
"""

from __future__ import annotations

import base64
import binascii
import re

import mcp_types as types

__all__ = ["base64_text", "binary_text", "is_textual"]

_TEXTUAL = re.compile(
    r"^(?:text/[^;]*|application/(?:[^;]*[+/])?(?:json|xml|yaml|x-yaml|javascript|ecmascript"
    r"|x-www-form-urlencoded|x-sh|sql|graphql|toml)|image/svg\+xml)\s*(?:;.*)?$",
    re.I,
)
_RUNS = re.compile(rb"[\t\n\r\x20-\x7e]{6,}")


def is_textual(mime: str | None) -> bool:
    """Whether a MIME type names text (decoded and screened as such)."""
    return mime is not None and _TEXTUAL.match(mime.strip()) is not None


def base64_text(data: str, mime: str | None) -> str:
    """What the screen reads in base64 ``data`` of type ``mime`` (see the module doc)."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return data  # not base64: the text it is
    if is_textual(mime):
        return raw.decode("utf-8", "replace")
    return "\n".join(m.decode("ascii") for m in _RUNS.findall(raw))


def binary_text(block: object) -> str | None:
    """The screenable text of a binary content block, or None if it is not one."""
    if isinstance(block, types.ImageContent | types.AudioContent):
        return base64_text(block.data, block.mime_type)
    if isinstance(block, types.EmbeddedResource) and isinstance(
        block.resource, types.BlobResourceContents
    ):
        res = block.resource
        return "\n".join([str(res.uri), base64_text(res.blob, res.mime_type)])
    return None
