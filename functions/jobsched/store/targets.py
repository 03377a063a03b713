"""AWS targets: SQS, SNS, EventBridge, Lambda. Each carries the execution id and attempt (message
attributes, or fields of the event) so the target can dedupe its own side effects."""
from __future__ import annotations

import base64
import hashlib
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.httpsession import URLLib3Session

from jobsched.domain.target_envelopes import (EVENTBRIDGE_MAX_ENTRY_BYTES, SNS_MAX_MESSAGE_BYTES,
                                              eventbridge_entry_bytes, sns_message_bytes)
from jobsched.domain.json_text import compact, loads_strict
from jobsched.domain.executions import AttemptOutcome, Dispatch, ExecutionStatus
from jobsched.domain.jobs import Job, TargetType
from jobsched.domain.container_tasks import (capacity_refusal, client_token, container_overrides, started_by,
                                             task_tags)
from jobsched.domain.tenant_tags import TENANT_TAG_KEY, grant_hint, is_taggable, key_grant_hint, task_grant_hint
from jobsched.domain.trace import trace_context
from jobsched.store.aws import THROTTLE_CODES

MAX_OUTPUT_BYTES = 4096
# How each target service answers a call IAM does not allow (SQS, SNS, EventBridge and Lambda).
ACCESS_DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "AuthorizationError",
                                 "AuthorizationErrorException"})
EXPIRED_CODES = frozenset({"ExpiredToken", "ExpiredTokenException"})
# A send to a queue or topic encrypted with a customer-managed key (SSE-KMS) that KMS refused: SQS
# answers KMS.AccessDeniedException, KMS.DisabledException, KMS.NotFoundException, ... (botocore
# keeps its shape name, KmsAccessDenied ..., as QueryErrorCode), SNS KMSAccessDenied, KMSDisabled,
# KMSNotFound, ... Each names a key that refuses the targets role, or cannot be used at all: the
# same answer on every retry. KMS's throttling alone passes.
KMS_THROTTLED_CODES = frozenset({"KMS.ThrottlingException", "KmsThrottled", "KMSThrottling", "KMSThrottlingException"})
# A session of the targets role lasts at most an hour (role chaining: the worker's own credentials
# are a role session); it is renewed this long before its end, so no call is made with credentials
# about to expire, and an attempt's call never outlives them (a Lambda target's timeout is <= 15 min).
SESSION_SECONDS = 3600
RENEW_BEFORE_SECONDS = 900
# Tenants whose sessions one container keeps; the least recently used goes.
MAX_CACHED_TENANTS = 500
# Target clients one container keeps, all tenants together (each about 216 KB: docs/performance.md,
# `bench clients`); the least recently used goes, and is made again (13-80 ms of CPU measured, and
# a new connection) when its tenant calls again. 256 of them hold about 55 MB of the worker's 512 MB
# (6,000 unbounded, the old scheme's reach at 500 tenants, held 1,265 MB).
MAX_TARGET_CLIENTS = 256
# A call's read timeout is its job's: botocore reads a per-request `read_timeout` from the request
# context (URLLib3Session._get_request_timeout, botocore 1.44 has it), so one client serves every
# timeout. On a botocore without it (the Lambda runtime's may be older) the client is keyed by the
# timeout too, as before, and the LRU's cap still bounds the container.
PER_CALL_READ_TIMEOUT = hasattr(URLLib3Session, "_get_request_timeout")
# A client's own read timeout when the call gives its own: the longest any target call may take
# (the worker's 15-minute limit); every call made through TargetClients gives one.
CLIENT_READ_TIMEOUT_SEC = 900


class TargetSessionUnavailable(RuntimeError):
    """The targets role could not be assumed for a tenant (STS refused, throttled or unreachable)."""


@dataclass
class _TenantSession:
    credentials: dict  # aws_access_key_id, aws_secret_access_key, aws_session_token
    renew_at_ms: int


class TargetClients:
    """The container's boto3 clients for target calls: one per (tenant session, service, region),
    whatever the jobs' timeouts (each call carries its own read timeout: PER_CALL_READ_TIMEOUT),
    at most `cap` of them, the least recently used dropped (a call still using it finishes with
    it). A renewed session's clients are new ones (new credentials); the old ones age out."""

    def __init__(self, session, cap: int = MAX_TARGET_CLIENTS, per_call_timeout: bool = PER_CALL_READ_TIMEOUT) -> None:
        self._session = session
        self._cap = cap
        self.per_call_timeout = per_call_timeout
        self._lru: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._timeout = threading.local()  # the read timeout of this thread's next target call
        self.created = 0  # clients made (benchmarks, tests)

    def __len__(self) -> int:
        return len(self._lru)

    def get(self, service: str, region: str | None, timeout_sec: int, credentials: dict):
        """The client for this call; its read timeout is `timeout_sec` (for every call this thread
        makes with it until the next get)."""
        self._timeout.seconds = timeout_sec
        key = (credentials.get("aws_access_key_id"), service, region,
               None if self.per_call_timeout else timeout_sec)
        with self._lock:
            client = self._lru.get(key)
            if client is not None:
                self._lru.move_to_end(key)
                return client
            # One call per attempt: botocore's own retries would repeat a call that may have
            # taken effect (a read timeout on a slow function invokes it again). The job's retry
            # policy decides whether there is another attempt, with its own execution-id-carrying call.
            # ECS is the exception: RunTask carries the attempt's client token, so a repeat
            # after an answer that was lost (a timeout, a 5xx: ECS may have started the task)
            # answers the task it started, never a second one; the others only read or stop.
            attempts = 3 if service == "ecs" else 1
            config = Config(retries={"mode": "standard", "total_max_attempts": attempts}, connect_timeout=5,
                            read_timeout=CLIENT_READ_TIMEOUT_SEC if self.per_call_timeout else timeout_sec)
            # From the one session of the container, with the tenant's credentials: the
            # service's model is loaded once, not once per tenant.
            client = self._session.client(service, region_name=region, config=config, **credentials)
            events = getattr(getattr(client, "meta", None), "events", None)  # None: a test's stand-in
            if self.per_call_timeout and events is not None:
                events.register("before-call", self._read_timeout)
            self.created += 1
            self._lru[key] = client
            while len(self._lru) > self._cap:
                self._lru.popitem(last=False)
            return client

    def _read_timeout(self, context, **_) -> None:
        """botocore's per-request read timeout (the request context's `read_timeout`): this call's."""
        seconds = getattr(self._timeout, "seconds", None)
        if seconds is not None:
            context["read_timeout"] = seconds


class TenantSessions:
    """Per-tenant sessions of the targets role, each tagged `jobsched:tenant = <tenant>`, cached in
    the container until shortly before they expire: one AssumeRole per tenant per container per
    45 minutes, never one per execution. Expiry is measured on our clock from the request (the
    duration we asked for), so it does not depend on STS's clock agreeing with ours."""

    def __init__(self, session, role_arn: str, now_ms: Callable[[], int], max_tenants: int = MAX_CACHED_TENANTS,
                 sts=None) -> None:
        self._role_arn = role_arn
        self._now_ms = now_ms
        self._max = max_tenants
        self._sts = sts or session.client("sts", config=Config(retries={"mode": "standard", "total_max_attempts": 3},
                                                               connect_timeout=2, read_timeout=5))
        self._cache: OrderedDict[str, _TenantSession] = OrderedDict()
        self._lock = threading.Lock()
        self._tenant_locks: dict[str, threading.Lock] = {}
        self.assumed = 0  # AssumeRole calls made (benchmarks, tests)

    def session_for(self, tenant_id: str) -> _TenantSession:
        with self._lock:
            lock = self._tenant_locks.setdefault(tenant_id, threading.Lock())
        # One AssumeRole per tenant at a time: a batch's ten records of one tenant share it.
        with lock:
            now = self._now_ms()
            with self._lock:
                cached = self._cache.get(tenant_id)
                if cached is not None and now < cached.renew_at_ms:
                    self._cache.move_to_end(tenant_id)
                    return cached
            fresh = self._assume(tenant_id, now)
            with self._lock:
                self._cache[tenant_id] = fresh
                self._cache.move_to_end(tenant_id)
                while len(self._cache) > self._max:
                    evicted, _ = self._cache.popitem(last=False)
                    self._tenant_locks.pop(evicted, None)
            return fresh

    def forget(self, tenant_id: str) -> None:
        """Credentials AWS called expired (revoked, or a clock far off): the next call assumes anew."""
        with self._lock:
            self._cache.pop(tenant_id, None)

    def _assume(self, tenant_id: str, now_ms: int) -> _TenantSession:
        try:
            answer = self._sts.assume_role(RoleArn=self._role_arn, RoleSessionName=session_name(tenant_id),
                                           DurationSeconds=SESSION_SECONDS,
                                           Tags=[{"Key": TENANT_TAG_KEY, "Value": tenant_id}])
        except (ClientError, BotoCoreError) as exc:
            code = exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else type(exc).__name__
            raise TargetSessionUnavailable(f"cannot assume the targets role for this tenant ({code}: {exc})") from exc
        self.assumed += 1
        credentials = answer["Credentials"]
        return _TenantSession({"aws_access_key_id": credentials["AccessKeyId"],
                               "aws_secret_access_key": credentials["SecretAccessKey"],
                               "aws_session_token": credentials["SessionToken"]},
                              now_ms + (SESSION_SECONDS - RENEW_BEFORE_SECONDS) * 1000)


def session_name(tenant_id: str) -> str:
    """A RoleSessionName (2-64 of [\\w+=,.@-]) that names the tenant in CloudTrail and is unique to it."""
    readable = re.sub(r"[^\w+=,.@-]", "_", tenant_id, flags=re.ASCII)[:40]
    return f"{readable}.{hashlib.sha256(tenant_id.encode()).hexdigest()[:16]}"


def _attributes(dispatch: Dispatch, attempt: int, job: Job) -> dict:
    """Four of the ten attributes SQS and SNS allow a message."""
    return {
        "executionId": {"DataType": "String", "StringValue": dispatch.execution_id},
        "attempt": {"DataType": "Number", "StringValue": str(attempt)},
        "jobId": {"DataType": "String", "StringValue": job.job_id},
        "traceparent": {"DataType": "String", "StringValue": trace_context(dispatch.execution_id, attempt).traceparent},
    }


def _client_context(dispatch: Dispatch, attempt: int) -> str:
    """A Lambda target's trace context, where a function reads its caller's (context.client_context
    .custom): about 120 bytes of the 3,583 Lambda allows."""
    custom = {"traceparent": trace_context(dispatch.execution_id, attempt).traceparent}
    return base64.b64encode(compact({"custom": custom}).encode()).decode()


def message_params(job: Job, dispatch: Dispatch, attempt: int, address: str) -> dict[str, Any]:
    """A queue's or topic's message beside its body, the same for both: the attributes, and a FIFO
    one's group (the job) and deduplication id (the execution id). A single call's and a batch entry's."""
    params: dict[str, Any] = {"MessageAttributes": _attributes(dispatch, attempt, job)}
    if address.endswith(".fifo"):
        params.update(MessageGroupId=job.job_id, MessageDeduplicationId=dispatch.execution_id)
    return params


def event_entry(job: Job, dispatch: Dispatch, attempt: int, progress: Any = None) -> tuple[dict, int]:
    """A bus's PutEvents entry and its size as EventBridge counts it. EventBridge entries have no
    attributes: the trace rides in TraceHeader, which takes an X-Ray header (the same ids; not
    counted in the entry's size)."""
    config = job.spec.target.config
    detail = compact(_envelope(job, dispatch, attempt, progress))
    return ({"EventBusName": config["eventBusName"], "Source": config["source"], "DetailType": config["detailType"],
             "Detail": detail, "TraceHeader": trace_context(dispatch.execution_id, attempt).xray_header},
            eventbridge_entry_bytes(config["source"], config["detailType"], detail))


def _envelope(job: Job, dispatch: Dispatch, attempt: int, progress: Any) -> dict:
    envelope = {"executionId": dispatch.execution_id, "attempt": attempt, "jobId": job.job_id,
                "payload": job.spec.payload}
    if progress is not None:
        envelope["progress"] = progress
    return envelope


class AwsTargetInvoker:
    """Calls AWS targets in the job's tenant's session of the targets role (`tenant_sessions`), so
    IAM allows only the resources tagged with that tenant; without it (tests of the call's shape,
    benchmarks) in the given session."""

    def __init__(self, session, tenant_sessions: TenantSessions | None = None,
                 clients: TargetClients | None = None) -> None:
        self._session = session
        self._tenants = tenant_sessions
        self.clients = clients or TargetClients(session)

    @property
    def tenant_sessions(self) -> "TenantSessions | None":
        return self._tenants

    def client(self, service: str, arn_or_url: str, timeout_sec: int, tenant_id: str | None = None):
        """The target service's client in the tenant's session, in the target's region."""
        credentials: dict = {}
        if self._tenants is not None and tenant_id is not None:
            credentials = self._tenants.session_for(tenant_id).credentials
        return self.clients.get(service, _region_of(arn_or_url), timeout_sec, credentials)

    def invoke(self, job: Job, dispatch: Dispatch, attempt: int, callback_token: str | None = None,
               progress: Any = None) -> AttemptOutcome:
        if self._tenants is not None and not is_taggable(job.tenant_id):
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"tenant id {job.tenant_id!r} cannot be a session tag "
                                  "value, so it reaches no AWS target", retryable=False)
        try:
            return self._invoke(job, dispatch, attempt, progress)
        except TargetSessionUnavailable as exc:
            # Our deployment's fault or STS's (throttled, unreachable), not the tenant's: retried.
            return _failed(str(exc))
        except _Expired:
            # Credentials AWS no longer takes: the call did not happen, so it is made once more
            # with a fresh session.
            self._tenants.forget(job.tenant_id)
            try:
                return self._invoke(job, dispatch, attempt, progress)
            except TargetSessionUnavailable as exc:
                return _failed(str(exc))
            except _Expired as exc:
                return _failed(str(exc))

    def _invoke(self, job: Job, dispatch: Dispatch, attempt: int, progress: Any) -> AttemptOutcome:
        tenant = job.tenant_id
        config = job.spec.target.config
        kind = job.spec.target.type
        timeout = job.spec.timeout_sec
        body = compact(job.spec.payload)
        try:
            if kind in (TargetType.SQS, TargetType.SNS):
                address = config["queueUrl"] if kind is TargetType.SQS else config["topicArn"]
                params = message_params(job, dispatch, attempt, address)
                if kind is TargetType.SQS:
                    answer = self.client("sqs", address, timeout, tenant).send_message(QueueUrl=address, MessageBody=body,
                                                                                **params)
                else:
                    size = sns_message_bytes(body, params["MessageAttributes"])
                    if size > SNS_MAX_MESSAGE_BYTES:
                        return _too_large("SNS message", size, SNS_MAX_MESSAGE_BYTES)
                    answer = self.client("sns", address, timeout, tenant).publish(TopicArn=address, Message=body, **params)
                return _ok({"messageId": answer.get("MessageId")})
            if kind is TargetType.EVENTBRIDGE:
                bus = config["eventBusName"]
                entry, size = event_entry(job, dispatch, attempt, progress)
                if size > EVENTBRIDGE_MAX_ENTRY_BYTES:
                    return _too_large("EventBridge entry", size, EVENTBRIDGE_MAX_ENTRY_BYTES)
                answer = self.client("events", bus, timeout, tenant).put_events(Entries=[entry])
                if answer.get("FailedEntryCount"):
                    entry = answer["Entries"][0]
                    return _failed(f"{entry.get('ErrorCode')}: {entry.get('ErrorMessage')}")
                return _ok({"eventId": answer["Entries"][0].get("EventId")})
            if kind is TargetType.LAMBDA:
                arn = config["functionArn"]
                answer = self.client("lambda", arn, timeout, tenant).invoke(
                    FunctionName=arn, InvocationType="RequestResponse",
                    ClientContext=_client_context(dispatch, attempt),
                    Payload=compact(_envelope(job, dispatch, attempt, progress)).encode())
                raw = answer["Payload"].read(MAX_OUTPUT_BYTES + 1)
                if answer.get("FunctionError"):
                    return _failed(f"function error: {raw[:200].decode('utf-8', 'replace')}")
                return _ok(_json_or_none(raw))
            if kind is TargetType.ECS_TASK:
                return self._run_task(job, dispatch, attempt)
        except ClientError as exc:
            return self.refused(exc, kind, tenant)
        except BotoCoreError as exc:
            return _unreached(exc)
        return _failed(f"target type {kind.value} is not an AWS target")

    def refused(self, exc: ClientError, kind: TargetType, tenant: str) -> AttemptOutcome:
        """What a target's refusal of a call is to its attempt (raises _Expired: credentials AWS no
        longer takes, the call did not happen)."""
        error = exc.response.get("Error", {})
        code = error.get("Code")
        if code in EXPIRED_CODES and self._tenants is not None:
            raise _Expired(f"{code}: {error.get('Message')}") from exc
        if is_kms_refusal(error):
            # The queue's or topic's KMS key: a grant problem (or a disabled or deleted key), not a
            # transient one: DEAD now, naming what to grant.
            return AttemptOutcome(False, ExecutionStatus.FAILED,
                                  f"{code}: {error.get('Message')} ({key_grant_hint(tenant)})", retryable=False)
        if kind is TargetType.ECS_TASK and code in THROTTLE_CODES:
            # RunTask over the account's rate (after botocore's own retries): nothing started,
            # the execution is held back without using an attempt (service/worker.py).
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"{code}: {error.get('Message')}",
                                  throttled=True)
        if code in ACCESS_DENIED_CODES:
            # IAM decides the same way on every retry until someone grants the target: the
            # execution ends DEAD now, naming the reason, instead of retrying into the same no.
            hint = task_grant_hint(tenant) if kind is TargetType.ECS_TASK else grant_hint(tenant)
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"{code}: {error.get('Message')} ({hint})",
                                  retryable=False)
        return _failed(f"{code}: {error.get('Message')}")


    # --- container tasks (ECS_TASK): RunTask, and what the worker asks of a running task -------

    def _ecs(self, job: Job):
        """The ECS client of the job's tenant session, in its task definition's region."""
        return self.client("ecs", str(job.spec.target.config["taskDefinition"]), ECS_CALL_TIMEOUT_SEC, job.tenant_id)

    def _run_task(self, job: Job, dispatch: Dispatch, attempt: int) -> AttemptOutcome:
        """Start the attempt's task. The client token (execution id and attempt) makes a repeated
        call of this attempt start no second task while ECS keeps the token (24 hours); a task left
        by an earlier attempt whose worker died is found before this is called
        (service/container_tasks.py take_over)."""
        config = job.spec.target.config
        ecs = self._ecs(job)
        network = {"awsvpcConfiguration": {"subnets": list(config["subnets"]),
                                           "securityGroups": list(config.get("securityGroups") or []),
                                           "assignPublicIp": "ENABLED" if config.get("assignPublicIp") else "DISABLED"}}
        answer = ecs.run_task(
            cluster=config["cluster"], taskDefinition=config["taskDefinition"],
            launchType=config.get("launchType", "FARGATE"), count=1, networkConfiguration=network,
            overrides=container_overrides(config, job.job_id, dispatch.execution_id, attempt, job.spec.payload),
            clientToken=client_token(dispatch.execution_id, attempt, dispatch.holds), startedBy=started_by(dispatch.execution_id),
            tags=task_tags(dispatch.execution_id, attempt), propagateTags="TASK_DEFINITION")
        started = answer.get("tasks") or []
        if not started:
            # Unplaceable (a bad subnet, an image it cannot pull before placement): this attempt
            # failed with ECS's reason and is retried under the job's policy. No capacity now
            # (Fargate's, or the account's quota of running tasks): held back without using an
            # attempt, as a throttle is (domain/container_tasks.py CAPACITY_REASONS).
            failures = answer.get("failures") or []
            reasons = "; ".join(f"{f.get('reason')}{': ' + f['detail'] if f.get('detail') else ''}"
                                for f in failures) or "RunTask started no task"
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"task not started: {reasons[:500]}",
                                  throttled=capacity_refusal(failures))
        return AttemptOutcome(True, ExecutionStatus.RUNNING, None, None, accepted=True,
                              task=_task_record(config, started[0]["taskArn"], attempt))

    def tasks_of(self, job: Job, execution_id: str) -> list[dict]:
        """The execution's tasks of every attempt that ECS still lists (running ones, and stopped
        ones for a while after they stop), with their tags: found by their startedBy."""
        config = job.spec.target.config
        ecs = self._ecs(job)
        mark = started_by(execution_id)
        # startedBy alone lists the running ones (ECS's API reference: with startedBy, "it must be
        # the only filter that you use"; desiredStatus defaults to RUNNING). The stopped ones need
        # desiredStatus=STOPPED beside it: asked, and if ECS refuses the pair, the takeover goes on
        # with the running ones (a stopped orphan's end then comes from its event only).
        arns: list[str] = list(ecs.list_tasks(cluster=config["cluster"], startedBy=mark).get("taskArns") or [])
        try:
            arns += ecs.list_tasks(cluster=config["cluster"], startedBy=mark,
                                   desiredStatus="STOPPED").get("taskArns") or []
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") not in ("InvalidParameterException", "ClientException"):
                raise
        arns = list(dict.fromkeys(arns))
        if not arns:
            return []
        return ecs.describe_tasks(cluster=config["cluster"], tasks=arns[:100], include=["TAGS"]).get("tasks") or []

    def describe_task(self, job: Job, task_arn: str) -> dict | None:
        """One task as ECS tells it now, with its tags (None: ECS no longer knows it)."""
        answer = self._ecs(job).describe_tasks(cluster=job.spec.target.config["cluster"], tasks=[task_arn],
                                               include=["TAGS"])
        return (answer.get("tasks") or [None])[0]

    def stop_task(self, job: Job, task_arn: str, reason: str) -> None:
        """Ask ECS to stop the task (its containers get SIGTERM, then SIGKILL)."""
        self._ecs(job).stop_task(cluster=job.spec.target.config["cluster"], task=task_arn, reason=reason[:255])


# An ECS call is a control-plane call: answered in well under this, whatever the job's timeout.
ECS_CALL_TIMEOUT_SEC = 30


def _task_record(config: dict, task_arn: str, attempt: int) -> dict:
    """What the execution keeps of its attempt's task until the task ends."""
    return {"taskArn": task_arn, "cluster": str(config["cluster"]), "container": str(config["container"]),
            "attempt": attempt}


class _Expired(Exception):
    pass


def is_kms_refusal(error: dict) -> bool:
    """An SQS or SNS error that says KMS refused the send's data key (not a throttle)."""
    codes = {c for c in (error.get("Code"), error.get("QueryErrorCode")) if isinstance(c, str)}
    return any(c.startswith(("KMS", "Kms")) for c in codes) and not codes & KMS_THROTTLED_CODES


def _region_of(arn_or_url: str) -> str | None:
    if arn_or_url.startswith("arn:"):
        parts = arn_or_url.split(":")
        return parts[3] or None if len(parts) > 3 else None
    if arn_or_url.startswith("https://sqs."):
        return arn_or_url.split(".")[1]
    return None


def _ok(output: Any) -> AttemptOutcome:
    return AttemptOutcome(True, ExecutionStatus.SUCCEEDED, None, output)


def _unreached(exc: BotoCoreError) -> AttemptOutcome:
    """A call that got no answer (a time-out, a connection refused)."""
    status = ExecutionStatus.TIMED_OUT if "timeout" in type(exc).__name__.lower() else ExecutionStatus.FAILED
    return AttemptOutcome(False, status, str(exc))


def _failed(error: str) -> AttemptOutcome:
    return AttemptOutcome(False, ExecutionStatus.FAILED, error)


def _too_large(what: str, size: int, limit: int) -> AttemptOutcome:
    """Sending it would be refused, and so would every retry: not retried."""
    return AttemptOutcome(False, ExecutionStatus.FAILED, f"{what} of {size} bytes with its envelope is over the "
                          f"{limit}-byte limit", retryable=False)


def _json_or_none(raw: bytes) -> Any:
    if not raw or len(raw) > MAX_OUTPUT_BYTES:
        return None
    try:
        return loads_strict(raw)  # a target's NaN or duplicate keys never reach our responses
    except ValueError:
        return None
