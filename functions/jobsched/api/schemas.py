"""Response models: the documented shapes. Responses are built by mapping.py; tests validate
real responses against these models, and the OpenAPI document is generated from them."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jobsched.api.models import RetryPolicyModel


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CatchUpPolicy(_Out):
    """Catch-up that does not flood: misfirePolicy's object form, as stored."""
    policy: Literal["RUN_ALL"]
    maxCatchUp: int
    catchUpPerMinute: int


class Job(_Out):
    jobId: str
    name: str
    type: Literal["ONE_TIME", "DELAYED", "CRON", "RATE"]
    schedule: str | None
    timezone: str
    runAt: str | None = None
    delaySeconds: int | None = None
    startAt: str | None = None
    endAt: str | None = None
    target: dict[str, Any] | None
    steps: list[dict[str, Any]] | None = None
    payload: Any
    retryPolicy: RetryPolicyModel
    timeoutSec: int
    priority: Literal["HIGH", "NORMAL", "LOW"]
    overlapPolicy: Literal["ALLOW", "SKIP"]
    misfirePolicy: Literal["RUN_ONCE", "RUN_ALL", "SKIP"] | CatchUpPolicy
    jitterSec: int
    heartbeatTimeoutSec: int
    retryOn4xx: bool
    onSuccess: dict[str, Any] | None = None
    onFailure: dict[str, Any] | None = None
    flowControl: dict[str, Any] | None = None
    tags: dict[str, str] = {}
    pausedReason: str | None = None
    # Schedule bounds and self-pausing.
    maxRuns: int | None = None
    pauseAfterFailures: int | None = None
    runCount: int = 0
    completedReason: Literal["END_REACHED", "MAX_RUNS_REACHED"] | None = None
    excludeCalendars: list[str] = []  # exclusion calendars: no fire on their dates
    expect: dict[str, int] | None = None  # absence alerts: {"successWithinSec": N}
    state: Literal["ACTIVE", "PAUSED", "COMPLETED", "CANCELLED"]
    nextFireAt: str | None
    createdAt: str
    updatedAt: str
    version: int
    region: str  # the job's home region (API.md, "Regions")


ExecutionStatusName = Literal["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "LOST", "CANCELLED",
                              "SKIPPED", "DEAD", "UPSTREAM_FAILED"]


class Attempt(_Out):
    attempt: int
    status: ExecutionStatusName
    startedAt: str | None
    finishedAt: str | None
    error: str | None


class StepSummary(_Out):
    name: str
    executionId: str
    status: ExecutionStatusName
    attempt: int
    startedAt: str | None
    finishedAt: str | None
    error: str | None


class ContainerTask(_Out):
    """Container tasks (ECS_TASK): the attempt's task; exit code and reason once it stopped."""
    taskArn: str
    exitCode: int | None
    stoppedReason: str | None
    logUrl: str | None


class Execution(_Out):
    executionId: str
    jobId: str
    scheduledAt: str
    status: ExecutionStatusName
    attempt: int
    startedAt: str | None
    finishedAt: str | None
    durationMs: int | None
    lateMs: int | None
    attempts: list[Attempt]
    output: Any
    error: str | None
    progress: Any
    nextAttemptAt: str | None
    cancelRequested: bool
    throttledMs: int | None = None  # flow control held its start back this long
    traceId: str  # W3C trace id that every attempt's target call carries (traceparent)
    steps: list[StepSummary] | None = None  # a run (a job with steps): each step, in the job's order
    runId: str | None = None  # a step: its run
    step: str | None = None  # a step: its name
    # Catch-up that does not flood: a fire released late by the catch-up policy (its lateMs says
    # how late); a SKIPPED record of the occurrences it left out: reason MISSED_WINDOW, their
    # count, and the newest one's instant (scheduledAt is the oldest's).
    catchUp: bool = False
    backfill: bool = False  # first run by a backfill: late on purpose, counted in no lateness (stats)
    # SKIPPED: why (MISSED_WINDOW above; EXCLUDED: a date of one of the job's exclusion calendars).
    # OVERLAP: overlapPolicy SKIP found the previous run still running.
    reason: Literal["MISSED_WINDOW", "EXCLUDED", "OVERLAP"] | None = None
    skippedCount: int | None = None
    skippedThrough: str | None = None
    # Absence alerts: MISSING (no success within expect.successWithinSec; alerted), LATE (a success
    # came after that), NOT_FIRED (a record the check wrote for an occurrence that never fired).
    expectation: Literal["MISSING", "LATE", "NOT_FIRED"] | None = None
    task: ContainerTask | None = None  # a container task's execution: its current or last task


class SigningSecret(_Out):
    secret: str  # shown this once
    createdAt: str
    previousValidUntil: str | None  # until when the replaced secret keeps signing (none: no previous one)


class HeartbeatAnswer(_Out):
    status: ExecutionStatusName
    cancelRequested: bool
    leaseUntil: str | None


class JobList(_Out):
    items: list[Job]
    nextCursor: str | None


class Lateness(_Out):
    p50: int | None
    p99: int | None
    max: int | None


class JobStats(_Out):
    window: str
    # The part of the window the figures cover: all of it unless `complete` is false (a job with
    # more than 20,000 executions in the window: the newest 20,000).
    from_: str = Field(alias="from")
    to: str
    complete: bool
    fires: int  # occurrences of the schedule that fired (not skipped, not cancelled, not triggers)
    succeeded: int
    failed: int  # waiting for a retry after a failed attempt
    dead: int
    skipped: int
    running: int  # pending or running now
    lateMs: Lateness
    missing: int | None  # absence alerts: occurrences marked MISSING or NOT_FIRED by their check


class Occurrence(_Out):
    """One nominal occurrence of a job's schedule and what became of it (the occurrence ledger)."""
    scheduledAt: str
    outcome: Literal["FIRED", "SKIPPED", "PENDING", "NOT_FIRED"]
    reason: Literal["OVERLAP", "PAUSED", "MISSED_WINDOW", "EXCLUDED", "BEFORE_START", "AFTER_END",
                    "MAX_RUNS_REACHED", "CANCELLED", "DEDUPLICATED"] | None
    executionId: str | None
    lateMs: int | None
    status: ExecutionStatusName | None
    expectation: Literal["MISSING", "LATE", "NOT_FIRED"] | None = None
    detail: str | None = None  # in words: the pause and its reason, the run that covered it, ...


class OccurrenceList(_Out):
    items: list[Occurrence]
    nextCursor: str | None
    from_: str = Field(alias="from")
    to: str


class ExecutionList(_Out):
    items: list[Execution]
    nextCursor: str | None


class BulkAnswer(_Out):
    matched: int
    applied: int  # with dryRun: how many the action would change (nothing is changed)
    jobIds: list[str]  # the first 100 matched
    bulkId: str | None = None  # set while more pages remain: repeat the request with it
    done: bool = True


class BackfillAnswer(_Out):
    count: int
    executionIds: list[str]


class CatchUpPreview(_Out):
    policy: Literal["RUN_ALL"]
    maxCatchUp: int
    catchUpPerMinute: int
    drainSeconds: int  # from the first missed occurrence released to the last


class SkippedOccurrence(_Out):
    at: str
    reason: Literal["EXCLUDED"]


class Preview(_Out):
    fireTimes: list[str]
    catchUp: CatchUpPreview | None = None  # catch-up that does not flood: with maxCatchUp / catchUpPerMinute
    skipped: list[SkippedOccurrence] = []  # occurrences an exclusion calendar skips, among those walked


class Calendar(_Out):
    name: str
    description: str
    dates: list[str]
    createdAt: str
    updatedAt: str
    version: int


class CalendarList(_Out):
    items: list[Calendar]
    nextCursor: str | None


class Health(_Out):
    # Regions (API.md): "degraded" (503) when this region holds no segment of a multi-region
    # deployment, so that DNS health checks send clients to a region that does.
    status: Literal["ok", "degraded"]
    # With a valid key only (without one, the public answer is the status alone).
    region: str | None = None
    ownedSegments: list[int] | None = None


class ErrorDetail(_Out):
    field: str
    message: str


class ErrorBody(_Out):
    code: str
    message: str
    details: list[ErrorDetail]


class Error(_Out):
    error: ErrorBody


class BatchResult(_Out):
    index: int
    status: int  # 201 created (or the same job again, for a repeated idempotency key), else the error's status
    job: Job | None = None
    error: ErrorBody | None = None


class BatchAnswer(_Out):
    results: list[BatchResult]  # one per job of the request, in its order
