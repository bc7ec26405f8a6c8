"""Every error a proxy renders, read back by the provider's own SDK (D10.3).

For every status from 400 to 599, each wire's ``error`` (a buffered answer) and
``error_frame`` (the error event of a stream already begun) are served to the official
client (``openai``, ``anthropic``) through a mock transport, and the exception the SDK
raises is the oracle: the SDK maps the status to its exception class, and the class to the
error ``type`` is written out here from the providers' published lists (Anthropic's
"Errors" page and the SDK's ``ErrorType`` / ``GatewayTimeoutErrorObject``; the gateway's
OpenAI envelope, whose types follow the SDK's classes). The SDK also reads the message,
and on OpenAI the code and param, from what the gateway wrote; none of it is computed by
the gateway's tables.
"""

from __future__ import annotations

import typing

import anthropic
import httpx2
import openai
import pytest
from anthropic.types.shared import ErrorType
from starlette.responses import Response

from fak_core.gateway.anthropic_proxy import AnthropicProxy
from fak_core.gateway.openai_proxy import OpenAIProxy
from fak_core.gateway.upstream import UpstreamError

STATUSES = range(400, 600)
MESSAGE = "upstream said: no <b>\u00e9</b>"

#: Anthropic's error type for each exception class its SDK raises by status; a status
#: with a class of no listed type is "another 4XX" (``invalid_request_error``) or, for a
#: server error, ``api_error``.
ANTHROPIC_TYPES: dict[type[Exception], str] = {
    anthropic.BadRequestError: "invalid_request_error",
    anthropic.AuthenticationError: "authentication_error",
    anthropic.PermissionDeniedError: "permission_error",
    anthropic.NotFoundError: "not_found_error",
    anthropic.ContentTooLargeError: "request_too_large",
    anthropic.RateLimitError: "rate_limit_error",
    anthropic.ServiceUnavailableError: "overloaded_error",
    anthropic.OverloadedError: "overloaded_error",
    anthropic.GatewayTimeoutError: "timeout_error",
}
#: The gateway's OpenAI envelope type for each exception class the ``openai`` SDK raises.
OPENAI_TYPES: dict[type[Exception], str] = {
    openai.AuthenticationError: "authentication_error",
    openai.PermissionDeniedError: "authentication_error",
    openai.RateLimitError: "rate_limit_error",
}


def _anthropic_type(exc: anthropic.APIStatusError) -> str:
    if type(exc) in ANTHROPIC_TYPES:
        return ANTHROPIC_TYPES[type(exc)]
    if isinstance(exc, anthropic.InternalServerError):
        return "api_error"
    return "invalid_request_error"


def _openai_type(exc: openai.APIStatusError) -> str:
    if type(exc) in OPENAI_TYPES:
        return OPENAI_TYPES[type(exc)]
    if isinstance(exc, openai.InternalServerError):
        # the SDK has no class of its own for 529 (Anthropic's overload status)
        return "overloaded_error" if exc.status_code == 529 else "server_error"
    return "invalid_request_error"


def _serving(answer: tuple[int, dict[str, str], bytes]) -> httpx2.Client:
    """A client whose every request is answered ``answer`` (status, headers, body)."""
    status, headers, body = answer

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers=headers, content=body)

    return httpx2.Client(transport=httpx2.MockTransport(handler))


def _rendered(r: Response) -> tuple[int, dict[str, str], bytes]:
    return r.status_code, dict(r.headers), bytes(r.body)


def _stream_of(frame: bytes) -> tuple[int, dict[str, str], bytes]:
    return 200, {"content-type": "text/event-stream"}, frame


def _anthropic_turn(client: anthropic.Anthropic, *, stream: bool) -> None:
    msgs: list[anthropic.types.MessageParam] = [{"role": "user", "content": "hi"}]
    if stream:
        for _ in client.messages.create(model="m", max_tokens=8, messages=msgs, stream=True):
            pass
    else:
        client.messages.create(model="m", max_tokens=8, messages=msgs)


def _openai_turn(client: openai.OpenAI, *, stream: bool) -> None:
    msgs: list[openai.types.chat.ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
    if stream:
        for _ in client.chat.completions.create(model="m", messages=msgs, stream=True):
            pass
    else:
        client.chat.completions.create(model="m", messages=msgs)


def _anthropic_raises(http: httpx2.Client, *, stream: bool) -> anthropic.APIStatusError:
    client = anthropic.Anthropic(api_key="k", base_url="http://gw", http_client=http, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as info:
        _anthropic_turn(client, stream=stream)
    client.close()
    return info.value


def _openai_raises(http: httpx2.Client, *, stream: bool) -> openai.APIError:
    client = openai.OpenAI(api_key="k", base_url="http://gw/v1", http_client=http, max_retries=0)
    with pytest.raises(openai.APIError) as info:
        _openai_turn(client, stream=stream)
    client.close()
    return info.value


def _documented(kind: str) -> bool:
    """A type Anthropic publishes: the SDK's ``ErrorType``, or the 413 its docs name."""
    return kind in typing.get_args(ErrorType) or kind == "request_too_large"


@pytest.mark.fak_theorem("D10.3")
def test_anthropic_errors_read_back_by_the_sdk() -> None:
    proxy = AnthropicProxy.__new__(AnthropicProxy)
    for status in STATUSES:
        hdrs = {"x-trace-id": f"t{status}"}
        answer = _rendered(proxy.error(status, MESSAGE, headers=hdrs))
        exc = _anthropic_raises(_serving(answer), stream=False)
        assert exc.status_code == status
        want = _anthropic_type(exc)
        assert _documented(want)
        assert exc.type == want, (status, exc.body)
        assert exc.body == {"type": "error", "error": {"type": want, "message": MESSAGE}}
        assert exc.response.headers["x-trace-id"] == f"t{status}"
        frame = proxy.error_frame(UpstreamError(status, MESSAGE, "upstream_error"))
        streamed = _anthropic_raises(_serving(_stream_of(frame)), stream=True)
        assert streamed.type == want, (status, streamed.body)
        assert streamed.body == exc.body


@pytest.mark.fak_theorem("D10.3")
def test_openai_errors_read_back_by_the_sdk() -> None:
    proxy = OpenAIProxy.__new__(OpenAIProxy)
    for status in STATUSES:
        code, param = f"code_{status}", ("trace_id" if status % 2 else None)
        hdrs = {"x-trace-id": f"t{status}"}
        answer = _rendered(proxy.error(status, MESSAGE, code=code, param=param, headers=hdrs))
        exc = _openai_raises(_serving(answer), stream=False)
        assert isinstance(exc, openai.APIStatusError) and exc.status_code == status
        want = _openai_type(exc)
        assert (exc.type, exc.code, exc.param) == (want, code, param)
        assert exc.message == f"Error code: {status} - {MESSAGE}"
        assert exc.body == {"message": MESSAGE, "type": want, "code": code, "param": param}
        assert exc.response.headers["x-trace-id"] == f"t{status}"
        frame = proxy.error_frame(UpstreamError(status, MESSAGE, code))
        streamed = _openai_raises(_serving(_stream_of(frame)), stream=True)
        assert streamed.body == {"message": MESSAGE, "type": want, "code": code, "param": None}
        assert (streamed.type, streamed.code, streamed.message) == (want, code, MESSAGE)
