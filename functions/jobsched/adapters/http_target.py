"""HTTP target: send the payload with the execution id and attempt, within the job's timeout.

The address is resolved once, checked, and that very address is the one connected to, so a DNS
name cannot smuggle a loopback, link-local (instance metadata) or private address past the
check by answering differently the second time."""
from __future__ import annotations

import http.client
import ipaddress
import json
import heapq
import socket
import ssl
import threading
import time

from jobsched.domain.endpoints import OwnEndpoints, TargetUrl, address_refusal
from jobsched.domain.json_text import compact, loads_strict
from jobsched.domain.executions import AttemptOutcome, Dispatch, ExecutionStatus
from jobsched.domain.jobs import Job
from jobsched.domain.retry import retry_after_ms
from jobsched.domain.trace import trace_context
from jobsched.service.signing import (SIGNATURE_HEADER, SIGNED_CALL_HEADERS, SigningUnavailable, signature_header,
                                      standard_headers)

MAX_OUTPUT_BYTES = 4096
MAX_PROGRESS_HEADER_BYTES = 4096
USER_AGENT = "jobsched/0.1"


class BlockedAddress(Exception):
    pass


class OwnEndpoint(BlockedAddress):
    """The scheduler's own endpoint: refused whatever the deployment allows, and not retried."""


def check_address(address: str, allow_private: bool) -> None:
    """The rule of domain/endpoints.py (the one the API checks an address literal with at creation)."""
    reason = address_refusal(ipaddress.ip_address(address.split("%", 1)[0]), allow_private)
    if reason is not None:
        raise BlockedAddress(reason)


def resolve_checked(host: str, port: int, allow_private: bool, own: OwnEndpoints = OwnEndpoints()) -> list[tuple]:
    """Every address of `host` that passes the check, in the resolver's order. An address of the
    scheduler's own endpoints fails the whole call: a name that resolves there is not a target."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise OSError(f"cannot resolve {host}: {exc}") from None
    passed, blocked = [], None
    for _, _, _, _, sockaddr in infos:
        if own.covers(sockaddr[0], port):
            raise OwnEndpoint(f"{host}:{port} is one of the scheduler's own endpoints")
    for _, _, _, _, sockaddr in infos:
        try:
            check_address(sockaddr[0], allow_private)
            if sockaddr not in passed:
                passed.append(sockaddr)
        except BlockedAddress as exc:
            blocked = exc
    if not passed:
        raise BlockedAddress(f"{host} resolves to a blocked address ({blocked})")
    return passed


class DeadlinePassed(Exception):
    pass


class _Watchdog:
    """One thread for the whole container that shuts the sockets of calls past their deadline
    (a thread per call would cost a thread start on every execution)."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, "_Deadline"]] = []
        self._wake = threading.Condition()
        self._count = 0
        self._thread: threading.Thread | None = None

    def watch(self, deadline: "_Deadline") -> None:
        with self._wake:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="http-deadlines", daemon=True)
                self._thread.start()
            self._count += 1
            heapq.heappush(self._due, (deadline.at, self._count, deadline))
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._wake.wait(None if not self._due else self._due[0][0] - time.monotonic())
                _, _, deadline = heapq.heappop(self._due)
            deadline.cut()


_WATCHDOG = _Watchdog()


class _Deadline:
    """The attempt's whole call (connect, send, wait, read) within one deadline: a per-read
    socket timeout alone lets a target that trickles a byte at a time hold the call forever.
    At the deadline the connection's socket is shut, which ends whatever call waits on it."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds
        self.passed = False
        self.done = False
        self._connection = None

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def guard(self, connection) -> "_Deadline":
        self._connection = connection
        _WATCHDOG.watch(self)
        return self

    def cancel(self) -> None:
        self.done = True  # the call ended first: the watchdog leaves its socket alone

    def cut(self) -> None:
        if self.done:
            return
        self.passed = True
        sock = getattr(self._connection, "call_socket", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host, port, sockaddr, timeout):
        super().__init__(host, port, timeout=timeout)
        self._sockaddr = sockaddr

    def connect(self):
        self.sock = socket.create_connection(self._sockaddr[:2], self.timeout)
        self.call_socket = self.sock  # kept: http.client drops self.sock once the response owns it


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host, port, sockaddr, timeout):
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._sockaddr = sockaddr

    def connect(self):
        sock = socket.create_connection(self._sockaddr[:2], self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)
        self.call_socket = self.sock


class HttpTargetInvoker:
    def __init__(self, allow_private: bool = False, max_timeout_sec: float = 840.0,
                 signing_secrets=None, now_s=time.time, own_endpoints: OwnEndpoints = OwnEndpoints()) -> None:
        """`signing_secrets(tenant_id)`: the secrets that sign a tenant's calls now (service/
        signing.py); none: calls go unsigned. `own_endpoints`: refused at every call, so that a job
        stored before they were refused at creation, or a DNS name, cannot reach them."""
        self._allow_private = allow_private
        self._own = own_endpoints
        self._signing_secrets = signing_secrets
        self._now_s = now_s
        # Bounded by the worker function's own timeout, minus room to record the result.
        self._max_timeout_sec = max_timeout_sec

    def invoke(self, job: Job, dispatch: Dispatch, attempt: int, callback_token: str | None = None,
               progress=None) -> AttemptOutcome:
        config = job.spec.target.config
        try:
            url = TargetUrl.parse(str(config["url"]))
        except ValueError as exc:  # a job stored before the API checked its URL so: never callable
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"target refused: url {exc}", retryable=False)
        # A job stored before webhook-* headers were reserved cannot pass off its own as ours.
        headers = {str(k): str(v) for k, v in (config.get("headers") or {}).items()
                   if str(k).lower() not in SIGNED_CALL_HEADERS and str(k).lower() != "traceparent"}
        headers.update({
            "traceparent": trace_context(dispatch.execution_id, attempt).traceparent,
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-Execution-Id": dispatch.execution_id,
            "X-Attempt": str(attempt),
            "X-Job-Id": job.job_id,
        })
        if callback_token:
            headers["X-Callback-Token"] = callback_token
        if progress is not None:
            text = json.dumps(progress, separators=(",", ":"))  # ASCII: a header is Latin-1
            if len(text) <= MAX_PROGRESS_HEADER_BYTES:
                headers["X-Progress"] = text
        method = str(config.get("method", "POST")).upper()
        body = None if method in ("GET", "DELETE", "HEAD") else compact(job.spec.payload).encode()
        try:
            secrets_in_use = self._signing_secrets(job.tenant_id) if self._signing_secrets else []
        except SigningUnavailable as exc:
            # After the claim: a failed attempt, retried under the job's policy (never a RUNNING
            # execution left to its lease). The target was not called.
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"not called: signing secret unavailable ({exc})")
        if secrets_in_use:
            now_s = int(self._now_s())
            headers.update(standard_headers(secrets_in_use, f"{dispatch.execution_id}:{attempt}", now_s, body or b""))
            headers[SIGNATURE_HEADER] = signature_header(secrets_in_use, now_s, body or b"")  # deprecated
        timeout = min(float(job.spec.timeout_sec), self._max_timeout_sec)
        port, path = url.port, url.target
        connection = None
        deadline = _Deadline(timeout)
        guard = None
        try:
            connection = self._connect(url, port, deadline)
            guard = deadline.guard(connection)
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            raw = response.read(MAX_OUTPUT_BYTES + 1)
            if deadline.passed:
                raise DeadlinePassed()
            if response.status == 202 and callback_token:
                return AttemptOutcome(True, ExecutionStatus.RUNNING, None, _output(raw), accepted=True)
            if 200 <= response.status < 300:
                return AttemptOutcome(True, ExecutionStatus.SUCCEEDED, None, _output(raw))
            detail = raw[:200].decode("utf-8", "replace")
            return failed_answer(response.status, f"HTTP {response.status}: {detail}".strip(),
                                 response.getheader("Retry-After"), response.getheader("Date"), job.spec.retry_on_4xx)
        except OwnEndpoint as exc:  # no retry will ever be allowed to call it
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"target refused: {exc}", retryable=False)
        except BlockedAddress as exc:
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"target refused: {exc}")
        except (socket.timeout, TimeoutError, DeadlinePassed):
            return AttemptOutcome(False, ExecutionStatus.TIMED_OUT, f"no answer within {timeout:g} s")
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if deadline.passed:
                return AttemptOutcome(False, ExecutionStatus.TIMED_OUT, f"no answer within {timeout:g} s")
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"call failed: {exc}")
        finally:
            if guard is not None:
                guard.cancel()
            if connection is not None:
                connection.close()

    def _connect(self, url: TargetUrl, port: int, deadline: _Deadline):
        """Connect to the first checked address that answers, within the deadline: a host with
        one dead address among several still gets its call."""
        kind = _PinnedHTTPSConnection if url.scheme == "https" else _PinnedHTTPConnection
        failure: OSError | None = None
        for sockaddr in resolve_checked(url.host, port, self._allow_private, self._own):
            remaining = deadline.remaining()
            if remaining <= 0:
                raise DeadlinePassed()
            connection = kind(url.host, port, sockaddr, remaining)
            try:
                connection.connect()
                return connection
            except (socket.timeout, TimeoutError):
                connection.close()
                raise
            except OSError as exc:
                connection.close()
                failure = exc
        raise failure or OSError(f"cannot connect to {url.host}")


NOT_RETRIED_NOTE = "not retried: a 4xx other than 408 and 429 (set retryOn4xx to retry it)"


def failed_answer(status: int, error: str, retry_after: str | None, date: str | None,
                  retry_on_4xx: bool) -> AttemptOutcome:
    """A non-2xx answer. A 4xx other than 408 (timeout) and 429 (too many requests) says the
    request itself is wrong: repeating it rarely helps, so it is not retried unless the job asks.
    429 and 503 may say when to come back (Retry-After: seconds, or an HTTP date)."""
    if 400 <= status < 500 and status not in (408, 429) and not retry_on_4xx:
        return AttemptOutcome(False, ExecutionStatus.FAILED, f"{error} ({NOT_RETRIED_NOTE})", retryable=False)
    wait = parse_retry_after(retry_after, date) if status in (429, 503) else None
    return AttemptOutcome(False, ExecutionStatus.FAILED, error, retry_after_ms=wait)


def parse_retry_after(value: str | None, date: str | None) -> int | None:
    """Retry-After as milliseconds from now (domain/retry.py: `retry_after_ms`)."""
    return retry_after_ms(value, date, time.time())


def _output(raw: bytes):
    if not raw or len(raw) > MAX_OUTPUT_BYTES:
        return None
    try:
        return loads_strict(raw)  # a target's NaN or duplicate keys never reach our responses
    except ValueError:
        return raw.decode("utf-8", "replace")
