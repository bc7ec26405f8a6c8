"""One HTTP request handed straight to an ASGI app, as a server would.

For the cases a real client or server would not produce or would rewrite: header values a
client library refuses to send, a request with no client address. The body arrives in one
``http.request`` message; the client stays until the response has ended, then leaves.
What the app sends back is returned as its messages.
"""

from __future__ import annotations

from typing import Any

import anyio
from starlette.types import ASGIApp, Message

#: a client address for a request that has one
CLIENT = ("127.0.0.1", 50000)


async def asgi_post(
    app: ASGIApp,
    path: str,
    body: bytes,
    headers: list[tuple[bytes, bytes]],
    client: tuple[str, int] | None = None,
) -> list[Message]:
    """POST ``body`` to ``path`` with exactly ``headers`` (and ``client``'s address when
    given; none in the scope otherwise)."""
    sent: list[Message] = []
    done = anyio.Event()
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            done.set()

    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "server": ("127.0.0.1", 80),
    }
    if client is not None:
        scope["client"] = client
    await app(scope, receive, send)
    return sent


def status_of(sent: list[Message]) -> int:
    """The status of the one response the app started."""
    starts = [m["status"] for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1, sent
    return int(starts[0])
