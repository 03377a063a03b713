"""HTTP target: POST the payload with the execution id and attempt, within the job's timeout."""
from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

from jobsched.domain.executions import AttemptOutcome, Dispatch, ExecutionStatus
from jobsched.domain.jobs import Job, TargetType

MAX_OUTPUT_BYTES = 4096
USER_AGENT = "jobsched/0.1"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect could lead the call somewhere the job's owner did not name: report it."""

    def redirect_request(self, *args, **kwargs):  # noqa: D401
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class HttpTargetInvoker:
    def __init__(self, max_timeout_sec: float = 840.0) -> None:
        # Bounded by the worker function's own timeout, minus room to record the result.
        self._max_timeout_sec = max_timeout_sec

    def invoke(self, job: Job, dispatch: Dispatch, attempt: int) -> AttemptOutcome:
        target = job.spec.target
        if target.type is not TargetType.HTTP:
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"target type {target.type.value} is not supported")
        headers = {str(k): str(v) for k, v in (target.config.get("headers") or {}).items()}
        headers.update({
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-Execution-Id": dispatch.execution_id,
            "X-Attempt": str(attempt),
            "X-Job-Id": job.job_id,
        })
        method = str(target.config.get("method", "POST")).upper()
        body = None if method in ("GET", "DELETE", "HEAD") else json.dumps(job.spec.payload).encode()
        request = urllib.request.Request(str(target.config["url"]), data=body, headers=headers, method=method)
        timeout = min(float(job.spec.timeout_sec), self._max_timeout_sec)
        try:
            with _OPENER.open(request, timeout=timeout) as response:
                raw = response.read(MAX_OUTPUT_BYTES + 1)
                return AttemptOutcome(True, ExecutionStatus.SUCCEEDED, None, _output(raw))
        except urllib.error.HTTPError as exc:
            detail = exc.read(200).decode("utf-8", "replace") if exc.fp else ""
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"HTTP {exc.code}: {detail}".strip())
        except (socket.timeout, TimeoutError):
            return AttemptOutcome(False, ExecutionStatus.TIMED_OUT, f"no answer within {timeout:g} s")
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (socket.timeout, TimeoutError)):
                return AttemptOutcome(False, ExecutionStatus.TIMED_OUT, f"no answer within {timeout:g} s")
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"unreachable: {exc.reason}")
        except (OSError, ValueError) as exc:
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"call failed: {exc}")


def _output(raw: bytes):
    if not raw or len(raw) > MAX_OUTPUT_BYTES:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")
