"""Explicit mapping from the API's models to the domain (the other way, what the API answers: answers.py)."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from jobsched.domain.target_envelopes import largest_payload_bytes
from jobsched.api.models import MAX_PAYLOAD_BYTES, MAX_TASK_TIMEOUT_SEC, MAX_TIMEOUT_SEC, JobRequest, MisfirePolicyModel
from jobsched.domain.container_tasks import MAX_OVERRIDES_CHARS, largest_fixed_overrides
from jobsched.domain.task_networks import TaskNetworks, network_problem
from jobsched.domain.endpoints import OwnEndpoints, TargetUrl
from jobsched.domain.errors import FieldProblem, InvalidRequest, PayloadTooLarge, UnprocessableRequest
from jobsched.domain.calendars import checked_job_calendars
from jobsched.domain.json_text import size_bytes
from jobsched.domain.catchup import release_offset_ms
from jobsched.domain.jobs import CATCH_UP_PER_MINUTE_LIMIT, MAX_CATCH_UP_LIMIT, CatchUp
from jobsched.domain.jobs import EXPECT_MAX_SEC, EXPECT_MIN_SEC, Expectation  # absence alerts
from jobsched.domain.jobs import (MAX_JOB_ITEM_BYTES, FlowControl, JobSpec, job_item_sizes, MisfirePolicy,
                                  OverlapPolicy, Priority, Target, TargetType)
from jobsched.domain.retry import Backoff, RetryPolicy
from jobsched.domain.steps import Step, Workflow
from jobsched.domain.aws_expressions import is_aws_expression, parse_at
from jobsched.domain.schedule import (END_OF_TIME_MS, Schedule, checked_zone, cron_schedule, delayed_schedule,
                                      local_instant, one_time_schedule, parse_instant, rate_schedule)

# A one-time job whose runAt is at most this far in the past runs at once; further is refused.
RUN_AT_GRACE_MS = 5 * 60_000
SUPPORTED_TARGETS = set(TargetType)

_FIELDS_BY_TYPE = {
    "ONE_TIME": {"runAt", "schedule"},
    "DELAYED": {"delaySeconds"},
    "CRON": {"schedule", "timezone", "startAt", "endAt"},
    "RATE": {"schedule", "startAt", "endAt"},
}
_SCHEDULE_FIELDS = {"schedule", "runAt", "delaySeconds", "startAt", "endAt"}


@dataclass(frozen=True)
class TargetScope:
    """What IAM can allow a tenant's AWS target at all: this account's resources (when tagged with
    the tenant: unknown here, the worker's call finds out) and those matching the deployment's
    targetArnPatterns. A target outside both is denied whatever its tags, so it is refused at
    creation (422) instead of failing at every run. Empty account: no check (tests of mapping)."""

    account: str = ""
    patterns: tuple[str, ...] = ()
    # ECS_TASK: the task definitions (ARN patterns) and clusters the deployment grants; None: no
    # check (tests of mapping); empty: nothing granted, every container job is refused.
    task_definitions: tuple[str, ...] | None = None
    clusters: tuple[str, ...] | None = None
    # The deployment's regions: a task runs in its task definition's region, and only there does
    # an EventBridge rule of ours hear its end. Empty: no check (tests of mapping).
    regions: tuple[str, ...] = ()

    def task_region_problem(self, config: dict) -> tuple[str, str] | None:
        """(field, reason) when the task would run where the deployment hears no task end (it would
        end only by the worker's 15-minute look) or where its cluster is not; None: fine."""
        definition, cluster = (_arn_region(str(config.get(k, ""))) for k in ("taskDefinition", "cluster"))
        if self.regions and definition and definition not in self.regions:
            return "taskDefinition", (f"is in {definition}, not in the deployment's region"
                                      f"{'s' if len(self.regions) > 1 else ''} ({', '.join(self.regions)}): "
                                      "the scheduler would not hear the task end")
        # A task definition named by family runs in this region (the first of the deployment's).
        runs_in = definition or (self.regions[0] if self.regions else None)
        if cluster and runs_in and cluster != runs_in:
            return "cluster", f"is in {cluster}, not in the task definition's region ({runs_in})"
        return None

    def grants_task_definition(self, arn: str) -> bool:
        return self.task_definitions is None or any(_arn_glob(p).fullmatch(arn) for p in self.task_definitions)

    def grants_cluster(self, cluster: str) -> bool:
        if self.clusters is None:
            return True
        name = cluster.rsplit("/", 1)[-1]
        return any(_arn_glob(p).fullmatch(cluster) or _arn_glob(p.rsplit("/", 1)[-1]).fullmatch(name)
                   for p in self.clusters)

    def reachable(self, target_type: TargetType, address: str) -> bool:
        if not self.account:
            return True
        arn = target_arn(target_type, address, self.account)
        if arn is None or arn.split(":")[4] == self.account:
            return True
        return any(_arn_glob(pattern).fullmatch(arn) for pattern in self.patterns)


def _arn_region(value: str) -> str | None:
    parts = value.split(":")
    return parts[3] or None if value.startswith("arn:") and len(parts) > 3 else None


def target_arn(target_type: TargetType, address: str, account: str) -> str | None:
    """The ARN IAM sees for a target's address (a queue URL, a bare function or bus name are in
    the caller's account and region: '*' stands for the region); None when it cannot be told."""
    if address.startswith("arn:"):
        return address if len(address.split(":")) >= 6 else None
    if target_type is TargetType.SQS:
        parts = urlsplit(address)
        path = parts.path.strip("/").split("/")
        host = (parts.hostname or "").split(".")
        if len(path) == 2 and path[0].isdigit():
            region = host[1] if len(host) > 2 and host[0] == "sqs" else "*"
            return f"arn:aws:sqs:{region}:{path[0]}:{path[1]}"
        return None
    if target_type is TargetType.LAMBDA:
        parts = address.split(":")
        if "function" in parts[:-1] and parts.index("function") == 1 and parts[0].isdigit():
            return f"arn:aws:lambda:*:{parts[0]}:function:{parts[2]}"
        return f"arn:aws:lambda:*:{account}:function:{parts[0]}"
    if target_type is TargetType.EVENTBRIDGE:
        return f"arn:aws:events:*:{account}:event-bus/{address}"
    return None


def _arn_glob(pattern: str) -> re.Pattern:
    """IAM's ARN wildcards: * any run of characters, ? one character."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern))


@dataclass(frozen=True)
class OwnResources:
    """The scheduler's own queues, topics and functions: never a job's target. CloudFormation
    names every resource of the stack "<stack name>-...", and the lanes are known exactly."""

    name_prefix: str = ""
    addresses: frozenset[str] = frozenset()
    endpoints: OwnEndpoints = OwnEndpoints()  # HTTP: the local stack's API and emulator
    scope: TargetScope = TargetScope()  # what IAM can allow a tenant's AWS target at all
    # ALLOW_PRIVATE_TARGETS (the worker's call-time rule): False refuses at creation an address
    # literal, in any spelling, that the call would refuse. True: no check (tests of mapping).
    allow_private: bool = True

    def owns(self, address: str) -> bool:
        if address.rstrip("/") in self.addresses:
            return True
        return bool(self.name_prefix) and resource_name(address).lower().startswith(self.name_prefix.lower())


def resource_name(address: str) -> str:
    """The resource's own name in a queue URL or an SQS, SNS, Lambda or event bus ARN."""
    if address.startswith("arn:"):
        parts = address.split(":")
        if len(parts) > 6 and parts[2] == "lambda":
            return parts[6]
        resource = parts[5] if len(parts) > 5 else ""
        return resource.split("/", 1)[-1]
    if "/" not in address:
        # Lambda also takes a bare name, "name:alias", "function:name" and the partial ARN
        # "123456789012:function:name": each names the same function.
        parts = address.split(":")
        return parts[parts.index("function") + 1] if "function" in parts[:-1] else parts[0]
    return address.rstrip("/").rsplit("/", 1)[-1]


TARGET_ADDRESS_FIELDS = {TargetType.SQS: "queueUrl", TargetType.SNS: "topicArn", TargetType.LAMBDA: "functionArn",
                         TargetType.EVENTBRIDGE: "eventBusName"}


def to_spec(request: JobRequest, now_ms: int, own: OwnResources = OwnResources()) -> JobSpec:
    payload_size = size_bytes(request.payload)
    if payload_size > MAX_PAYLOAD_BYTES:
        raise PayloadTooLarge(
            f"payload: {payload_size} bytes is over the 256 KB limit", [FieldProblem("payload", "over 256 KB")]
        )
    target = _target(request.target, "target", own) if request.target is not None else None
    steps = _workflow(request.steps, own) if request.steps is not None else None
    for where, checked in ([("target", target)] if target else []) + [
            (f"steps.{i}.target", step.target) for i, step in enumerate(steps.steps if steps else ())]:
        _fits_with_envelope(payload_size, checked, where)
    _check_timeouts(request, target, steps)
    schedule = _schedule(request, now_ms)
    if schedule.run_at_ms is not None and schedule.run_at_ms + request.jitterSec * 1000 > END_OF_TIME_MS:
        # A recurring schedule stops an hour (the most jitter) before the end of time by itself.
        raise UnprocessableRequest.for_field("jitterSec", "would move the run past the end of time, "
                                                          "9999-01-01T00:00:00Z")
    spec = JobSpec(
        name=request.name,
        schedule=schedule,
        target=target,
        steps=steps,
        payload=request.payload,
        retry=_retry(request.retryPolicy, "retryPolicy"),
        timeout_sec=request.timeoutSec,
        priority=Priority(request.priority),
        overlap_policy=OverlapPolicy(request.overlapPolicy),
        misfire_policy=_misfire_policy(request.misfirePolicy),
        jitter_sec=request.jitterSec,
        heartbeat_timeout_sec=request.heartbeatTimeoutSec,
        retry_on_4xx=request.retryOn4xx,
        on_success=_hook_target(request.onSuccess, "onSuccess", own) if request.onSuccess is not None else None,
        on_failure=_hook_target(request.onFailure, "onFailure", own) if request.onFailure is not None else None,
        tags=dict(request.tags),
        flow_control=FlowControl(request.flowControl.key, request.flowControl.maxConcurrency,
                                 request.flowControl.ratePerSecond) if request.flowControl is not None else None,
        # Schedule bounds and self-pausing (checked in _schedule: recurring jobs only).
        max_runs=request.maxRuns,
        pause_after_failures=request.pauseAfterFailures,
        # Catch-up that does not flood.
        catch_up=_catch_up(request.misfirePolicy, schedule),
        # Absence alerts.
        expect=_expect(request),
    )
    if spec.max_runs is not None and spec.catch_up is not None:
        # The fires a catch-up releases carry no run number: a bound on runs could not hold.
        raise UnprocessableRequest.for_field("maxRuns", "cannot be combined with a catch-up policy "
                                             "(misfirePolicy with maxCatchUp / catchUpPerMinute)")
    spec = _with_exclusions(spec, request)  # exclusion calendars
    _check_item_size(spec)
    return spec


def _expect(request: JobRequest) -> Expectation | None:
    """Absence alerts: `expect.successWithinSec` in [EXPECT_MIN_SEC, EXPECT_MAX_SEC] (a run of steps
    succeeds when its last step does)."""
    if request.expect is None:
        return None
    within = request.expect.successWithinSec
    if not EXPECT_MIN_SEC <= within <= EXPECT_MAX_SEC:
        raise UnprocessableRequest.for_field("expect.successWithinSec",
                                             f"must be between {EXPECT_MIN_SEC} and {EXPECT_MAX_SEC} seconds")
    return Expectation(within)


# --- Catch-up that does not flood: misfirePolicy's object form --------------------------------
DEFAULT_MAX_CATCH_UP = 100
DEFAULT_CATCH_UP_PER_MINUTE = 10


def _misfire_policy(value: str | MisfirePolicyModel) -> MisfirePolicy:
    return MisfirePolicy(value.policy if isinstance(value, MisfirePolicyModel) else value)


def _catch_up(value: str | MisfirePolicyModel, schedule: Schedule) -> CatchUp | None:
    """The object form's bounds; None for a string (its meaning is unchanged) and for an object
    without numbers under RUN_ONCE or SKIP (the same as the string)."""
    if not isinstance(value, MisfirePolicyModel):
        return None
    for name, given, limit in (("maxCatchUp", value.maxCatchUp, MAX_CATCH_UP_LIMIT),
                               ("catchUpPerMinute", value.catchUpPerMinute, CATCH_UP_PER_MINUTE_LIMIT)):
        if given is None:
            continue
        if value.policy != MisfirePolicy.RUN_ALL.value:
            raise UnprocessableRequest.for_field(f"misfirePolicy.{name}", "goes only with policy RUN_ALL "
                                                 f"(policy is {value.policy})")
        if not 1 <= given <= limit:
            raise UnprocessableRequest.for_field(f"misfirePolicy.{name}", f"must be 1..{limit:,}")
    if value.policy != MisfirePolicy.RUN_ALL.value:
        return None
    if not schedule.recurring:
        raise UnprocessableRequest.for_field("misfirePolicy", "a catch-up policy needs a recurring (CRON, RATE) "
                                             "schedule; a one-off job always runs, late")
    return CatchUp(value.maxCatchUp if value.maxCatchUp is not None else DEFAULT_MAX_CATCH_UP,
                   value.catchUpPerMinute if value.catchUpPerMinute is not None else DEFAULT_CATCH_UP_PER_MINUTE)


def preview_catch_up(max_catch_up: int | None, per_minute: int | None) -> dict | None:
    """The schedule preview's view of a catch-up policy: after an outage or a pause, at most
    maxCatchUp missed occurrences run, the last of them drainSeconds after the first."""
    if max_catch_up is None and per_minute is None:
        return None
    policy = MisfirePolicyModel(policy="RUN_ALL", maxCatchUp=max_catch_up, catchUpPerMinute=per_minute)
    for name, given, limit in (("maxCatchUp", max_catch_up, MAX_CATCH_UP_LIMIT),
                               ("catchUpPerMinute", per_minute, CATCH_UP_PER_MINUTE_LIMIT)):
        if given is not None and not 1 <= given <= limit:
            raise UnprocessableRequest.for_field(name, f"must be 1..{limit:,}")
    catch_up = CatchUp(policy.maxCatchUp or DEFAULT_MAX_CATCH_UP, policy.catchUpPerMinute or DEFAULT_CATCH_UP_PER_MINUTE)
    return {"policy": "RUN_ALL", **catch_up.to_item(),
            "drainSeconds": release_offset_ms(catch_up.max_catch_up - 1, catch_up.per_minute) // 1000}


def misfire_policy_to_json(spec: JobSpec) -> str | dict:
    """A job created with a string answers with the string, as before."""
    if spec.catch_up is None:
        return spec.misfire_policy.value
    return {"policy": spec.misfire_policy.value, **spec.catch_up.to_item()}
def _with_exclusions(spec: JobSpec, request: JobRequest) -> JobSpec:
    """Exclusion calendars: names checked here, their existence by the job's write. An occurrence's
    date is read in the job's `timezone`, for a RATE job too (its schedule keeps the zone)."""
    if not request.excludeCalendars:
        return spec
    if request.type not in ("CRON", "RATE"):
        raise UnprocessableRequest.for_field("excludeCalendars", "only CRON and RATE jobs have occurrences to exclude")
    names = checked_job_calendars(request.excludeCalendars)
    schedule = spec.schedule
    if request.type == "RATE":
        checked_zone(request.timezone)
        schedule = replace(schedule, timezone=request.timezone)
    return replace(spec, schedule=schedule, exclude_calendars=names)


# The request fields a job item's attributes come from (the rest are bookkeeping of fixed size).
_FIELD_OF_ATTRIBUTE = {"payload": "payload", "steps": "steps", "target": "target", "onSuccess": "onSuccess",
                       "onFailure": "onFailure", "tags": "tags", "flowControl": "flowControl", "name": "name",
                       "schedule": "schedule", "retryPolicy": "retryPolicy"}


def _check_item_size(spec: JobSpec) -> None:
    """Each field has its own bound, but together they can pass DynamoDB's 400 KB item (a 256 KB
    payload and 100 steps with 8 KB of headers each): refused here, naming the largest field,
    before any write, instead of DynamoDB refusing the write (a 500)."""
    if spec.target is None and spec.steps is None:
        return  # refused by the request's own validation, with its own message
    sizes = job_item_sizes(spec)
    total = sum(sizes.values())
    if total <= MAX_JOB_ITEM_BYTES:
        return
    largest = max((a for a in sizes if a in _FIELD_OF_ATTRIBUTE), key=sizes.__getitem__)
    field_name = _FIELD_OF_ATTRIBUTE[largest]
    raise PayloadTooLarge(
        f"{field_name}: the job would be {total} bytes as stored, over the {MAX_JOB_ITEM_BYTES} bytes a job may "
        f"take; {field_name} takes {sizes[largest]} of them",
        [FieldProblem(field_name, f"the job as a whole is over {MAX_JOB_ITEM_BYTES // 1024} KB; "
                                  f"this field takes {sizes[largest]} bytes")])


def _target(model, field: str, own: OwnResources) -> Target:
    target = Target(TargetType(model.type), model.model_dump(exclude={"type"}))
    if target.type not in SUPPORTED_TARGETS:
        raise UnprocessableRequest.for_field(f"{field}.type", f"{target.type.value} targets are not available yet; use HTTP")
    address_field = TARGET_ADDRESS_FIELDS.get(target.type)
    if address_field and own.owns(str(target.config[address_field])):
        raise UnprocessableRequest.for_field(f"{field}.{address_field}",
                                             "is one of the scheduler's own resources and cannot be a target")
    if address_field and not own.scope.reachable(target.type, str(target.config[address_field])):
        # IAM's grant covers this account's tagged resources and targetArnPatterns: a resource of
        # another account outside the patterns would be denied at every run.
        raise UnprocessableRequest.for_field(
            f"{field}.{address_field}", f"is in another AWS account than the scheduler's and matches none of the "
                                        f"deployment's targetArnPatterns: the scheduler is not allowed to call it")
    if target.type is TargetType.ECS_TASK:
        _check_task(target, field, own.scope)
    if target.type is TargetType.HTTP:
        # The call's own rule (domain/endpoints.py), as far as the URL tells without DNS.
        refusal = TargetUrl.parse(str(target.config["url"])).refusal(own.allow_private, own.endpoints)
        if refusal is not None:
            raise UnprocessableRequest.for_field(f"{field}.url", refusal)
    return target


def _hook_target(model, field: str, own: OwnResources) -> Target:
    """A completion hook is a call that reports an end; a container task is not one (422)."""
    if model.type == TargetType.ECS_TASK.value:
        raise UnprocessableRequest.for_field(f"{field}.type", "a completion hook cannot be a container task "
                                                              "(ECS_TASK); use HTTP, SQS, SNS, EVENTBRIDGE or LAMBDA")
    return _target(model, field, own)


def _check_timeouts(request: JobRequest, target: Target | None, steps: Workflow | None) -> None:
    """timeoutSec reaches a day for a container task only (it runs outside the worker); every other
    target's attempt runs inside one worker invocation (MAX_TIMEOUT_SEC): 400 naming the field."""
    checks = [("timeoutSec", request.timeoutSec, target)] if target is not None else []
    for i, (model, step) in enumerate(zip(request.steps or [], steps.steps if steps else ())):
        checks.append((f"steps.{i}.timeoutSec", model.timeoutSec or request.timeoutSec, step.target))
    for field_name, seconds, checked in checks:
        if checked.type is not TargetType.ECS_TASK and seconds > MAX_TIMEOUT_SEC:
            raise InvalidRequest(f"{field_name}: at most {MAX_TIMEOUT_SEC} seconds for a {checked.type.value} target "
                                 f"(up to {MAX_TASK_TIMEOUT_SEC} for ECS_TASK)",
                                 [FieldProblem(field_name, f"at most {MAX_TIMEOUT_SEC}")])


def _check_task(target: Target, field: str, scope: "TargetScope") -> None:
    """An ECS_TASK target: its task definition must be one the deployment grants (IAM allows
    RunTask on nothing else), and its overrides must fit RunTask's limit with the payload by
    reference and the longest ids (else every run would be refused)."""
    config = target.config
    if not scope.grants_task_definition(str(config["taskDefinition"])):
        raise UnprocessableRequest.for_field(
            f"{field}.taskDefinition", "is not among the task definitions this deployment grants "
                                       "(ecsTaskDefinitions): the scheduler is not allowed to run it")
    if not scope.grants_cluster(str(config["cluster"])):
        raise UnprocessableRequest.for_field(f"{field}.cluster", "is not among the clusters this deployment "
                                                                 "grants (ecsClusters)")
    region_problem = scope.task_region_problem(config)
    if region_problem is not None:
        raise UnprocessableRequest.for_field(f"{field}.{region_problem[0]}", region_problem[1])
    fixed = largest_fixed_overrides(config, "job_" + "x" * 32)
    if fixed > MAX_OVERRIDES_CHARS:
        raise InvalidRequest(f"{field}: command and environment take {fixed} characters of RunTask's "
                             f"{MAX_OVERRIDES_CHARS}-character overrides with the scheduler's variables",
                             [FieldProblem(f"{field}.environment", f"command and environment over "
                                                                   f"{MAX_OVERRIDES_CHARS} characters")])


def check_task_networks(spec: JobSpec, tenant_id: str, networks: TaskNetworks | None) -> None:
    """Container networks: each container task of the job (its target, its steps') runs only in
    the subnets and security groups its tenant may use (domain/task_networks.py): 422 naming the field."""
    targets = [("target", spec.target)] + [(f"steps.{i}.target", step.target)
                                           for i, step in enumerate(spec.steps.steps if spec.steps else ())]
    for where, target in targets:
        if target is not None and target.type is TargetType.ECS_TASK:
            problem = network_problem(networks, tenant_id, target.config)
            if problem is not None:
                raise UnprocessableRequest.for_field(f"{where}.{problem[0]}", problem[1])


def _fits_with_envelope(payload_size: int, target: Target, where: str) -> None:
    """SNS and EventBridge count our envelope in their size limit: a payload that fits 256 KB alone
    may not fit with it, and every attempt would be refused."""
    largest = largest_payload_bytes(target.type, target.config)
    if largest is not None and payload_size > largest:
        raise PayloadTooLarge(
            f"payload: {payload_size} bytes is over the {largest} bytes that fit a {target.type.value} target "
            f"({where}) with the execution's envelope", [FieldProblem("payload", f"over {largest} bytes")])


def _retry(model, field: str) -> RetryPolicy:
    if model.maxDelayMs < model.initialDelayMs:
        raise UnprocessableRequest.for_field(f"{field}.maxDelayMs", "must be at least initialDelayMs")
    return RetryPolicy(model.maxAttempts, Backoff(model.backoff), model.initialDelayMs, model.maxDelayMs)


def _workflow(models: list, own: OwnResources) -> Workflow:
    """The steps as a checked DAG: 422 naming the problem (a cycle by its path)."""
    steps = tuple(
        Step(name=m.name, target=_target(m.target, f"steps.{i}.target", own), depends_on=tuple(m.dependsOn),
             retry=_retry(m.retryPolicy, f"steps.{i}.retryPolicy") if m.retryPolicy is not None else None,
             timeout_sec=m.timeoutSec)
        for i, m in enumerate(models))
    return Workflow(steps)


# Schedule bounds and self-pausing: only a recurring job has them; on another one each is a 422.
_RECURRING_ONLY_FIELDS = ("startAt", "endAt", "maxRuns", "pauseAfterFailures")


def _schedule(request: JobRequest, now_ms: int) -> Schedule:
    if request.type not in ("CRON", "RATE"):
        for name in _RECURRING_ONLY_FIELDS:
            if getattr(request, name) is not None:
                raise UnprocessableRequest.for_field(name, f"only CRON and RATE jobs take it, not {request.type}")
    given = {name for name in _SCHEDULE_FIELDS if getattr(request, name) is not None}
    stray = sorted(given - _FIELDS_BY_TYPE[request.type])
    if stray:
        raise InvalidRequest(
            f"{stray[0]}: not used by {request.type} jobs",
            [FieldProblem(name, f"not used by {request.type} jobs") for name in stray],
        )
    if request.type == "ONE_TIME":
        if request.schedule is not None:  # AWS-style at(...), read in the job's timezone
            if request.runAt is not None:
                raise InvalidRequest("runAt: give runAt or an at() schedule, not both",
                                     [FieldProblem("runAt", "conflicts with schedule")])
            run_at, field_name = local_instant(parse_at(request.schedule), request.timezone, "schedule"), "schedule"
        else:
            run_at, field_name = parse_instant(_required(request.runAt, "runAt", "ONE_TIME"), "runAt"), "runAt"
        if run_at < now_ms - RUN_AT_GRACE_MS:
            raise UnprocessableRequest.for_field(field_name, "is more than 5 minutes in the past")
        return one_time_schedule(run_at, request.schedule, request.timezone)
    if request.type == "DELAYED":
        return delayed_schedule(_required(request.delaySeconds, "delaySeconds", "DELAYED"), now_ms)
    start = parse_instant(request.startAt, "startAt") if request.startAt else None
    end = parse_instant(request.endAt, "endAt") if request.endAt else None
    expression = _required(request.schedule, "schedule", request.type)
    _check_expression_kind(request.type, expression)
    if request.type == "CRON":
        schedule = cron_schedule(expression, request.timezone, now_ms, start, end)
    else:
        schedule = rate_schedule(expression, now_ms, start, end)
    if schedule.first_fire() is None:
        raise UnprocessableRequest.for_field("endAt", "the schedule has no fire time before endAt")
    return schedule


def _check_expression_kind(job_type: str, expression: str) -> None:
    if not is_aws_expression(expression):
        return
    expected = {"CRON": "cron(", "RATE": "rate(", "ONE_TIME": "at("}[job_type]
    if not expression.strip().startswith(expected):
        raise UnprocessableRequest.for_field("schedule", f"a {job_type} job takes {expected}...) here, not '{expression}'")


def _required(value: Any, field_name: str, job_type: str) -> Any:
    if value is None:
        raise InvalidRequest(f"{field_name}: required for {job_type} jobs", [FieldProblem(field_name, "required")])
    return value
