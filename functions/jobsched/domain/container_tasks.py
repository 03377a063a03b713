"""Container tasks (target type ECS_TASK): what a RunTask call carries and what a task's end means.

Plain Python: the call's idempotency token, the tags and startedBy that find a task again, the
container overrides (the execution's environment) within ECS's size limit, and the verdict of a
STOPPED task. The calls themselves are in store/ecs_tasks.py; docs/architecture.md, "ECS_TASK"."""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from jobsched.domain.json_text import compact

# What ECS allows (docs/architecture.md, "ECS_TASK", with sources):
MAX_TIMEOUT_SEC = 86_400  # the scheduler's own bound for this type: a task runs at most a day
MAX_OVERRIDES_CHARS = 8192  # RunTask: "a total of 8192 characters are allowed for overrides", JSON included
CLIENT_TOKEN_CHARS = 64  # RunTask clientToken: up to 64 ASCII characters, kept by ECS for 24 hours
STARTED_BY_CHARS = 36  # startedBy: up to 36 letters, numbers, hyphens, forward slashes, underscores
MAX_COMMAND_ITEMS = 100
MAX_COMMAND_ITEM_CHARS = 4096
MAX_ENVIRONMENT = 50
MAX_ENV_VALUE_CHARS = 4096

ENV_EXECUTION_ID = "JOBSCHED_EXECUTION_ID"
ENV_ATTEMPT = "JOBSCHED_ATTEMPT"
ENV_PAYLOAD = "JOBSCHED_PAYLOAD"
ENV_PAYLOAD_REF = "JOBSCHED_PAYLOAD_REF"
RESERVED_ENV_PREFIX = "JOBSCHED_"

TAG_EXECUTION = "jobsched:executionId"
TAG_ATTEMPT = "jobsched:attempt"

# Patterns matched with fullmatch.
TASK_DEFINITION_ARN = re.compile(r"arn:aws[a-z-]*:ecs:[a-z0-9-]+:\d{12}:task-definition/[A-Za-z0-9_-]{1,255}:\d{1,10}")
CLUSTER_ARN = re.compile(r"arn:aws[a-z-]*:ecs:[a-z0-9-]+:\d{12}:cluster/[A-Za-z0-9_-]{1,255}")
CLUSTER_NAME = re.compile(r"[A-Za-z0-9_-]{1,255}")
SUBNET = re.compile(r"subnet-[0-9a-f]{8,17}")
SECURITY_GROUP = re.compile(r"sg-[0-9a-f]{8,17}")
CONTAINER_NAME = re.compile(r"[A-Za-z0-9_-]{1,255}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")

# A running task's execution is looked at this often (DescribeTasks) until its deadline: an end
# whose event was lost, or arrived before the task was recorded, is found within this much.
RECONCILE_MS = 15 * 60_000
# A task DescribeTasks does not find within this of its attempt's start is looked at again after
# UNLISTED_RETRY_MS (ECS's API is eventually consistent); later, it is stopped and the attempt ends.
UNLISTED_GRACE_MS = 120_000
UNLISTED_RETRY_MS = 30_000
# The claim of a container attempt holds it this long (the RunTask call, not the task's run): a
# worker that dies before recording the task leaves it to a redelivery after this, not after the
# task's whole timeout.
CALL_LEASE_MS = 120_000

# RunTask refused for the account's rate (ThrottlingException: Fargate allows 20 RunTask calls a
# second with a burst of 100, per account and Region) or for capacity (its `failures`, below)
# starts nothing: the execution is held back without using an attempt (service/worker.py), as
# flow control holds one back, for at most this long since it was first held; past it, the
# refusal is an attempt's failure like any other (a capacity shortage that outlasts it is an outage).
THROTTLE_HOLD_LIMIT_MS = 15 * 60_000
# RunTask `failures` reasons that mean capacity, not the request: Fargate's "Capacity is
# unavailable at this time. Please try again later or in a different availability zone", an EC2
# capacity provider's RESOURCE:CPU / RESOURCE:MEMORY / RESOURCE:ENI..., and the account's quota of
# concurrent tasks or vCPUs ("You've reached the limit on the number of ... you can run concurrently").
CAPACITY_REASONS = ("Capacity is unavailable", "RESOURCE:", "reached the limit on the number of")


def capacity_refusal(failures: list[dict]) -> bool:
    """Every failure RunTask answered is one of capacity: trying later may start the task."""
    reasons = [str(f.get("reason") or "") for f in failures]
    return bool(reasons) and all(any(mark in r for mark in CAPACITY_REASONS) for r in reasons)


# The stop codes ECS gives a task that never ran its container (docs/architecture.md).
NOT_STARTED_CODES = frozenset({"TaskFailedToStart"})


def client_token(execution_id: str, attempt: int, holds: int = 0) -> str:
    """RunTask's idempotency token for one attempt of one execution: the same call repeated (a
    botocore retry, a worker that died after the call and whose attempt is made again) starts no
    second task while ECS keeps the token (24 hours). A call held back (`holds`: RunTask answered
    no capacity and started nothing) is made again under a new token: ECS answers a repeated token
    with the original request's result (ECS API reference, "Ensuring idempotency"), which for a
    capacity refusal would be the same refusal for a day."""
    held = f"#h{holds}" if holds else ""
    return hashlib.sha256(f"{execution_id}#{attempt}{held}".encode()).hexdigest()[:CLIENT_TOKEN_CHARS]


def started_by(execution_id: str) -> str:
    """RunTask's startedBy for every attempt of an execution: ListTasks filters on it, which is
    how a worker finds a task whose start was never recorded."""
    return "jobsched-" + hashlib.sha256(execution_id.encode()).hexdigest()[:STARTED_BY_CHARS - 9]


def task_tags(execution_id: str, attempt: int) -> list[dict]:
    """The task's tags (RunTask `tags`): the event of its end names the execution and attempt."""
    return [{"key": TAG_EXECUTION, "value": execution_id}, {"key": TAG_ATTEMPT, "value": str(attempt)}]


def payload_ref(job_id: str) -> str:
    """Where a task reads a payload too large for RunTask's overrides: the job's `payload` field,
    on the API (GET with the tenant's API key)."""
    return f"/v1/jobs/{job_id}"


def container_overrides(config: dict, job_id: str, execution_id: str, attempt: int, payload: Any) -> dict:
    """RunTask's `overrides` for the job's container: its command, its environment, and the
    execution's variables. The payload rides in JOBSCHED_PAYLOAD when the whole fits ECS's 8,192
    characters, else JOBSCHED_PAYLOAD_REF names where to read it; with `payloadByReference` it is
    never inline (the overrides are recorded by CloudTrail and shown in ECS's task events)."""
    base = [{"name": k, "value": v} for k, v in sorted((config.get("environment") or {}).items())]
    base += [{"name": ENV_EXECUTION_ID, "value": execution_id}, {"name": ENV_ATTEMPT, "value": str(attempt)}]

    def build(extra: dict) -> dict:
        container: dict[str, Any] = {"name": config["container"], "environment": base + [extra]}
        if config.get("command"):
            container["command"] = list(config["command"])
        return {"containerOverrides": [container]}

    inline = None if config.get("payloadByReference") else build({"name": ENV_PAYLOAD, "value": compact(payload)})
    if inline is not None and overrides_chars(inline) <= MAX_OVERRIDES_CHARS:
        return inline
    return build({"name": ENV_PAYLOAD_REF, "value": payload_ref(job_id)})


def overrides_chars(overrides: dict) -> int:
    """How ECS counts the overrides: the JSON of the structure as it is sent (botocore writes
    non-ASCII characters as \\u escapes, six characters each), formatting included."""
    return len(json.dumps(overrides, separators=(",", ":"), ensure_ascii=True))


# The longest execution id (domain/target_envelopes.py LONGEST_EXECUTION_ID) and attempt an override
# may have to carry: the API checks a target's fixed part against the limit with these.
LONGEST_EXECUTION_ID = 200
LONGEST_ATTEMPT = 20


def largest_fixed_overrides(config: dict, job_id: str) -> int:
    """The overrides' size with the payload by reference and the longest ids: when even that is
    over the limit, every run would be refused, so the API refuses the job."""
    return overrides_chars(container_overrides(config, job_id, "x" * LONGEST_EXECUTION_ID, LONGEST_ATTEMPT,
                                               "x" * (MAX_OVERRIDES_CHARS + 1)))


@dataclass(frozen=True)
class TaskEnd:
    """A STOPPED task as its state-change event (or DescribeTasks) tells it."""

    task_arn: str
    execution_id: str | None
    attempt: int | None
    exit_code: int | None
    stopped_reason: str | None
    stop_code: str | None

    @property
    def succeeded(self) -> bool:
        # Exit code 0 of a container that ended by itself: one stopped from outside (StopTask,
        # Fargate's retirement, a Spot interruption) that exits 0 on SIGTERM did not finish.
        return self.exit_code == 0 and self.stop_code in (None, "EssentialContainerExited")

    def error(self) -> str | None:
        """The attempt's error: the container's exit code, or why the task stopped without one."""
        if self.succeeded:
            return None
        reason = (self.stopped_reason or "")[:500]
        if self.exit_code is not None:
            return f"container exited with code {self.exit_code}" + (f" ({reason})" if reason else "")
        if self.stop_code in NOT_STARTED_CODES:
            return f"task failed to start: {reason or self.stop_code}"
        return f"task stopped without an exit code: {reason or self.stop_code or 'no reason given'}"


def task_end_of(task: dict, container: str | None) -> TaskEnd:
    """A task's end from a state-change event's `detail` or a DescribeTasks `tasks[]` entry (the
    same shape, but an event has no tags): the job's container's exit code (a sidecar's never stands for it; only a task
    without that container is judged by the first container that has one), and the tags."""
    tags = {t.get("key"): t.get("value") for t in task.get("tags") or [] if isinstance(t, dict)}
    # A state-change event carries no tags, but it carries the overrides: the execution's own
    # variables name it there (DescribeTasks answers both).
    for override in (task.get("overrides") or {}).get("containerOverrides") or []:
        env = {e.get("name"): e.get("value") for e in override.get("environment") or [] if isinstance(e, dict)}
        if isinstance(env.get(ENV_EXECUTION_ID), str):
            tags.setdefault(TAG_EXECUTION, env[ENV_EXECUTION_ID])
            tags.setdefault(TAG_ATTEMPT, env.get(ENV_ATTEMPT))
    containers = [c for c in task.get("containers") or [] if isinstance(c, dict)]
    chosen = next((c for c in containers if c.get("name") == container), None) if container else None
    if chosen is None:
        chosen = next((c for c in containers if c.get("exitCode") is not None), None)
    exit_code = chosen.get("exitCode") if chosen else None
    attempt = tags.get(TAG_ATTEMPT)
    return TaskEnd(task_arn=str(task.get("taskArn", "")), execution_id=tags.get(TAG_EXECUTION),
                   attempt=int(attempt) if isinstance(attempt, str) and attempt.isdigit() else None,
                   exit_code=int(exit_code) if isinstance(exit_code, int) else None,
                   stopped_reason=task.get("stoppedReason"), stop_code=task.get("stopCode"))


def task_id_of(task_arn: str) -> str:
    return task_arn.rsplit("/", 1)[-1]


def cluster_name_of(cluster: str) -> str:
    return cluster.rsplit("/", 1)[-1] if cluster.startswith("arn:") else cluster


def console_log_url(region: str, cluster: str, task_arn: str) -> str:
    """The task's page in the ECS console, whose Logs tab shows its containers' logs."""
    return (f"https://{region}.console.aws.amazon.com/ecs/v2/clusters/{cluster_name_of(cluster)}/tasks/"
            f"{task_id_of(task_arn)}/logs?region={region}")
