"""HTTP target: send the payload with the execution id and attempt, within the job's timeout.

The address is resolved once, checked, and that very address is the one connected to, so a DNS
name cannot smuggle a loopback, link-local (instance metadata) or private address past the
check by answering differently the second time."""
from __future__ import annotations

import http.client
import ipaddress
import json
import socket
import ssl
from urllib.parse import urlsplit

from jobsched.domain.json_text import compact, loads_strict
from jobsched.domain.executions import AttemptOutcome, Dispatch, ExecutionStatus
from jobsched.domain.jobs import Job

MAX_OUTPUT_BYTES = 4096
MAX_PROGRESS_HEADER_BYTES = 4096
USER_AGENT = "jobsched/0.1"


class BlockedAddress(Exception):
    pass


def check_address(address: str, allow_private: bool) -> None:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    if allow_private:
        return
    if (ip.is_loopback or ip.is_link_local or ip.is_private or ip.is_multicast or ip.is_reserved
            or ip.is_unspecified or not ip.is_global):
        raise BlockedAddress(f"{ip} is not a public address")


def resolve_checked(host: str, port: int, allow_private: bool) -> tuple:
    """The first address of `host` that passes the check, as (family, sockaddr)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise OSError(f"cannot resolve {host}: {exc}") from None
    blocked = None
    for family, _, _, _, sockaddr in infos:
        try:
            check_address(sockaddr[0], allow_private)
            return family, sockaddr
        except BlockedAddress as exc:
            blocked = exc
    raise BlockedAddress(f"{host} resolves to a blocked address ({blocked})")


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host, port, sockaddr, timeout):
        super().__init__(host, port, timeout=timeout)
        self._sockaddr = sockaddr

    def connect(self):
        self.sock = socket.create_connection(self._sockaddr[:2], self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host, port, sockaddr, timeout):
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._sockaddr = sockaddr

    def connect(self):
        sock = socket.create_connection(self._sockaddr[:2], self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


class HttpTargetInvoker:
    def __init__(self, allow_private: bool = False, max_timeout_sec: float = 840.0) -> None:
        self._allow_private = allow_private
        # Bounded by the worker function's own timeout, minus room to record the result.
        self._max_timeout_sec = max_timeout_sec

    def invoke(self, job: Job, dispatch: Dispatch, attempt: int, callback_token: str | None = None,
               progress=None) -> AttemptOutcome:
        config = job.spec.target.config
        url = urlsplit(str(config["url"]))
        headers = {str(k): str(v) for k, v in (config.get("headers") or {}).items()}
        headers.update({
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
        timeout = min(float(job.spec.timeout_sec), self._max_timeout_sec)
        port = url.port or (443 if url.scheme == "https" else 80)
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        connection = None
        try:
            _, sockaddr = resolve_checked(url.hostname or "", port, self._allow_private)
            kind = _PinnedHTTPSConnection if url.scheme == "https" else _PinnedHTTPConnection
            connection = kind(url.hostname, port, sockaddr, timeout)
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            raw = response.read(MAX_OUTPUT_BYTES + 1)
            if response.status == 202 and callback_token:
                return AttemptOutcome(True, ExecutionStatus.RUNNING, None, _output(raw), accepted=True)
            if 200 <= response.status < 300:
                return AttemptOutcome(True, ExecutionStatus.SUCCEEDED, None, _output(raw))
            detail = raw[:200].decode("utf-8", "replace")
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"HTTP {response.status}: {detail}".strip())
        except BlockedAddress as exc:
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"target refused: {exc}")
        except (socket.timeout, TimeoutError):
            return AttemptOutcome(False, ExecutionStatus.TIMED_OUT, f"no answer within {timeout:g} s")
        except (OSError, http.client.HTTPException, ValueError) as exc:
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"call failed: {exc}")
        finally:
            if connection is not None:
                connection.close()


def _output(raw: bytes):
    if not raw or len(raw) > MAX_OUTPUT_BYTES:
        return None
    try:
        return loads_strict(raw)  # a target's NaN or duplicate keys never reach our responses
    except ValueError:
        return raw.decode("utf-8", "replace")
