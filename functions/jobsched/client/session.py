"""One request to the API, with the retries the contract makes safe: a 429 or 503 changed
nothing (the API answers them before or instead of a write), so either is sent again after the
answer's Retry-After (or a backoff when it names none), a bounded number of times, with jitter so
that many clients do not come back in the same instant. No answer at all (a connection refused,
reset or timed out) is retried only where a repeat cannot do a thing twice: GET, PUT, DELETE, and
a POST that carries an Idempotency-Key (the same key on every attempt)."""
from __future__ import annotations

import json
import random
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from jobsched.client.errors import ApiError, ServiceUnavailableError, error_for
from jobsched.client.transport import Transport, urllib_transport
from jobsched.domain.retry import retry_after_ms

RETRIED_STATUSES = (429, 503)
SAFE_METHODS = ("GET", "PUT", "DELETE")


@dataclass
class Retries:
    """How often and how long to wait. `sleep`, `jitter` and `now` are given by tests."""
    max_retries: int = 3  # attempts after the first
    backoff: float = 0.5  # seconds before the first retry when the answer names no Retry-After; doubles
    max_delay: float = 30.0  # a Retry-After beyond this is not waited for: the error is raised
    sleep: Callable[[float], None] = field(default=lambda seconds: time.sleep(seconds))
    jitter: Callable[[], float] = random.random  # in [0, 1)
    now: Callable[[], float] = time.time  # for a Retry-After given as an HTTP date, when the answer has no Date

    def delay(self, retry: int, retry_after: str | None, date: str | None = None) -> float | None:
        """Seconds before retry number `retry` (0-based): never sooner than the server asked, up
        to a quarter more (the jitter); None when the server asked for longer than max_delay."""
        asked_ms = retry_after_ms(retry_after, date, self.now())  # None: absent or unreadable, the backoff
        asked = None if asked_ms is None else asked_ms / 1000
        if asked is not None and asked > self.max_delay:
            return None
        base = asked if asked is not None else min(self.max_delay, self.backoff * 2 ** retry)
        return min(self.max_delay, base * (1 + 0.25 * self.jitter()))


class Session:
    """The base URL, the key, the transport and the retries: `request` returns the answer's JSON
    or raises the API's error as an ApiError."""

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout: float = 15.0,
                 transport: Transport | None = None, retries: Retries | None = None,
                 user_agent: str = "jobsched-python") -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.transport: Transport = transport or urllib_transport
        self.retries = retries or Retries()
        self.user_agent = user_agent

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        clean = {k: v for k, v in (query or {}).items() if v is not None and v != []}
        return self.base_url + path + ("?" + urllib.parse.urlencode(clean, doseq=True) if clean else "")

    def request(self, method: str, path: str, body: Any = None, query: Mapping[str, Any] | None = None,
                headers: Mapping[str, str] | None = None) -> Any:
        url = self.url(path, query)
        all_headers = {"Accept": "application/json", "User-Agent": self.user_agent, **(headers or {})}
        if self.api_key:
            all_headers["Authorization"] = f"Bearer {self.api_key}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = "application/json"
        repeatable = method in SAFE_METHODS or "Idempotency-Key" in all_headers
        retry = 0
        while True:
            try:
                answer = self.transport(method, url, all_headers, data, self.timeout)
            except OSError as exc:
                error: ApiError = ServiceUnavailableError(
                    0, "UNREACHABLE", f"cannot reach {self.base_url}: {getattr(exc, 'reason', None) or exc}")
                wait = self.retries.delay(retry, None) if repeatable else None
            else:
                parsed = _json(answer.body)
                if answer.status < 400:
                    return parsed
                error = error_for(answer.status, parsed, answer.headers, answer.body.decode("utf-8", "replace"))
                wait = (self.retries.delay(retry, answer.header("Retry-After"), answer.header("Date"))
                        if answer.status in RETRIED_STATUSES else None)
            if wait is None or retry >= self.retries.max_retries:
                raise error
            self.retries.sleep(wait)
            retry += 1


def _json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None
