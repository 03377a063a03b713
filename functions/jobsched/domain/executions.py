"""Executions: one run of a job at one due instant, its attempts and their fencing."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class DispatchKind(str, Enum):
    FIRE = "FIRE"  # an occurrence of the schedule
    RETRY = "RETRY"  # another attempt of an execution (a retry, or a redrive)
    MANUAL = "MANUAL"  # POST /jobs/{id}/trigger: one run outside the schedule
    LEASE = "LEASE"  # check a long-running attempt's heartbeat deadline
    SWEEP = "SWEEP"  # a trigger's or redrive's send, checked later: run it if it never arrived
    STEP = "STEP"  # the first attempt of a step of a run (its upstream steps have succeeded)
    HOOK = "HOOK"  # the first attempt of a completion hook's call (domain/hooks.py)
    BACKFILL = "BACKFILL"  # a past occurrence run now (POST /jobs/{id}/backfill), with its own id
    CHECK = "CHECK"  # absence alerts: did the occurrence succeed by its deadline (due_ms)?


class ExecutionStatus(str, Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"  # an attempt failed and a retry is scheduled
    TIMED_OUT = "TIMED_OUT"
    LOST = "LOST"
    CANCELLED = "CANCELLED"
    SKIPPED = "SKIPPED"
    DEAD = "DEAD"
    UPSTREAM_FAILED = "UPSTREAM_FAILED"  # a step below a DEAD or CANCELLED step: it never runs



def execution_id_for(job_id: str, due_ms: int) -> str:
    """Deterministic: the same occurrence always has the same id, whoever dispatches it."""
    return f"{job_id}.{due_ms:013d}"


def manual_execution_id(job_id: str, now_ms: int) -> str:
    """A run outside the schedule: its own id, never equal to an occurrence's."""
    return f"{job_id}.{now_ms:013d}.manual"


def scheduled_ms_of(execution_id: str) -> int:
    return int(execution_id.split(".")[1])


def job_id_of(execution_id: str) -> str | None:
    job_id, sep, rest = execution_id.partition(".")
    if not sep or not job_id.startswith("job_") or not rest:
        return None
    return job_id


@dataclass(frozen=True)
class Dispatch:
    """The SQS message that asks a worker to run one attempt of one execution."""

    kind: DispatchKind
    tenant_id: str
    job_id: str
    execution_id: str
    due_ms: int
    generation: int
    attempt: int = 1
    # Flow control deferred this dispatch since then (the execution shows how long: throttledMs).
    throttled_from_ms: int | None = None
    # Schedule bounds: a scheduled fire's number among the job's fires (1 for the first), carried
    # by its retries; None for triggers, backfills, steps and hooks (they are not counted).
    run: int | None = None
    # Catch-up that does not flood: a missed occurrence released late by its job's catch-up policy.
    catch_up: bool = False
    # Regions (issue 25): the lease epoch of the job's segment under which the message was sent
    # (stamped by store/queues.py); 0 in a single-region deployment, and then not written.
    epoch: int = 0
    # Hand-backs (handlers/worker.py): the receives of the earlier messages that carried this
    # record, which a hand-back sends again as a new message (SQS's own count starts anew with it);
    # the worker's transient backoff and its dead-letter rule count them with the message's own.
    receives: int = 0
    # Held back (a target's rate or capacity refused the call and started nothing; flow control):
    # how many times. RunTask's idempotency token counts it, so a held-back call is a new request
    # to ECS, not a repeat that ECS answers with the refusal it kept for the token.
    holds: int = 0
    # Two senders of one occurrence (docs/architecture.md, "Packs"): True, a FIRE both its writer
    # and the tick may send goes out as a message of one, claimed per execution; False, its sender
    # knows it is the only one (it may ride a pack); None, sent before the senders decided (the
    # worker decides from the job's age).
    solo: bool | None = None
    # Job snapshots (docs/architecture.md, "The worker reads no job"): the job's item as the tick's
    # hand-off read it (strongly consistent, after its bucket's claim), carried by a pack entry
    # whose job may ride it; the worker trusts it under the pack partition's fences instead of
    # reading the job again. None: the worker reads the job. Not part of the dispatch's identity.
    snapshot: dict | None = field(default=None, compare=False, hash=False, repr=False)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def to_dict(self) -> dict:
        body = {
            "v": 1,
            "kind": self.kind.value,
            "tenantId": self.tenant_id,
            "jobId": self.job_id,
            "executionId": self.execution_id,
            "dueMs": self.due_ms,
            "generation": self.generation,
            "attempt": self.attempt,
        }
        if self.throttled_from_ms is not None:
            body["throttledFromMs"] = self.throttled_from_ms
        if self.run is not None:
            body["run"] = self.run
        if self.catch_up:
            body["catchUp"] = True
        if self.epoch:
            body["epoch"] = self.epoch
        if self.receives:
            body["receives"] = self.receives
        if self.holds:
            body["holds"] = self.holds
        if self.solo is not None:
            body["solo"] = self.solo
        if self.snapshot is not None:
            body["job"] = self.snapshot
        return body

    @classmethod
    def from_json(cls, body: str) -> "Dispatch":
        return cls.from_dict(json.loads(body))

    @classmethod
    def from_dict(cls, data: dict) -> "Dispatch":
        snapshot = data.get("job")
        return cls(
            kind=DispatchKind(data["kind"]),
            tenant_id=data["tenantId"],
            job_id=data["jobId"],
            execution_id=data["executionId"],
            due_ms=int(data["dueMs"]),
            generation=int(data["generation"]),
            attempt=int(data["attempt"]),
            throttled_from_ms=int(data["throttledFromMs"]) if data.get("throttledFromMs") is not None else None,
            run=int(data["run"]) if data.get("run") is not None else None,
            catch_up=data.get("catchUp") is True,
            epoch=int(data.get("epoch") or 0),
            receives=int(data.get("receives") or 0),
            holds=int(data.get("holds") or 0),
            solo=data["solo"] if isinstance(data.get("solo"), bool) else None,
            snapshot=snapshot if isinstance(snapshot, dict) else None,
        )


@dataclass(frozen=True)
class AttemptRecord:
    attempt: int
    status: ExecutionStatus
    started_ms: int
    finished_ms: int | None
    error: str | None = None

    def to_item(self) -> dict:
        return {
            "attempt": self.attempt,
            "status": self.status.value,
            "startedMs": self.started_ms,
            "finishedMs": self.finished_ms,
            "error": self.error,
        }

    @classmethod
    def from_item(cls, item: dict) -> "AttemptRecord":
        return cls(
            attempt=int(item["attempt"]),
            status=ExecutionStatus(item["status"]),
            started_ms=int(item["startedMs"]),
            finished_ms=int(item["finishedMs"]) if item.get("finishedMs") is not None else None,
            error=item.get("error"),
        )


@dataclass(frozen=True)
class Execution:
    job_id: str
    execution_id: str
    tenant_id: str
    scheduled_ms: int
    status: ExecutionStatus
    attempt: int
    started_ms: int | None = None
    finished_ms: int | None = None
    attempt_started_ms: int | None = None
    lease_until_ms: int | None = None
    retry_at_ms: int | None = None
    attempts: list[AttemptRecord] = field(default_factory=list)
    output: Any = None
    error: str | None = None
    progress: Any = None
    cancel_requested: bool = False
    callback_token_hash: str | None = None
    # A step of a run: the run's execution id and the step's name; the upstream steps that have
    # succeeded (a join starts when all have). A run: whether a redrive is reopening its steps.
    run_id: str | None = None
    step_name: str | None = None
    upstream_done: frozenset = frozenset()
    redriving: bool = False
    throttled_ms: int | None = None  # how long flow control held its start back
    run: int | None = None  # schedule bounds: a scheduled fire's number (Dispatch.run)
    # Catch-up that does not flood: a fire released late by the catch-up policy; or, SKIPPED with
    # skip_reason MISSED_WINDOW, the one record of the older missed occurrences (count, newest).
    catch_up: bool = False
    skip_reason: str | None = None
    skipped_count: int | None = None
    skipped_through_ms: int | None = None
    # Absence alerts (domain/expectations.py): MISSING or LATE as the check marked it, NOT_FIRED on
    # the record the check wrote for an occurrence with none; when a heartbeat said {"ok": true}.
    expectation: str | None = None
    reported_ok_ms: int | None = None
    expectation_at_ms: int | None = None  # when the check marked it
    alerted_ms: int | None = None  # when its alert went out (a crash before leaves it unset)
    # Container tasks (ECS_TASK): the running or last attempt's task (taskArn, cluster, container,
    # deadlineMs, attempt; once stopped exitCode, stoppedReason, stopCode, logUrl).
    task: dict | None = None
    generation: int | None = None  # the job's generation it was dispatched under
    backfill: bool = False  # first claimed by a backfill (POST /jobs/{id}/backfill): run late on purpose

    @property
    def late_ms(self) -> int | None:
        return None if self.started_ms is None else self.started_ms - self.scheduled_ms

    @property
    def duration_ms(self) -> int | None:
        if self.finished_ms is None or self.attempt_started_ms is None:
            return None
        return self.finished_ms - self.attempt_started_ms

    @classmethod
    def from_item(cls, item: dict) -> "Execution":
        def opt(key: str) -> int | None:
            return int(item[key]) if item.get(key) is not None else None

        return cls(
            job_id=item["jobId"],
            execution_id=item["executionId"],
            tenant_id=item["tenantId"],
            scheduled_ms=int(item["scheduledMs"]),
            status=ExecutionStatus(item["status"]),
            attempt=int(item.get("attempt", 0)),
            started_ms=opt("startedMs"),
            finished_ms=opt("finishedMs"),
            attempt_started_ms=opt("attemptStartedMs"),
            lease_until_ms=opt("leaseUntilMs"),
            retry_at_ms=opt("retryAtMs"),
            attempts=[AttemptRecord.from_item(a) for a in item.get("attempts", [])],
            output=json.loads(item["output"]) if item.get("output") else None,
            error=item.get("error"),
            progress=json.loads(item["progress"]) if item.get("progress") else None,
            cancel_requested=bool(item.get("cancelRequested")),
            callback_token_hash=item.get("callbackTokenHash"),
            run_id=item.get("runId"),
            step_name=item.get("stepName"),
            upstream_done=frozenset(item.get("upstreamDone") or ()),
            redriving=bool(item.get("redriving")),
            throttled_ms=int(item["throttledMs"]) if item.get("throttledMs") is not None else None,
            run=int(item["run"]) if item.get("run") is not None else None,
            catch_up=bool(item.get("catchUp")),
            skip_reason=item.get("skipReason"),
            skipped_count=int(item["skippedCount"]) if item.get("skippedCount") is not None else None,
            skipped_through_ms=int(item["skippedThroughMs"]) if item.get("skippedThroughMs") is not None else None,
            expectation=item.get("expectation"),
            reported_ok_ms=int(item["reportedOkMs"]) if item.get("reportedOkMs") is not None else None,
            expectation_at_ms=int(item["expectationAtMs"]) if item.get("expectationAtMs") is not None else None,
            alerted_ms=int(item["alertedMs"]) if item.get("alertedMs") is not None else None,
            task=_plain_task(item.get("task")),
            generation=int(item["generation"]) if item.get("generation") is not None else None,
            backfill=bool(item.get("backfill")),
        )


def ended_dispatch(execution: Execution) -> Dispatch:
    """The dispatch an execution was last sent as, from its record: for what follows its end when
    that end is written outside a worker's attempt (the API cancels it while it waits)."""
    kind = (DispatchKind.MANUAL if execution.execution_id.endswith(".manual")
            else DispatchKind.BACKFILL if execution.backfill else DispatchKind.FIRE)
    return Dispatch(kind, execution.tenant_id, execution.job_id, execution.execution_id, execution.scheduled_ms,
                    execution.generation or 0, execution.attempt, run=execution.run)


@dataclass(frozen=True)
class AttemptOutcome:
    """What one call of the target came to."""

    ok: bool
    status: ExecutionStatus  # SUCCEEDED, FAILED or TIMED_OUT for the attempt itself
    error: str | None = None
    output: Any = None
    accepted: bool = False  # a long-running target took the work (HTTP 202): it reports back
    retryable: bool = True  # False: repeating the call would not help (a 4xx other than 408, 429)
    retry_after_ms: int | None = None  # the target asked for this wait (Retry-After on 429, 503)
    task: dict | None = None  # a container task: the task this attempt started (or ended with)
    # The target refused the call for its rate or capacity before it started anything (RunTask
    # throttled): the worker gives the attempt back and holds the execution back (service/worker.py).
    throttled: bool = False


def _plain_task(value: Any) -> dict | None:
    """The stored task map with its numbers as ints (DynamoDB hands back Decimals)."""
    if not isinstance(value, dict):
        return None
    return {k: int(v) if hasattr(v, "as_integer_ratio") and not isinstance(v, (bool, float)) else v
            for k, v in value.items()}
