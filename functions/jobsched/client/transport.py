"""How a request travels: a transport is any callable (method, url, headers, body, timeout) ->
Response that raises OSError when no answer came. The default is the standard library's urllib
(no dependency); tests give the in-process stack's API function, or a scripted fake."""
from __future__ import annotations

import http.client
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Mapping, Protocol


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        lowered = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == lowered), None)


class Transport(Protocol):
    def __call__(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None,
                 timeout: float) -> Response: ...


def urllib_transport(method: str, url: str, headers: Mapping[str, str], body: bytes | None,
                     timeout: float) -> Response:
    """One HTTP request with urllib; an error status is an answer too (not an exception)."""
    request = urllib.request.Request(url, data=body, method=method, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return Response(answer.status, dict(answer.headers.items()), answer.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return Response(exc.code, dict(exc.headers.items()) if exc.headers else {}, exc.read())
    except http.client.HTTPException as exc:  # a connection closed mid-answer: no answer
        raise ConnectionError(f"{type(exc).__name__}: {exc}") from None
