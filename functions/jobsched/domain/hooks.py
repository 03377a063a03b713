"""Completion hooks: a job's optional `onSuccess` and `onFailure` targets, called once per
execution (a run counts as one) after it ends SUCCEEDED or DEAD, with the execution's summary.

Each call is an execution of its own with a deterministic id, `<executionId>.hook.success` or
`.hook.failure`: recorded PENDING before it is sent, claimed like any execution, retried under
the job's retry policy. However often the end that triggers it is processed (a duplicate
delivery, a crash after the end was recorded), the hook's claim lets one call through."""
from __future__ import annotations

from typing import Any

from jobsched.domain.executions import Execution, ExecutionStatus
from jobsched.domain.schedule import format_instant

HOOK_SEPARATOR = ".hook."
HOOK_KINDS = {ExecutionStatus.SUCCEEDED: "success", ExecutionStatus.DEAD: "failure"}
# Absence alerts go to the onFailure hook too, each its own call: `.hook.missing`, `.hook.notfired`.
ALERT_HOOK_KINDS = {"MISSING": "missing", "NOT_FIRED": "notfired"}


def alert_hook_id(execution_id: str, alert: str) -> str:
    return f"{execution_id}{HOOK_SEPARATOR}{ALERT_HOOK_KINDS[alert]}"


def alert_of_hook(kind: str) -> str | None:
    """MISSING or NOT_FIRED for an alert hook's kind, else None."""
    return next((alert for alert, name in ALERT_HOOK_KINDS.items() if name == kind), None)


def hook_execution_id(execution_id: str, status: ExecutionStatus) -> str | None:
    kind = HOOK_KINDS.get(status)
    return f"{execution_id}{HOOK_SEPARATOR}{kind}" if kind else None


def hook_of(execution_id: str) -> tuple[str, str] | None:
    """(the execution it reports, "success" or "failure") of a hook's execution id, else None."""
    of, separator, kind = execution_id.rpartition(HOOK_SEPARATOR)
    if not separator or (kind not in HOOK_KINDS.values() and kind not in ALERT_HOOK_KINDS.values()):
        return None
    return of, kind


def summary(execution: Execution) -> dict[str, Any]:
    """What a hook receives: the execution it reports, as the API shows it (without attempts)."""
    return {
        "event": "execution." + execution.status.value.lower(),
        "executionId": execution.execution_id,
        "jobId": execution.job_id,
        "status": execution.status.value,
        "scheduledAt": format_instant(execution.scheduled_ms),
        "startedAt": format_instant(execution.started_ms),
        "finishedAt": format_instant(execution.finished_ms),
        "attempt": execution.attempt,
        "output": execution.output,
        "error": execution.error,
    }
