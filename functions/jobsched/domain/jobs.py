"""Jobs: what to run, where, and when."""
from __future__ import annotations

import hashlib
import json
import re
import uuid
import zlib
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from jobsched.domain.errors import Conflict
from jobsched.domain.item_size import MAX_ITEM_BYTES, attribute_bytes
from jobsched.domain.json_text import compact
from jobsched.domain.retry import RetryPolicy
from jobsched.domain.schedule import Schedule
from jobsched.domain.steps import Step, Workflow, step_body


class JobState(str, Enum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"


class CompletedReason(str, Enum):
    """Why a recurring job ended COMPLETED (schedule bounds)."""
    END_REACHED = "END_REACHED"  # no occurrence left before endAt
    MAX_RUNS_REACHED = "MAX_RUNS_REACHED"  # fired maxRuns times


class Priority(str, Enum):
    HIGH = "HIGH"
    NORMAL = "NORMAL"
    LOW = "LOW"


class OverlapPolicy(str, Enum):
    ALLOW = "ALLOW"
    SKIP = "SKIP"


class MisfirePolicy(str, Enum):
    RUN_ONCE = "RUN_ONCE"
    RUN_ALL = "RUN_ALL"
    SKIP = "SKIP"


# The occurrence ledger: a job keeps its newest pause spans (start, end or None while paused), so
# that an occurrence missed while paused is answered PAUSED without a record per occurrence.
MAX_PAUSED_SPANS = 20


def with_pause_started(spans: tuple, now_ms: int) -> tuple:
    return (tuple(spans) + ((now_ms, None),))[-MAX_PAUSED_SPANS:]


def with_pause_ended(spans: tuple, now_ms: int) -> tuple:
    if spans and spans[-1][1] is None:
        return tuple(spans[:-1]) + ((spans[-1][0], now_ms),)
    return tuple(spans)


# Catch-up that does not flood (misfirePolicy as an object): the bounds the API accepts.
MAX_CATCH_UP_LIMIT = 10_000
CATCH_UP_PER_MINUTE_LIMIT = 600


@dataclass(frozen=True)
class Expectation:
    """Absence alerts (`expect`): each fire must report success within `success_within_sec`
    (the target's answer, `complete`, or a heartbeat with {"ok": true}); otherwise it is marked
    MISSING and alerted once (service/expectations.py)."""
    success_within_sec: int

    def to_item(self) -> dict:
        return {"successWithinSec": self.success_within_sec}

    @classmethod
    def from_item(cls, item: dict) -> "Expectation":
        return cls(int(item["successWithinSec"]))


# `expect.successWithinSec` bounds: at least a minute (a check sooner than the tick's look-ahead
# would race its own fire's hand-off), at most 7 days (a timer's TTL is 7 days past its due).
EXPECT_MIN_SEC = 60
EXPECT_MAX_SEC = 7 * 86_400


@dataclass(frozen=True)
class CatchUp:
    """RUN_ALL, bounded: of the occurrences missed at once (an outage, a pause), only the newest
    `max_catch_up` run, released `per_minute` a minute; the older ones are recorded as one SKIPPED
    (reason MISSED_WINDOW) execution (domain/catchup.py)."""
    max_catch_up: int
    per_minute: int

    def to_item(self) -> dict:
        return {"maxCatchUp": self.max_catch_up, "catchUpPerMinute": self.per_minute}

    @classmethod
    def from_item(cls, item: dict) -> "CatchUp":
        return cls(int(item["maxCatchUp"]), int(item["catchUpPerMinute"]))


class TargetType(str, Enum):
    HTTP = "HTTP"
    SQS = "SQS"
    SNS = "SNS"
    EVENTBRIDGE = "EVENTBRIDGE"
    LAMBDA = "LAMBDA"
    ECS_TASK = "ECS_TASK"  # a container task on Fargate (domain/container_tasks.py)


@dataclass(frozen=True)
class Target:
    type: TargetType
    config: dict[str, Any]  # the target's own fields as the API names them (url, method, ...)

    def to_item(self) -> dict:
        return {"type": self.type.value, **self.config}

    @classmethod
    def from_item(cls, item: dict) -> "Target":
        config = {k: v for k, v in item.items() if k != "type"}
        return cls(type=TargetType(item["type"]), config=config)


def jitter_offset_ms(job_id: str, jitter_sec: int) -> int:
    """A deterministic offset in [0, jitter_sec] seconds, the same for every fire of the job."""
    if jitter_sec <= 0:
        return 0
    digest = hashlib.sha256(f"jitter:{job_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % (jitter_sec * 1000 + 1)


def new_job_id(now_ms: int) -> str:
    """Time-ordered (creation millisecond first), so a tenant's jobs list in creation order and
    jobs created while a client pages through the list only ever appear at its end. The "k" after
    the millisecond says the job's item lives on one of its tenant's JOB_KEY_SHARDS keys
    (job_partition); ids made before it (all hex) live on the tenant's own key."""
    return f"job_{now_ms:012x}{KEYED_BY_SHARD}{uuid.uuid4().hex[:19]}"


# Where a job's item lives in the Jobs table (partition `tenantId`): one tenant's jobs over 32
# keys, "<tenant>#<n>" with n = crc32(job id) mod 32 (docs/architecture.md, "Jobs: a tenant's
# keys"). One tenant at 10,000 fires a second reads each job once in the tick (strongly
# consistent, 1 RCU up to 4 KB) and, for one-time jobs, writes it once at its completion: about
# 10,000 RCU and 10,000 WCU a second on the tenant's jobs, 313 of each a key over 32 keys (31% of
# the 1,000 WCU a key may take). A tenant id never holds "#" (is_taggable), so the tenant is
# everything before it. Jobs made before the shards (ids without the "k") stay on the tenant's key.
JOB_KEY_SHARDS = 32

KEYED_BY_SHARD = "k"

_KEYED_BY_SHARD = re.compile(r"job_[0-9a-f]{12}k[0-9a-z]{19}")


def keyed_by_shard(job_id: str) -> bool:
    return _KEYED_BY_SHARD.fullmatch(job_id) is not None


def job_partition(tenant_id: str, job_id: str) -> str:
    """The Jobs table partition key of the job's item."""
    if keyed_by_shard(job_id):
        return f"{tenant_id}#{zlib.crc32(job_id.encode('utf-8')) % JOB_KEY_SHARDS}"
    return tenant_id


def tenant_partitions(tenant_id: str) -> list[str]:
    """Every key a tenant's jobs may live on: its own (jobs made before the shards), then its shards."""
    return [tenant_id, *(f"{tenant_id}#{n}" for n in range(JOB_KEY_SHARDS))]


def tenant_of(partition: str) -> str:
    """The tenant of a job item's partition key (its own, or one of its shards)."""
    return partition.split("#", 1)[0]


@dataclass(frozen=True)
class FlowControl:
    """Executions of one tenant sharing `key` never run more than `max_concurrency` at once nor
    start more than `rate_per_second` in any second (service/flow.py)."""
    key: str
    max_concurrency: int | None = None
    rate_per_second: int | None = None

    def to_item(self) -> dict:
        item: dict[str, Any] = {"key": self.key}
        if self.max_concurrency is not None:
            item["maxConcurrency"] = self.max_concurrency
        if self.rate_per_second is not None:
            item["ratePerSecond"] = self.rate_per_second
        return item

    @classmethod
    def from_item(cls, item: dict) -> "FlowControl":
        return cls(item["key"], item.get("maxConcurrency"), item.get("ratePerSecond"))


@dataclass(frozen=True)
class JobSpec:
    """What a tenant asks for: the mutable part of a job."""

    name: str
    schedule: Schedule
    target: Target | None  # None for a job with steps
    payload: Any = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_sec: int = 300
    priority: Priority = Priority.NORMAL
    overlap_policy: OverlapPolicy = OverlapPolicy.ALLOW
    misfire_policy: MisfirePolicy = MisfirePolicy.RUN_ONCE
    jitter_sec: int = 0
    # Long-running targets (HTTP 202): the longest gap allowed between heartbeats.
    heartbeat_timeout_sec: int = 300
    # Retry an HTTP 4xx other than 408 and 429 (by default such an answer ends the execution).
    retry_on_4xx: bool = False
    # Completion hooks (domain/hooks.py): called once per execution that ends SUCCEEDED / DEAD.
    on_success: Target | None = None
    on_failure: Target | None = None
    flow_control: FlowControl | None = None
    # Tags (key → value) a tenant finds and acts on its jobs by (GET /v1/jobs?tag=, bulk actions).
    tags: dict[str, str] = field(default_factory=dict)
    # A job whose fire runs a DAG of steps instead of calling one target.
    steps: Workflow | None = None
    # Schedule bounds and self-pausing: fire at most max_runs times; pause after this many
    # consecutive executions ended DEAD.
    max_runs: int | None = None
    pause_after_failures: int | None = None
    # Catch-up that does not flood: set only with misfire_policy RUN_ALL (the object form).
    catch_up: CatchUp | None = None
    # Exclusion calendars (domain/calendars.py): an occurrence on one of their dates is SKIPPED.
    exclude_calendars: tuple[str, ...] = ()
    # Absence alerts: each fire must report success within this many seconds.
    expect: "Expectation | None" = None


@dataclass(frozen=True)
class Job:
    tenant_id: str
    job_id: str
    spec: JobSpec
    state: JobState
    generation: int  # bumped by every change that invalidates timers and in-flight messages
    version: int  # bumped by every write; the API's optimistic-concurrency token
    created_ms: int
    updated_ms: int
    # Which shard of the tenant's active-jobs counter this job holds a place in (0: the unsharded
    # counter every job held before counters were sharded).
    quota_shard: int = 0
    paused_reason: str | None = None  # why it was paused (shown on the job), while PAUSED
    # Schedule bounds and self-pausing: fires counted as last recorded on the item (the live count
    # rides the FIRE timers: service/handoff.py), why it COMPLETED, and the executions that ended
    # DEAD in a row (the last one's id makes a repeated end count once).
    run_count: int = 0
    completed_reason: CompletedReason | None = None
    consecutive_failures: int = 0
    last_dead_execution: str | None = None
    # The occurrence ledger: the newest pause spans (start ms, end ms or None while paused), and
    # since when the schedule is today's (its creation, or its last replacement: occurrences of
    # today's schedule before it never existed).
    paused_spans: tuple = ()
    schedule_since_ms: int = 0

    def fires(self) -> bool:
        return self.state is JobState.ACTIVE

    # jitterSec spreads a job's fire instants by a fixed offset of its own, so that thousands of
    # "0 * * * *" jobs do not all fire in the same second. Schedules compute nominal instants;
    # timers, dispatches and execution ids use the fire instant.
    def fire_at(self, nominal_ms: int) -> int:
        return nominal_ms + jitter_offset_ms(self.job_id, self.spec.jitter_sec)

    def nominal_of(self, fire_ms: int) -> int:
        return fire_ms - jitter_offset_ms(self.job_id, self.spec.jitter_sec)

    # Each change below bumps the generation: timers and in-flight messages of the old one are
    # recognised as stale and dropped.
    def _changed(self, now_ms: int, **changes) -> "Job":
        return replace(self, generation=self.generation + 1, version=self.version + 1, updated_ms=now_ms, **changes)

    def paused(self, now_ms: int, reason: str | None = None) -> "Job":
        if self.state is JobState.PAUSED:
            return self
        if self.state is not JobState.ACTIVE:
            raise Conflict(f"job is {self.state.value}; only an ACTIVE job can be paused")
        if not self.spec.schedule.recurring:
            raise Conflict("only recurring (CRON, RATE) jobs can be paused; cancel a one-off job instead")
        return self._changed(now_ms, state=JobState.PAUSED, paused_reason=reason,
                             paused_spans=with_pause_started(self.paused_spans, now_ms))

    def resumed(self, now_ms: int, run_count: int | None = None) -> "Job":
        """ACTIVE again, its failure count cleared. `run_count`: the fires counted so far; a job
        that has used up its runs, or has no occurrence left before its end, is COMPLETED instead
        (it would never fire again)."""
        if self.state is JobState.ACTIVE:
            return self
        if self.state is not JobState.PAUSED:
            raise Conflict(f"job is {self.state.value}; only a PAUSED job can be resumed")
        runs = max(self.run_count, run_count or 0)
        ended = self.end_reason(runs, now_ms)
        if ended is not None:
            return self._changed(now_ms, state=JobState.COMPLETED, paused_reason=None, completed_reason=ended,
                                 run_count=runs, consecutive_failures=0, last_dead_execution=None,
                                 paused_spans=with_pause_ended(self.paused_spans, now_ms))
        return self._changed(now_ms, state=JobState.ACTIVE, paused_reason=None, run_count=runs,
                             consecutive_failures=0, last_dead_execution=None,
                             paused_spans=with_pause_ended(self.paused_spans, now_ms))

    def end_reason(self, run_count: int, after_ms: int) -> CompletedReason | None:
        """Why a recurring job with `run_count` fires behind it would fire no more after `after_ms`;
        None while it still has fires left."""
        if not self.spec.schedule.recurring:
            return None
        if self.spec.max_runs is not None and run_count >= self.spec.max_runs:
            return CompletedReason.MAX_RUNS_REACHED
        if self.spec.schedule.next_fire_after(self.nominal_of(after_ms)) is None:
            return CompletedReason.END_REACHED
        return None

    def cancelled(self, now_ms: int) -> "Job":
        if self.state is JobState.CANCELLED:
            return self
        return self._changed(now_ms, state=JobState.CANCELLED, paused_spans=with_pause_ended(self.paused_spans, now_ms))

    def replaced(self, spec: "JobSpec", now_ms: int) -> "Job":
        if self.state not in (JobState.ACTIVE, JobState.PAUSED):
            raise Conflict(f"job is {self.state.value}; create a new job instead")
        return self._changed(now_ms, spec=spec, schedule_since_ms=now_ms)

    def for_step(self, step: Step, run_id: str, upstream_outputs: dict[str, Any]) -> "Job":
        """What one step's attempt runs: the step's target (told its run and its name), its retry
        policy and timeout (the job's where it gives none), and the job's payload plus its direct
        upstream steps' outputs. A view for the worker (it keeps the steps: its end moves the run on):
        never written."""
        target = step.target
        if target.type.value == "HTTP":
            headers = {**(target.config.get("headers") or {}), "X-Run-Id": run_id, "X-Step": step.name}
            target = Target(target.type, {**target.config, "headers": headers})
        spec = replace(self.spec, target=target, payload=step_body(self.spec.payload, upstream_outputs),
                       retry=step.retry or self.spec.retry, timeout_sec=step.timeout_sec or self.spec.timeout_sec)
        return replace(self, spec=spec, version=-1)

    def for_hook(self, target: Target, body: Any) -> "Job":
        """What a completion hook's call runs: the hook's target with the execution's summary as
        its body, under the job's retry policy. A view for the worker: never written."""
        spec = replace(self.spec, target=target, payload=body, steps=None, on_success=None, on_failure=None)
        return replace(self, spec=spec, version=-1)

    def to_item(self) -> dict:
        spec = self.spec
        if (spec.target is None and spec.steps is None) or self.version < 0:
            raise ValueError(f"job {self.job_id}: a view (Job.for_hand_off, Job.for_step) is never written")
        return {
            "tenantId": job_partition(self.tenant_id, self.job_id),  # its key: the tenant's, or one of its shards
            "jobId": self.job_id,
            "name": spec.name,
            # JSON text rather than nested maps: one attribute each, cheap to marshal (the tick
            # batch-reads thousands a minute); the payload keeps floats and nesting exactly.
            "schedule": _json(spec.schedule.to_item()),
            **({"target": _json(spec.target.to_item())} if spec.target is not None else {}),
            **({"steps": _json(spec.steps.to_item())} if spec.steps is not None else {}),
            "payload": _json(spec.payload),
            "retryPolicy": _json(spec.retry.to_item()),
            "timeoutSec": spec.timeout_sec,
            "priority": spec.priority.value,
            "overlapPolicy": spec.overlap_policy.value,
            "misfirePolicy": spec.misfire_policy.value,
            "jitterSec": spec.jitter_sec,
            "heartbeatTimeoutSec": spec.heartbeat_timeout_sec,
            **({"retryOn4xx": True} if spec.retry_on_4xx else {}),
            **({"onSuccess": _json(spec.on_success.to_item())} if spec.on_success else {}),
            **({"onFailure": _json(spec.on_failure.to_item())} if spec.on_failure else {}),
            **({"flowControl": _json(spec.flow_control.to_item())} if spec.flow_control else {}),
            **({"tags": dict(spec.tags)} if spec.tags else {}),
            **({"pausedReason": self.paused_reason} if self.paused_reason else {}),
            # Schedule bounds and self-pausing.
            **({"maxRuns": spec.max_runs} if spec.max_runs is not None else {}),
            **({"pauseAfterFailures": spec.pause_after_failures} if spec.pause_after_failures is not None else {}),
            **({"runCount": self.run_count} if self.run_count else {}),
            **({"completedReason": self.completed_reason.value} if self.completed_reason else {}),
            **({"consecutiveFailures": self.consecutive_failures} if self.consecutive_failures else {}),
            **({"lastDeadExecution": self.last_dead_execution} if self.last_dead_execution else {}),
            "state": self.state.value,
            "generation": self.generation,
            "version": self.version,
            "createdMs": self.created_ms,
            "updatedMs": self.updated_ms,
            **({"quotaShard": self.quota_shard} if self.quota_shard else {}),
            # Catch-up that does not flood: absent for the string forms of misfirePolicy.
            **({"catchUp": _json(spec.catch_up.to_item())} if spec.catch_up else {}),
            # Exclusion calendars.
            **({"excludeCalendars": list(spec.exclude_calendars)} if spec.exclude_calendars else {}),
            # The occurrence ledger: written with the job's own writes, never per occurrence.
            **({"pausedSpans": [[a] if b is None else [a, b] for a, b in self.paused_spans]}
               if self.paused_spans else {}),
            **({"scheduleSinceMs": self.schedule_since_ms} if self.schedule_since_ms else {}),
            # Absence alerts.
            **({"expect": _json(spec.expect.to_item())} if spec.expect else {}),
        }

    @classmethod
    def from_item(cls, item: dict) -> "Job":
        spec = JobSpec(
            name=item["name"],
            schedule=Schedule.from_item(_parsed(item["schedule"])),
            target=Target.from_item(_parsed(item["target"])) if "target" in item else None,
            steps=_workflow(_parsed(item["steps"])) if "steps" in item else None,
            # Absent when the reader projected it away (the tick never needs the payload).
            payload=json.loads(item["payload"]) if "payload" in item else None,
            retry=RetryPolicy.from_item(_parsed(item["retryPolicy"])),
            timeout_sec=int(item["timeoutSec"]),
            priority=Priority(item["priority"]),
            overlap_policy=OverlapPolicy(item.get("overlapPolicy", "ALLOW")),
            misfire_policy=MisfirePolicy(item.get("misfirePolicy", "RUN_ONCE")),
            jitter_sec=int(item.get("jitterSec", 0)),
            heartbeat_timeout_sec=int(item.get("heartbeatTimeoutSec", 300)),
            retry_on_4xx=bool(item.get("retryOn4xx", False)),
            on_success=Target.from_item(_parsed(item["onSuccess"])) if "onSuccess" in item else None,
            on_failure=Target.from_item(_parsed(item["onFailure"])) if "onFailure" in item else None,
            flow_control=FlowControl.from_item(_parsed(item["flowControl"])) if "flowControl" in item else None,
            tags={str(k): str(v) for k, v in (item.get("tags") or {}).items()},
            # Schedule bounds and self-pausing.
            max_runs=int(item["maxRuns"]) if "maxRuns" in item else None,
            pause_after_failures=int(item["pauseAfterFailures"]) if "pauseAfterFailures" in item else None,
            # Catch-up that does not flood.
            catch_up=CatchUp.from_item(_parsed(item["catchUp"])) if "catchUp" in item else None,
            # Exclusion calendars.
            exclude_calendars=tuple(item.get("excludeCalendars") or ()),
            # Absence alerts.
            expect=Expectation.from_item(_parsed(item["expect"])) if "expect" in item else None,
        )
        return cls(
            tenant_id=tenant_of(item["tenantId"]),
            job_id=item["jobId"],
            spec=spec,
            state=JobState(item["state"]),
            generation=int(item["generation"]),
            version=int(item["version"]),
            created_ms=int(item["createdMs"]),
            updated_ms=int(item["updatedMs"]),
            quota_shard=int(item.get("quotaShard", 0)),
            paused_reason=item.get("pausedReason"),
            # Schedule bounds and self-pausing.
            run_count=int(item.get("runCount", 0)),
            completed_reason=CompletedReason(item["completedReason"]) if "completedReason" in item else None,
            consecutive_failures=int(item.get("consecutiveFailures", 0)),
            last_dead_execution=item.get("lastDeadExecution"),
            paused_spans=tuple((int(s[0]), int(s[1]) if len(s) > 1 else None) for s in item.get("pausedSpans") or ()),
            schedule_since_ms=int(item.get("scheduleSinceMs", 0)),
        )


    @classmethod
    def for_hand_off(cls, item: dict) -> "Job":
        """Only what handing off a timer reads (store/jobs.py HAND_OFF_ATTRIBUTES): schedule,
        priority, misfire policy, jitter, maxRuns, state and generation. The rest is absent (target and
        retry policy None, name empty, counters 0): such a job is never written (to_item
        refuses) nor shown."""
        spec = JobSpec(
            name="",
            schedule=Schedule.from_item(_parsed(item["schedule"])),
            target=None,  # type: ignore[arg-type]
            retry=None,  # type: ignore[arg-type]
            timeout_sec=0,
            priority=Priority(item["priority"]),
            misfire_policy=MisfirePolicy(item.get("misfirePolicy", "RUN_ONCE")),
            jitter_sec=int(item.get("jitterSec", 0)),
            max_runs=int(item["maxRuns"]) if "maxRuns" in item else None,  # schedule bounds
            # Catch-up that does not flood (HAND_OFF_ATTRIBUTES reads it).
            catch_up=CatchUp.from_item(_parsed(item["catchUp"])) if "catchUp" in item else None,
            # Exclusion calendars: the hand-off skips an occurrence on one of their dates.
            exclude_calendars=tuple(item.get("excludeCalendars") or ()),
            # Absence alerts: the hand-off writes a CHECK timer with each FIRE timer of such a job.
            expect=Expectation.from_item(_parsed(item["expect"])) if "expect" in item else None,
        )
        return cls(tenant_id=tenant_of(item["tenantId"]), job_id=item["jobId"], spec=spec, state=JobState(item["state"]),
                   generation=int(item["generation"]), version=0, created_ms=0, updated_ms=0)


# A job item's largest size as DynamoDB counts it (attribute names included): its 400 KB less room
# for what later writes add without a new request (expiresAt, counters and reasons that other
# writes set, a longer tenant id than the probe's). The probe below already holds the largest
# pause reason (500 characters of 4 UTF-8 bytes) and the largest numbers.
JOB_ITEM_RESERVE_BYTES = 2048
MAX_JOB_ITEM_BYTES = MAX_ITEM_BYTES - JOB_ITEM_RESERVE_BYTES
_PROBE_TENANT = "t" * 64
_MAX_NUMBER = 2 ** 53 - 1


def job_item_sizes(spec: JobSpec) -> dict[str, int]:
    """Each attribute's bytes in the item of a job with this spec, its bookkeeping at its largest:
    what a create or replace checks before any write (a 400 KB item would be refused by DynamoDB
    with a ValidationException, after the idempotency record and the quota place were taken)."""
    probe = Job(tenant_id=_PROBE_TENANT, job_id=new_job_id(_MAX_NUMBER // 1000), spec=spec, state=JobState.PAUSED,
                generation=_MAX_NUMBER, version=_MAX_NUMBER, created_ms=_MAX_NUMBER, updated_ms=_MAX_NUMBER,
                quota_shard=_MAX_NUMBER, paused_reason="\U0001F600" * 500,
                # Schedule bounds and self-pausing: the bookkeeping at its largest.
                run_count=_MAX_NUMBER, completed_reason=CompletedReason.MAX_RUNS_REACHED,
                consecutive_failures=_MAX_NUMBER, last_dead_execution="e" * 128,
                # The occurrence ledger: every pause span kept, at its largest numbers.
                paused_spans=((_MAX_NUMBER, _MAX_NUMBER),) * MAX_PAUSED_SPANS, schedule_since_ms=_MAX_NUMBER)
    return {name: attribute_bytes(name, value) for name, value in probe.to_item().items()}


def _workflow(items: list[dict]) -> Workflow:
    return Workflow(tuple(
        Step(name=i["name"], target=Target.from_item(i["target"]), depends_on=tuple(i.get("dependsOn", ())),
             retry=RetryPolicy.from_item(i["retryPolicy"]) if "retryPolicy" in i else None,
             timeout_sec=int(i["timeoutSec"]) if "timeoutSec" in i else None)
        for i in items))


def _json(value: Any) -> str:
    # UTF-8 text, as size-checked: an item holds the payload in the bytes the limit counted.
    return compact(value)


def _parsed(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
