"""DynamoDB access. `ClientError` becomes a typed domain error here, once, by error code."""
from __future__ import annotations

import base64
import json
import random
import secrets
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Callable, Iterator
from urllib.parse import quote

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError

from jobsched.domain.calendars import calendars_held
from jobsched.domain.errors import ConditionLost, Conflict, FieldProblem, InvalidRequest
from jobsched.domain.executions import AttemptRecord, Dispatch, Execution, ExecutionStatus
from jobsched.domain.jobs import CompletedReason, Job, JobState
from jobsched.domain.json_text import compact
from jobsched.domain.timers import Timer, Watermark
from jobsched.store.wire import item_from_wire, values_to_wire

CONDITION_FAILED = "ConditionalCheckFailedException"
JOB_ID_PREFIX = "job_"
# Idempotency records share the Jobs table (same tenant partition), under another sort-key prefix.
IDEMPOTENCY_PREFIX = "idem#"
QUOTA_PREFIX = "quota#"
ACTIVE_JOBS_COUNTER = "active"
DEAD_LETTERS_INDEX = "DeadLetters"
# The index's partition key is spread over this many values per tenant (by execution id), so a
# tenant whose endpoint is down cannot throttle the Executions table through one hot index
# partition (a GSI out of capacity throttles the table's writes). docs/architecture.md, "Tables".
DEAD_LETTER_SHARDS = 16
# Jobs by tenant and state (partition tenantId, sort state; keys only). Only job items carry
# `state`, so index entries, counters and idempotency records are not in it. Every write that
# changes a job's state moves it in the index by itself: nothing to maintain.
JOBS_BY_STATE_INDEX = "JobsByState"
BULK_PREFIX = "bulk#"
# What a hand-off reads of a job: everything but the payload.
# What a hand-off reads of a job (Job.for_hand_off): each attribute left out is one less for
# boto3 to parse and for us to decode, thousands of times a minute (bench cpu: about 15% of the
# tick's CPU per timer).
HAND_OFF_ATTRIBUTES = ("tenantId", "jobId", "schedule", "priority", "misfirePolicy", "jitterSec", "state", "generation",
                       "maxRuns", "catchUp",  # catchUp: catch-up that does not flood
                       "excludeCalendars")
BATCH_GET_LIMIT = 100
# Batch calls of one page in flight at once (the tick's job reads, its next-timer writes).
GET_PARALLELISM = 8
WRITE_PARALLELISM = 8
# Not a segment: the segments table's item that holds the dispatch key.
DISPATCH_KEY_ITEM = -1
BATCH_WRITE_LIMIT = 25
# UnprocessedKeys / UnprocessedItems (throttling, partition limits) are retried with capped
# exponential backoff and full jitter, a bounded number of times; then the caller fails and its
# own retry (the next tick, SQS redelivery) takes over instead of a hot loop against a throttle.
BATCH_RETRIES = 8
BATCH_BACKOFF_BASE_S = 0.05
BATCH_BACKOFF_CAP_S = 2.0


def sharded_counter(name: str, shard: int) -> str:
    """The name of one shard of a tenant's quota counter (service/jobs.py, Quotas). Shard 0 keeps
    the counter's unsharded name, so the places taken before sharding are given back there."""
    return name if shard == 0 else f"{name}#{shard}"


def active_counter(shard: int) -> str:
    return sharded_counter(ACTIVE_JOBS_COUNTER, shard)


def dead_letter_partition(tenant_id: str, execution_id: str) -> str:
    """The DeadLetters index partition of a dead execution. Shard 0 keeps the unsharded value (the
    tenant id), so every dead letter written before sharding is read as shard 0."""
    shard = zlib.crc32(execution_id.encode()) % DEAD_LETTER_SHARDS
    return tenant_id if shard == 0 else f"{tenant_id}#{shard}"


def dead_letter_partitions(tenant_id: str) -> list[str]:
    return [tenant_id] + [f"{tenant_id}#{shard}" for shard in range(1, DEAD_LETTER_SHARDS)]


def raw_client(dynamodb):
    """A low-level client beside a resource. (The resource's own `meta.client` rewrites every
    request and answer through boto3's type (de)serializer: no use for wire-format calls.)"""
    import boto3

    meta = dynamodb.meta.client.meta
    return boto3.session.Session().client("dynamodb", region_name=meta.region_name, endpoint_url=meta.endpoint_url,
                                          config=meta.config)


class BatchIncomplete(RuntimeError):
    """DynamoDB left part of a batch unprocessed after every retry."""


def _backoff_s(retry: int) -> float:
    return random.random() * min(BATCH_BACKOFF_CAP_S, BATCH_BACKOFF_BASE_S * 2 ** retry)


def batch_until_done(call: Callable[[dict], dict], request: dict, unprocessed_key: str,
                     sleep: Callable[[float], None] = time.sleep) -> list[dict]:
    """Send a batch request, then what it left unprocessed, backing off between tries.
    Returns every answer; raises BatchIncomplete when retries run out."""
    answers = []
    for retry in range(BATCH_RETRIES + 1):
        if retry:
            sleep(_backoff_s(retry - 1))
        answer = call(request)
        answers.append(answer)
        request = answer.get(unprocessed_key) or {}
        if not request:
            return answers
    raise BatchIncomplete(f"{unprocessed_key}: still unprocessed after {BATCH_RETRIES} retries")


def plain(value: Any) -> Any:
    """DynamoDB's Decimals back to ints (all our numbers are integers) and floats."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _condition_lost(exc: ClientError, what: str) -> ConditionLost | None:
    """A failed condition as a domain outcome, with the item as it is now when DynamoDB returned
    it (ReturnValuesOnConditionCheckFailure). The resource API leaves that item in wire format."""
    if exc.response.get("Error", {}).get("Code") != CONDITION_FAILED:
        return None
    return ConditionLost(what=what, current=item_from_wire(exc.response.get("Item")))


def encode_cursor(key: dict | None) -> str | None:
    if not key:
        return None
    return base64.urlsafe_b64encode(json.dumps(plain(key), separators=(",", ":")).encode()).decode()


MAX_CURSOR_CHARS = 2048


def decode_cursor(cursor: str | None, required: dict[str, type]) -> dict | None:
    """A cursor this list returned, or InvalidRequest: each key present with its type (strings
    short and non-empty, numbers integers in range), so no forged cursor reaches DynamoDB as a
    key it refuses."""
    if not cursor:
        return None
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor[:MAX_CURSOR_CHARS].encode("ascii")))
    except (ValueError, TypeError, RecursionError):
        key = None
    if (not isinstance(key, dict) or len(cursor) > MAX_CURSOR_CHARS or set(key) != set(required)
            or not all(_cursor_value_ok(key[name], kind) for name, kind in required.items())):
        raise InvalidRequest("cursor: not a cursor this list returned", [FieldProblem("cursor", "not a cursor")])
    return key


def _cursor_value_ok(value: Any, kind: type) -> bool:
    if kind is int:
        return type(value) is int and 0 <= value < 2**63
    return type(value) is str and 0 < len(value.encode("utf-8", "surrogatepass")) <= 256


@dataclass
class Page:
    items: list
    next_cursor: str | None
    cursor_after: Callable[[Any], str | None] | None = None  # the cursor that resumes after an item

    def first(self, count: int) -> "Page":
        """The first `count` items, with the cursor that continues after the last of them."""
        if count >= len(self.items) or self.cursor_after is None:
            return self
        return Page(self.items[:count], self.cursor_after(self.items[count - 1]), self.cursor_after)


TAG_INDEX = "tag#"
NAME_INDEX = "name#"


def _part(text: str) -> str:
    return quote(text, safe="")


def tag_prefix(key: str, value: str) -> str:
    return f"{TAG_INDEX}{_part(key)}={_part(value)}#"


def name_prefix(prefix: str) -> str:
    """Entries of the names that start with `prefix` (percent-encoding keeps prefixes)."""
    return f"{NAME_INDEX}{_part(prefix)}"


def index_keys(job: Job) -> set[str]:
    """The index entries of a job: one per tag, one for its name."""
    keys = {f"{tag_prefix(k, v)}{job.job_id}" for k, v in job.spec.tags.items()}
    keys.add(f"{NAME_INDEX}{_part(job.spec.name)}#{job.job_id}")
    return keys


def ended_job_expires_at(job: Job, retention_days: int) -> int | None:
    """An ended one-time job expires `retention_days` after its end (DynamoDB's TTL deletes it,
    up to days later); a recurring job, or one that may still fire, never does."""
    if job.state not in (JobState.COMPLETED, JobState.CANCELLED) or job.spec.schedule.recurring:
        return None
    return job.updated_ms // 1000 + retention_days * 86_400


class JobsStore:
    def __init__(self, dynamodb, table_name: str, sleep: Callable[[float], None] = time.sleep, client=None,
                 retention_days: int = 30) -> None:
        self._retention_days = retention_days
        self._table = dynamodb.Table(table_name)
        self._dynamodb = dynamodb
        self._client = client or raw_client(dynamodb)  # the hot calls, in wire format (store/wire.py)
        # Kept for the container's life (threads start at the first use, not here).
        self._pool = ThreadPoolExecutor(max_workers=GET_PARALLELISM, thread_name_prefix="batch-get")
        self._name = table_name
        self._sleep = sleep

    def put_new(self, job: Job) -> None:
        self._index(job.tenant_id, index_keys(job))  # index first: see index_keys
        if job.spec.exclude_calendars:  # exclusion calendars: counted in the job's own write
            self._write_with_calendar_refs(job, None, {"ConditionExpression": "attribute_not_exists(jobId)"},
                                           lambda exc: ConditionLost(what="job exists"))
            return
        try:
            self._table.put_item(Item=self._item(job), ConditionExpression="attribute_not_exists(jobId)")
        except ClientError as exc:
            raise (_condition_lost(exc, "job exists") or exc) from exc

    # --- the tag and name index: items beside the tenant's jobs, "tag#k=v#<jobId>" and
    # "name#<name>#<jobId>" (each part percent-encoded). Written before the job and removed after
    # it, so a crash leaves an extra entry (a list reads each job and keeps only those that
    # match), never a missing one. A filtered page reads the index entries it needs and their
    # jobs: its cost grows with the page, never with the tenant's jobs. ------------------------
    def _index(self, tenant_id: str, keys: set[str]) -> None:
        self._batch_index(tenant_id, keys, "PutRequest")

    def _unindex(self, tenant_id: str, keys: set[str]) -> None:
        self._batch_index(tenant_id, keys, "DeleteRequest")

    def _batch_index(self, tenant_id: str, keys: set[str], kind: str) -> None:
        ordered = sorted(keys)
        for start in range(0, len(ordered), 25):
            requests = [{kind: {"Item" if kind == "PutRequest" else "Key":
                                {"tenantId": {"S": tenant_id}, "jobId": {"S": key}}}}
                        for key in ordered[start:start + 25]]
            batch_until_done(lambda r: self._client.batch_write_item(RequestItems=r), {self._name: requests},
                             "UnprocessedItems", self._sleep)

    def list_indexed(self, tenant_id: str, prefix: str, keep: Callable[[Job], bool], limit: int,
                     cursor: str | None) -> Page:
        """The tenant's jobs whose index entries start with `prefix` and that `keep` accepts (the
        job as it now is: an entry left by a crash, or a job changed since, is passed over)."""
        start = decode_cursor(cursor, {"tenantId": str, "jobId": str})
        if start and (start["tenantId"] != tenant_id or not start["jobId"].startswith(prefix)):
            raise InvalidRequest("cursor: belongs to another list", [FieldProblem("cursor", "belongs to another list")])
        items: list[Job] = []
        positions: dict[str, str] = {}

        def after(job: Job) -> str | None:
            return encode_cursor({"tenantId": tenant_id, "jobId": positions[job.job_id]})

        while True:
            kwargs: dict[str, Any] = {
                "KeyConditionExpression": Key("tenantId").eq(tenant_id) & Key("jobId").begins_with(prefix),
                "Limit": max(limit - len(items), 10),
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            answer = self._table.query(**kwargs)
            entries = [raw["jobId"] for raw in answer.get("Items", [])]
            found = self.get_many([(tenant_id, entry.rsplit("#", 1)[1]) for entry in entries], whole=True)
            for entry in entries:
                job = found.get((tenant_id, entry.rsplit("#", 1)[1]))
                if job is None or not keep(job):
                    continue
                positions[job.job_id] = entry
                items.append(job)
                if len(items) == limit:
                    return Page(items, after(job), after)
            start = answer.get("LastEvaluatedKey")
            if not start:
                return Page(items, None, after)

    def get(self, tenant_id: str, job_id: str, consistent: bool = False) -> Job | None:
        item = self._client.get_item(TableName=self._name, Key={"tenantId": {"S": tenant_id}, "jobId": {"S": job_id}},
                                     ConsistentRead=consistent).get("Item")
        return Job.from_item(item_from_wire(item)) if item else None

    def get_many(self, keys: list[tuple[str, str]], whole: bool = False) -> dict[tuple[str, str], Job]:
        """One BatchGetItem per 100 distinct jobs instead of a read per timer. Unless `whole`, only
        what a hand-off reads (HAND_OFF_ATTRIBUTES, Job.for_hand_off: no payload of up to 256 KB,
        no target): the tick hands off, it never calls a target; the worker reads its batch's jobs
        whole.

        Strongly consistent: the hand-off drops a timer whose job looks missing or of another
        generation, so a stale read of a job created, resumed or replaced a moment ago would drop
        its only timer and the job would never fire."""
        unique = list(dict.fromkeys(keys))
        chunks = [unique[start:start + BATCH_GET_LIMIT] for start in range(0, len(unique), BATCH_GET_LIMIT)]
        found: dict[tuple[str, str], Job] = {}
        if len(chunks) <= 1:
            for chunk in chunks:
                found.update(self._get_chunk(chunk, whole))
            return found
        for part in self._pool.map(lambda chunk: self._get_chunk(chunk, whole), chunks):
            found.update(part)
        return found

    def _get_chunk(self, keys: list[tuple[str, str]], whole: bool = False) -> dict[tuple[str, str], Job]:
        request: dict = {self._name: {
            "Keys": [{"tenantId": {"S": t}, "jobId": {"S": j}} for t, j in keys],
            "ConsistentRead": True,
        }}
        if not whole:
            request[self._name]["ProjectionExpression"] = ", ".join(f"#{i}" for i in range(len(HAND_OFF_ATTRIBUTES)))
            request[self._name]["ExpressionAttributeNames"] = {f"#{i}": name
                                                               for i, name in enumerate(HAND_OFF_ATTRIBUTES)}
        answers = batch_until_done(lambda r: self._client.batch_get_item(RequestItems=r), request,
                                   "UnprocessedKeys", self._sleep)
        found: dict[tuple[str, str], Job] = {}
        for answer in answers:
            for item in answer.get("Responses", {}).get(self._name, []):
                plain_item = item_from_wire(item)
                job = Job.from_item(plain_item) if whole else Job.for_hand_off(plain_item)
                found[(job.tenant_id, job.job_id)] = job
        return found

    def save(self, before: Job, after: Job) -> None:
        """Write a changed job, only if nobody changed it since it was read (optimistic lock)."""
        if after is before:
            return
        old_keys, new_keys = index_keys(before), index_keys(after)
        self._index(after.tenant_id, new_keys - old_keys)
        if calendars_held(before) != calendars_held(after):  # exclusion calendars: the counts move
            self._write_with_calendar_refs(
                after, before, {"ConditionExpression": "#ver = :read", "ExpressionAttributeNames": {"#ver": "version"},
                                "ExpressionAttributeValues": {":read": before.version}},
                lambda exc: Conflict(f"job {before.job_id} was changed concurrently; read it again and retry"))
            self._unindex(after.tenant_id, old_keys - new_keys)
            return
        try:
            self._table.put_item(Item=self._item(after), ConditionExpression="#ver = :read",
                                 ExpressionAttributeNames={"#ver": "version"},
                                 ExpressionAttributeValues={":read": before.version})
        except ClientError as exc:
            if _condition_lost(exc, "job changed"):
                raise Conflict(f"job {before.job_id} was changed concurrently; read it again and retry") from exc
            raise
        self._unindex(after.tenant_id, old_keys - new_keys)

    def _write_with_calendar_refs(self, job: Job, before: Job | None, condition: dict, job_lost) -> None:
        """Exclusion calendars: the job's conditional put and the reference counts of the calendars
        it starts or stops holding, in one transaction (store/calendars.py)."""
        from jobsched.store.calendars import write_job_with_calendar_refs

        held, had = calendars_held(job), calendars_held(before)
        names = job.spec.exclude_calendars
        write_job_with_calendar_refs(self._table, {"Item": self._item(job), **condition}, job.tenant_id,
                                     tuple(n for n in held if n not in had), tuple(n for n in had if n not in held),
                                     lambda name: f"excludeCalendars.{names.index(name)}", job_lost)

    def _item(self, job: Job) -> dict:
        item = job.to_item()
        expires_at = ended_job_expires_at(job, self._retention_days)
        if expires_at is not None:
            item["expiresAt"] = expires_at
        return item

    # --- bulk operations: one item beside the tenant's jobs ("bulk#<id>"), its position and
    # counts moved on by one conditional write per page (service/jobs.py, Jobs.bulk). ----------
    def put_bulk(self, tenant_id: str, bulk_id: str, fields: dict) -> None:
        try:
            self._table.put_item(Item={"tenantId": tenant_id, "jobId": f"{BULK_PREFIX}{bulk_id}", **fields},
                                 ConditionExpression="attribute_not_exists(jobId)")
        except ClientError as exc:
            raise (_condition_lost(exc, "bulk exists") or exc) from exc

    def get_bulk(self, tenant_id: str, bulk_id: str) -> dict | None:
        item = self._table.get_item(Key={"tenantId": tenant_id, "jobId": f"{BULK_PREFIX}{bulk_id}"},
                                    ConsistentRead=True).get("Item")
        return plain(item) if item else None

    def advance_bulk(self, tenant_id: str, bulk_id: str, pages_read: int, fields: dict) -> bool:
        """The next page's position and counts, only if no other request moved it since
        `pages_read` (False: another request did this page)."""
        names = {f"#f{i}": name for i, name in enumerate(fields)}
        values = {f":f{i}": value for i, value in enumerate(fields.values())}
        sets = ", ".join(f"#f{i} = :f{i}" for i in range(len(fields)))
        return self._update_if(
            Key={"tenantId": tenant_id, "jobId": f"{BULK_PREFIX}{bulk_id}"},
            UpdateExpression=f"SET {sets}, pages = pages + :one",
            ConditionExpression="pages = :read",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={**values, ":one": 1, ":read": pages_read})

    def _update_if(self, **update) -> bool:
        try:
            self._table.update_item(**update)
            return True
        except ClientError as exc:
            if _condition_lost(exc, "moved on"):
                return False
            raise

    def list_in_state(self, tenant_id: str, state: JobState, limit: int, cursor: str | None) -> Page:
        """The tenant's jobs in `state`, through the JobsByState index: each page reads its
        matches' keys and then the jobs themselves (strongly consistent, checked again: the index
        is eventually consistent), so its cost grows with the matches, never with the tenant's
        history of ended jobs."""
        start = decode_cursor(cursor, {"tenantId": str, "jobId": str, "state": str})
        if start and (start["tenantId"] != tenant_id or start["state"] != state.value):
            raise InvalidRequest("cursor: belongs to another list", [FieldProblem("cursor", "belongs to another list")])
        items: list[Job] = []

        def after(job: Job) -> str | None:
            return encode_cursor({"tenantId": tenant_id, "jobId": job.job_id, "state": state.value})

        while True:
            kwargs: dict[str, Any] = {
                "IndexName": JOBS_BY_STATE_INDEX,
                "KeyConditionExpression": Key("tenantId").eq(tenant_id) & Key("state").eq(state.value),
                "Limit": max(limit - len(items), 10),
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            answer = self._table.query(**kwargs)
            ids = [raw["jobId"] for raw in answer.get("Items", [])]
            found = self.get_many([(tenant_id, job_id) for job_id in ids], whole=True)
            for job_id in ids:
                job = found.get((tenant_id, job_id))
                if job is None or job.state is not state:
                    continue  # gone, or moved on since the index was written
                items.append(job)
                if len(items) == limit:
                    return Page(items, after(job), after)
            start = answer.get("LastEvaluatedKey")
            if not start:
                return Page(items, None, after)

    def list_for_tenant(self, tenant_id: str, state: JobState | None, limit: int, cursor: str | None) -> Page:
        """In creation order (job ids are time-ordered). A cursor is the last key returned, so
        jobs created meanwhile appear at the end and none is skipped or repeated."""
        start = decode_cursor(cursor, {"tenantId": str, "jobId": str})
        if start and start["tenantId"] != tenant_id:
            raise InvalidRequest("cursor: belongs to another list", [FieldProblem("cursor", "belongs to another list")])
        items: list[Job] = []

        def after(job: Job) -> str | None:
            return encode_cursor({"tenantId": tenant_id, "jobId": job.job_id})

        while True:
            kwargs: dict[str, Any] = {
                "KeyConditionExpression": Key("tenantId").eq(tenant_id) & Key("jobId").begins_with(JOB_ID_PREFIX),
                "Limit": limit - len(items) if state is None else max(limit, 25),
            }
            if state is not None:
                kwargs["FilterExpression"] = Attr("state").eq(state.value)
            if start:
                kwargs["ExclusiveStartKey"] = start
            answer = self._table.query(**kwargs)
            for raw in answer.get("Items", []):
                items.append(Job.from_item(plain(raw)))
                if len(items) == limit:
                    return Page(items, after(items[-1]), after)
            start = answer.get("LastEvaluatedKey")
            if not start:
                return Page(items, None, after)

    def remember_request(self, tenant_id: str, scope: str, key: str, result_id: str, body_hash: str,
                         now_s: int, ttl_s: int) -> tuple[str, str] | None:
        """Record (Idempotency-Key → result) once. Returns None when this call recorded it, or the
        (result id, body hash) recorded by an earlier call with the same key. A record past its
        own expiry counts as gone, although DynamoDB's TTL may delete it up to days later."""
        try:
            self._table.put_item(
                Item={"tenantId": tenant_id, "jobId": f"{IDEMPOTENCY_PREFIX}{scope}#{key}", "resultId": result_id,
                      "bodyHash": body_hash, "expiresAt": now_s + ttl_s},
                ConditionExpression="attribute_not_exists(jobId) OR expiresAt <= :now",
                ExpressionAttributeValues={":now": now_s},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return None
        except ClientError as exc:
            lost = _condition_lost(exc, "key used")
            if not lost:
                raise
            if lost.current is None:
                item = self._table.get_item(Key={"tenantId": tenant_id, "jobId": f"{IDEMPOTENCY_PREFIX}{scope}#{key}"},
                                            ConsistentRead=True)["Item"]
                lost.current = plain(item)
            return str(lost.current["resultId"]), str(lost.current["bodyHash"])

    # --- tenant quotas: counters beside the tenant's jobs (sort keys "quota#...") -------------
    def take_quota(self, tenant_id: str, counter: str, limit: int, expires_at: int | None = None) -> bool:
        """Add one to a counter if it stays within `limit`; False when it would not."""
        expression = "ADD used :one"
        values: dict[str, Any] = {":one": 1, ":limit": limit}
        if expires_at is not None:
            expression += " SET expiresAt = :expires"
            values[":expires"] = expires_at
        try:
            self._table.update_item(Key={"tenantId": tenant_id, "jobId": f"{QUOTA_PREFIX}{counter}"},
                                    UpdateExpression=expression,
                                    ConditionExpression="attribute_not_exists(used) OR used < :limit",
                                    ExpressionAttributeValues=values)
            return True
        except ClientError as exc:
            if _condition_lost(exc, "quota"):
                return False
            raise

    def give_back_quota(self, tenant_id: str, counter: str, count: int = 1) -> None:
        """Subtract `count` places, never below zero."""
        key = {"tenantId": {"S": tenant_id}, "jobId": {"S": f"{QUOTA_PREFIX}{counter}"}}
        try:
            self._client.update_item(TableName=self._name, Key=key, UpdateExpression="ADD used :minus",
                                     ConditionExpression="used >= :count",
                                     ExpressionAttributeValues={":minus": {"N": str(-count)}, ":count": {"N": str(count)}})
            return
        except ClientError as exc:
            if not _condition_lost(exc, "quota"):
                raise
        try:  # fewer counted than given back (a counter from before a fix, or a repeat): to zero
            self._client.update_item(TableName=self._name, Key=key, UpdateExpression="SET used = :zero",
                                     ConditionExpression="used < :count",
                                     ExpressionAttributeValues={":zero": {"N": "0"}, ":count": {"N": str(count)}})
        except ClientError as exc:
            if not _condition_lost(exc, "quota"):
                raise

    def mark_completed(self, job: Job, now_ms: int, reason: CompletedReason | None = None,
                       run_count: int | None = None) -> bool:
        """ACTIVE → COMPLETED, only for this generation; False if the job changed meanwhile. The
        caller gives the job's quota place back (service/outcomes.py). A one-time job expires
        after the retention (ended_job_expires_at). A recurring job records why (schedule bounds)
        and its fires counted."""
        expires_at = ended_job_expires_at(replace(job, state=JobState.COMPLETED, updated_ms=now_ms),
                                          self._retention_days)
        try:
            self._client.update_item(
                TableName=self._name,
                Key={"tenantId": {"S": job.tenant_id}, "jobId": {"S": job.job_id}},
                UpdateExpression="SET #state = :completed, #ver = #ver + :one, updatedMs = :now"
                                 + (", expiresAt = :expires" if expires_at is not None else "")
                                 + (", completedReason = :reason" if reason is not None else "")
                                 + (", runCount = :runs" if run_count is not None else ""),
                ConditionExpression="#state = :active AND generation = :gen",
                ExpressionAttributeNames={"#state": "state", "#ver": "version"},
                ExpressionAttributeValues=values_to_wire({
                    ":completed": JobState.COMPLETED.value,
                    ":active": JobState.ACTIVE.value,
                    ":gen": job.generation,
                    ":one": 1,
                    ":now": now_ms,
                    **({":expires": expires_at} if expires_at is not None else {}),
                    **({":reason": reason.value} if reason is not None else {}),
                    **({":runs": run_count} if run_count is not None else {}),
                }),
            )
            return True
        except ClientError as exc:
            if _condition_lost(exc, "job changed"):
                return False
            raise

    # --- self-pausing (pauseAfterFailures): written only where an execution of the job ends DEAD,
    # or ends SUCCEEDED while the count is above zero (known from the job item the worker read). --
    def count_dead(self, job: Job, execution_id: str, now_ms: int) -> int | None:
        """One more execution ended DEAD in a row; returns the count. An end handled twice (its
        message delivered again after a crash) counts once and returns the count as it is, so that
        the pause that may not have followed is made; None if the job is gone."""
        try:
            answer = self._client.update_item(
                TableName=self._name,
                Key={"tenantId": {"S": job.tenant_id}, "jobId": {"S": job.job_id}},
                UpdateExpression="SET consecutiveFailures = if_not_exists(consecutiveFailures, :zero) + :one, "
                                 "lastDeadExecution = :eid, #ver = #ver + :one, updatedMs = :now",
                ConditionExpression="attribute_exists(jobId) AND "
                                    "(attribute_not_exists(lastDeadExecution) OR lastDeadExecution <> :eid)",
                ExpressionAttributeNames={"#ver": "version"},
                ExpressionAttributeValues=values_to_wire({":zero": 0, ":one": 1, ":eid": execution_id, ":now": now_ms}),
                ReturnValues="UPDATED_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            lost = _condition_lost(exc, "failure counted")
            if lost is None:
                raise
            current = lost.current or {}
            if current.get("lastDeadExecution") != execution_id:
                return None
            return int(current.get("consecutiveFailures", 0))
        return int(answer["Attributes"]["consecutiveFailures"]["N"])

    def pause_itself(self, job: Job, threshold: int, reason: str, now_ms: int) -> bool:
        """ACTIVE → PAUSED with its reason, once the count reached `threshold`; the generation
        moves on (its timers and in-flight fires are dropped, as for a pause asked for)."""
        try:
            self._client.update_item(
                TableName=self._name,
                Key={"tenantId": {"S": job.tenant_id}, "jobId": {"S": job.job_id}},
                UpdateExpression="SET #state = :paused, pausedReason = :reason, generation = generation + :one, "
                                 "#ver = #ver + :one, updatedMs = :now",
                ConditionExpression="#state = :active AND consecutiveFailures >= :threshold",
                ExpressionAttributeNames={"#state": "state", "#ver": "version"},
                ExpressionAttributeValues=values_to_wire({
                    ":paused": JobState.PAUSED.value, ":active": JobState.ACTIVE.value, ":reason": reason,
                    ":one": 1, ":now": now_ms, ":threshold": threshold}),
            )
            return True
        except ClientError as exc:
            if _condition_lost(exc, "job changed"):
                return False
            raise

    def clear_failures(self, job: Job, now_ms: int) -> None:
        """A success ends the run of failures (a no-op if another end cleared it first)."""
        try:
            self._client.update_item(
                TableName=self._name,
                Key={"tenantId": {"S": job.tenant_id}, "jobId": {"S": job.job_id}},
                UpdateExpression="SET consecutiveFailures = :zero, #ver = #ver + :one, updatedMs = :now "
                                 "REMOVE lastDeadExecution",
                ConditionExpression="consecutiveFailures > :zero",
                ExpressionAttributeNames={"#ver": "version"},
                ExpressionAttributeValues=values_to_wire({":zero": 0, ":one": 1, ":now": now_ms}),
            )
        except ClientError as exc:
            if not _condition_lost(exc, "failures cleared"):
                raise


class TimerPage(list):
    """A page of a bucket's timers; `last` when DynamoDB said no more follow."""

    def __init__(self, timers, last: bool = False) -> None:
        super().__init__(timers)
        self.last = last


class TimersStore:
    def __init__(self, dynamodb, table_name: str, page_size: int = 500,
                 sleep: Callable[[float], None] = time.sleep, client=None,
                 parallelism: int = WRITE_PARALLELISM) -> None:
        self._pool = ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="batch-write")
        self._dynamodb = dynamodb
        self._client = client or raw_client(dynamodb)
        self._table = dynamodb.Table(table_name)
        self._name = table_name
        self.page_size = page_size
        self._sleep = sleep

    def put_many(self, timers: list[Timer]) -> None:
        """Timer keys are unique per action and their content immutable, so a repeated put
        rewrites identical data: idempotent without a condition, and batchable."""
        if len(timers) == 1:
            self._client.put_item(TableName=self._name, Item=timers[0].to_wire())
            return
        unique = list({(t.bucket, t.sort_key): t for t in timers}.values())
        requests = [{self._name: [{"PutRequest": {"Item": t.to_wire()}} for t in unique[start:start + BATCH_WRITE_LIMIT]]}
                    for start in range(0, len(unique), BATCH_WRITE_LIMIT)]

        def write(request: dict) -> None:
            batch_until_done(lambda r: self._client.batch_write_item(RequestItems=r), request,
                             "UnprocessedItems", self._sleep)

        if len(requests) == 1:
            write(requests[0])
            return
        # The batches of one page in parallel (their order does not matter: each timer is written
        # whole, and the bucket is marked done only after all of them). A failure raises here.
        list(self._pool.map(write, requests))

    def pages(self, bucket: str, after_sk: str | None = None) -> Iterator[list[Timer]]:
        """Due-ordered pages of one bucket (after `after_sk` when given), strongly consistent so
        that a timer written before the bucket was claimed is always seen."""
        start: dict | None = {"bucket": {"S": bucket}, "sk": {"S": after_sk}} if after_sk else None
        while True:
            kwargs: dict[str, Any] = {
                "TableName": self._name,
                "KeyConditionExpression": "#b = :b",
                "ExpressionAttributeNames": {"#b": "bucket"},
                "ExpressionAttributeValues": {":b": {"S": bucket}},
                "ConsistentRead": True,
                "Limit": self.page_size,
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            answer = self._client.query(**kwargs)
            items = answer.get("Items", [])
            start = answer.get("LastEvaluatedKey")
            if items:
                yield TimerPage((Timer.from_wire(i) for i in items), last=not start)
            if not start:
                return


class WatermarksStore:
    def __init__(self, dynamodb, table_name: str) -> None:
        self._table = dynamodb.Table(table_name)

    def get(self, segment: int) -> Watermark | None:
        item = self._table.get_item(Key={"segment": segment}, ConsistentRead=True).get("Item")
        if not item:
            return None
        item = plain(item)
        return Watermark(segment, item.get("claimedThrough"), item.get("doneThrough"), item.get("positionMinute"),
                         item.get("positionSk"))

    def claim(self, segment: int, minute: int) -> None:
        """Raise claimedThrough to `minute` before its bucket is read. A lost condition means
        another tick claimed it already: harmless, dispatch is idempotent."""
        self._raise(segment, "claimedThrough", minute)

    def mark_done(self, segment: int, minute: int) -> None:
        self._raise(segment, "doneThrough", minute)

    def dispatch_key(self) -> bytes:
        """The key that seals lane messages (domain/dispatch_seal.py): made once, by whichever
        function needs it first (a conditional put, so all converge on one), then only read.
        It lives beside the watermarks: only the stack's own functions may read this table."""
        item = self._table.get_item(Key={"segment": DISPATCH_KEY_ITEM}, ConsistentRead=True).get("Item")
        if item is None:
            try:
                self._table.put_item(Item={"segment": DISPATCH_KEY_ITEM, "dispatchKey": secrets.token_hex(32)},
                                     ConditionExpression="attribute_not_exists(#seg)",
                                     ExpressionAttributeNames={"#seg": "segment"})
            except ClientError as exc:
                if not _condition_lost(exc, "dispatch key"):
                    raise
            item = self._table.get_item(Key={"segment": DISPATCH_KEY_ITEM}, ConsistentRead=True)["Item"]
        return bytes.fromhex(str(item["dispatchKey"]))

    def save_position(self, segment: int, minute: int, sort_key: str) -> None:
        """Every timer of bucket `minute` up to `sort_key` is handed off. Only for a bucket not yet
        done, and only forwards: a slower tick racing this one never moves it back."""
        try:
            self._table.update_item(
                Key={"segment": segment},
                UpdateExpression="SET positionMinute = :m, positionSk = :sk",
                ConditionExpression=("(attribute_not_exists(doneThrough) OR doneThrough < :m) AND "
                                     "(attribute_not_exists(positionMinute) OR positionMinute < :m OR "
                                     "(positionMinute = :m AND positionSk < :sk))"),
                ExpressionAttributeValues={":m": minute, ":sk": sort_key},
            )
        except ClientError as exc:
            if not _condition_lost(exc, "position"):
                raise

    def _raise(self, segment: int, attribute: str, minute: int) -> None:
        try:
            self._table.update_item(
                Key={"segment": segment},
                UpdateExpression=f"SET {attribute} = :m",
                ConditionExpression=f"attribute_not_exists({attribute}) OR {attribute} < :m",
                ExpressionAttributeValues={":m": minute},
            )
        except ClientError as exc:
            if not _condition_lost(exc, attribute):
                raise


@dataclass(frozen=True)
class Claim:
    attempt: int  # the fencing token of this attempt
    taken_over: AttemptRecord | None  # the attempt whose lease expired, now recorded LOST
    progress: Any = None  # the last progress a previous attempt reported, handed to this one


# overlapPolicy SKIP: how many of the newest runs (skipped records aside) may hold the running one
# (a manual trigger or a retry can run beside a scheduled run), and how many records in all the
# check reads before it answers "running".
OVERLAP_NEWEST_RUNS = 5
OVERLAP_SCAN_LIMIT = 1000


class ExecutionsStore:
    def __init__(self, dynamodb, table_name: str, retention_days: int = 30, client=None) -> None:
        self._table = dynamodb.Table(table_name)
        self._client = client or raw_client(dynamodb)
        self._name = table_name
        # An execution that has ended expires (DynamoDB TTL) this long after its end; one that
        # waits (PENDING, RUNNING, FAILED until its retry) carries no expiry.
        self._retention_s = retention_days * 86_400
        self._dead_pool: ThreadPoolExecutor | None = None  # made at the first dead-letters list

    def _expires_at(self, now_ms: int) -> int:
        return now_ms // 1000 + self._retention_s

    def claim(self, dispatch: Dispatch, now_ms: int, lease_until_ms: int, token_hash: str,
              started_ms: int | None = None, throttled_ms: int | None = None) -> Claim:
        """The worker's first write: the execution does not exist yet, or waits for exactly this
        attempt, or its running attempt's lease has expired. Raises ConditionLost otherwise."""
        try:
            answer = self._client.update_item(
                TableName=self._name,
                Key={"jobId": {"S": dispatch.job_id}, "executionId": {"S": dispatch.execution_id}},
                UpdateExpression=(
                    "SET #st = :running, attempt = if_not_exists(attempt, :zero) + :one, "
                    "tenantId = :tenant, scheduledMs = :due, generation = :gen, "
                    "startedMs = if_not_exists(startedMs, :start), attemptStartedMs = :start, "
                    "leaseUntilMs = :lease, callbackTokenHash = :token"
                    + (", throttledMs = :throttled" if throttled_ms is not None else "")
                    # Schedule bounds: the fire's number, in the write the claim makes anyway.
                    + (", #run = :run" if dispatch.run is not None else "")
                    + (", catchUp = :catchup" if dispatch.catch_up else "")
                    + " REMOVE retryAtMs, accepted"
                ),
                ConditionExpression=(
                    "attribute_not_exists(executionId)"
                    " OR (#st IN (:failed, :pending) AND attempt = :prev)"
                    " OR (#st = :running AND leaseUntilMs < :now)"
                ),
                ExpressionAttributeNames={"#st": "status", **({"#run": "run"} if dispatch.run is not None else {})},
                ExpressionAttributeValues=values_to_wire({
                    ":running": ExecutionStatus.RUNNING.value,
                    ":failed": ExecutionStatus.FAILED.value,
                    ":pending": ExecutionStatus.PENDING.value,
                    ":zero": 0,
                    ":one": 1,
                    ":prev": dispatch.attempt - 1,
                    ":tenant": dispatch.tenant_id,
                    ":due": dispatch.due_ms,
                    ":gen": dispatch.generation,
                    ":now": now_ms,
                    ":lease": lease_until_ms,
                    ":token": token_hash,
                    ":start": started_ms if started_ms is not None else now_ms,
                    **({":throttled": throttled_ms} if throttled_ms is not None else {}),
                    **({":run": dispatch.run} if dispatch.run is not None else {}),
                    **({":catchup": True} if dispatch.catch_up else {}),
                }),
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            lost = _condition_lost(exc, "execution claimed")
            current = lost.current if lost is not None else None
            if (current and current.get("status") == ExecutionStatus.RUNNING.value
                    and current.get("callbackTokenHash") == token_hash):
                # Our own claim: botocore sent the call again after a read time-out, and the first
                # one had been applied. The token is new per attempt, so no other claim has it.
                # (What the first answer said of a taken-over attempt is lost: it is not recorded.)
                return Claim(attempt=int(current["attempt"]), taken_over=None,
                             progress=json.loads(current["progress"]) if current.get("progress") else None)
            raise (lost or exc) from exc
        old = item_from_wire(answer.get("Attributes")) or {}
        if not old:
            return Claim(attempt=1, taken_over=None)
        taken_over = None
        if old.get("status") == ExecutionStatus.RUNNING.value:
            taken_over = AttemptRecord(
                attempt=int(old["attempt"]),
                status=ExecutionStatus.LOST,
                started_ms=int(old.get("attemptStartedMs", now_ms)),
                finished_ms=now_ms,
                error="lease expired: the worker stopped reporting",
            )
        progress = json.loads(old["progress"]) if old.get("progress") else None
        return Claim(attempt=int(old.get("attempt", 0)) + 1, taken_over=taken_over, progress=progress)

    def finish_attempt(
        self,
        dispatch: Dispatch,
        attempt: int,
        status: ExecutionStatus,
        records: list[AttemptRecord],
        now_ms: int,
        error: str | None,
        output: Any = None,
        retry_at_ms: int | None = None,
        lease_expired_by: int | None = None,
        dead_letter: bool = True,
    ) -> None:
        """Fenced: applies only while this attempt still holds the execution. A retry is not
        scheduled over a cancel request; a LOST verdict only stands if no heartbeat extended the
        lease meanwhile (lease_expired_by). A step that ends DEAD is no dead letter of its own
        (`dead_letter` False): its run is."""
        names = {"#st": "status", "#err": "error"}
        values: dict[str, Any] = {
            ":status": status.value,
            ":records": [r.to_item() for r in records],
            ":empty": [],
            ":mine": attempt,
            ":running": ExecutionStatus.RUNNING.value,
            ":error": error,
        }
        sets = ["#st = :status", "attempts = list_append(if_not_exists(attempts, :empty), :records)", "#err = :error"]
        condition = "attempt = :mine AND #st = :running"
        if lease_expired_by is not None:
            condition += " AND leaseUntilMs <= :leaseNow"
            values[":leaseNow"] = lease_expired_by
        if status is ExecutionStatus.FAILED:
            sets.append("retryAtMs = :retryAt")
            values[":retryAt"] = retry_at_ms
            condition += " AND attribute_not_exists(cancelRequested)"
        else:
            sets.extend(["finishedMs = :now", "expiresAt = :expires"])
            values[":now"] = now_ms
            values[":expires"] = self._expires_at(now_ms)
        if status is ExecutionStatus.DEAD and dead_letter:
            # A sparse index: only dead executions carry these, so listing them reads nothing else.
            sets.extend(["deadLetterTenant = :deadPartition", "deadAtMs = :now"])
            values[":deadPartition"] = dead_letter_partition(dispatch.tenant_id, dispatch.execution_id)
        if output is not None:
            sets.append("#out = :output")
            names["#out"] = "output"
            values[":output"] = compact(output)
        try:
            self._client.update_item(
                TableName=self._name,
                Key={"jobId": {"S": dispatch.job_id}, "executionId": {"S": dispatch.execution_id}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                UpdateExpression="SET " + ", ".join(sets) + " REMOVE leaseUntilMs, callbackTokenHash",
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values_to_wire(values),
            )
        except ClientError as exc:
            raise (_condition_lost(exc, "stale attempt") or exc) from exc

    def accept(self, dispatch: Dispatch, attempt: int, lease_until_ms: int) -> None:
        """A long-running target took the work: the attempt stays RUNNING under a lease that its
        heartbeats extend. Fenced like every write of an attempt."""
        self._fenced_update(dispatch.job_id, dispatch.execution_id, attempt,
                            "SET accepted = :yes, leaseUntilMs = :lease", {":yes": True, ":lease": lease_until_ms})

    def heartbeat(self, job_id: str, execution_id: str, attempt: int, progress: Any, lease_until_ms: int,
                  now_ms: int) -> Execution:
        """Extend the lease and keep the progress; returns the execution as it now is."""
        values: dict[str, Any] = {":lease": lease_until_ms, ":now": now_ms}
        expression = "SET leaseUntilMs = :lease, lastHeartbeatMs = :now"
        if progress is not None:
            expression += ", progress = :progress"
            values[":progress"] = compact(progress)
        return self._fenced_update(job_id, execution_id, attempt, expression, values)

    def request_cancel(self, job_id: str, execution_id: str, attempt: int) -> Execution:
        return self._fenced_update(job_id, execution_id, attempt, "SET cancelRequested = :yes", {":yes": True})

    def _fenced_update(self, job_id: str, execution_id: str, attempt: int, expression: str,
                       values: dict[str, Any]) -> Execution:
        try:
            answer = self._table.update_item(
                Key={"jobId": job_id, "executionId": execution_id},
                UpdateExpression=expression,
                ConditionExpression="attempt = :mine AND #st = :running",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={**values, ":mine": attempt, ":running": ExecutionStatus.RUNNING.value},
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            raise (_condition_lost(exc, "stale attempt") or exc) from exc
        return Execution.from_item(plain(answer["Attributes"]))

    def cancel_waiting(self, job_id: str, execution_id: str, now_ms: int) -> Execution:
        """PENDING or FAILED (waiting for a retry) → CANCELLED: it never starts again."""
        try:
            answer = self._table.update_item(
                Key={"jobId": job_id, "executionId": execution_id},
                UpdateExpression="SET #st = :cancelled, finishedMs = :now, expiresAt = :expires REMOVE retryAtMs",
                ConditionExpression="#st IN (:pending, :failed)",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={":cancelled": ExecutionStatus.CANCELLED.value, ":now": now_ms,
                                           ":expires": self._expires_at(now_ms),
                                           ":pending": ExecutionStatus.PENDING.value,
                                           ":failed": ExecutionStatus.FAILED.value},
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            raise (_condition_lost(exc, "not waiting") or exc) from exc
        return Execution.from_item(plain(answer["Attributes"]))

    def put_skipped(self, tenant_id: str, job_id: str, execution_id: str, scheduled_ms: int, generation: int,
                    reason: str, now_ms: int, skip_reason: str | None = None) -> bool:
        """Record an occurrence that did not run (overlap or misfire policy, an exclusion calendar).
        False if the execution already exists (it ran, or was recorded before)."""
        return self._put_unrun(ExecutionStatus.SKIPPED, tenant_id, job_id, execution_id, scheduled_ms, generation,
                               reason, now_ms, skip_reason)

    def put_missed_window(self, tenant_id: str, job_id: str, execution_id: str, scheduled_ms: int, generation: int,
                          count: int, through_ms: int, uncounted_before_ms: int | None, now_ms: int) -> bool:
        """Catch-up that does not flood: the occurrences a catch-up left out (older than its
        maxCatchUp newest), as one SKIPPED record under the oldest one's id, with their count and
        the newest one's instant. False if it exists already (a repeated hand-off)."""
        reason = (f"skipped: {count} missed occurrences beyond maxCatchUp (MISSED_WINDOW)"
                  + (" and every occurrence more than 7 days before the catch-up, not counted"
                     if uncounted_before_ms is not None else ""))
        item = {"jobId": job_id, "executionId": execution_id, "tenantId": tenant_id, "scheduledMs": scheduled_ms,
                "status": ExecutionStatus.SKIPPED.value, "attempt": 0, "generation": generation, "attempts": [],
                "error": reason, "finishedMs": now_ms, "expiresAt": self._expires_at(now_ms),
                "skipReason": "MISSED_WINDOW", "skippedCount": count, "skippedThroughMs": through_ms}
        return self._put_new(item)

    def put_cancelled(self, tenant_id: str, job_id: str, execution_id: str, scheduled_ms: int, generation: int,
                      reason: str, now_ms: int) -> bool:
        """Record CANCELLED an execution whose id the API handed out (a backfill's) and that never
        ran because its job went away first. False if the execution already exists."""
        return self._put_unrun(ExecutionStatus.CANCELLED, tenant_id, job_id, execution_id, scheduled_ms, generation,
                               reason, now_ms)

    def _put_unrun(self, status: ExecutionStatus, tenant_id: str, job_id: str, execution_id: str, scheduled_ms: int,
                   generation: int, reason: str, now_ms: int, skip_reason: str | None = None) -> bool:
        item = {"jobId": job_id, "executionId": execution_id, "tenantId": tenant_id, "scheduledMs": scheduled_ms,
                "status": status.value, "attempt": 0, "generation": generation, "attempts": [],
                "error": reason, "finishedMs": now_ms, "expiresAt": self._expires_at(now_ms)}
        if skip_reason is not None:
            item["skipReason"] = skip_reason  # EXCLUDED (an exclusion calendar's date)
        return self._put_new(item)

    def _put_new(self, item: dict) -> bool:
        """Write an execution's first record; False if it exists already."""
        try:
            self._table.put_item(Item=item, ConditionExpression="attribute_not_exists(executionId)")
            return True
        except ClientError as exc:
            if _condition_lost(exc, "exists"):
                return False
            raise

    def another_running(self, job_id: str, execution_id: str) -> bool:
        """Whether an execution of the job other than this one is still RUNNING (overlapPolicy
        SKIP). Strongly consistent (a run that just started must be seen), newest first, passing
        over the SKIPPED records that a long run leaves behind it: under SKIP at most one run goes
        on at a time, so it is among the newest executions that were not skipped. After
        OVERLAP_SCAN_LIMIT skipped records in a row the answer is "running" (skip when unsure:
        so many skips mean a run has been going on all that time)."""
        seen = examined = 0
        start: dict | None = None
        while True:
            kwargs: dict[str, Any] = {
                "KeyConditionExpression": Key("jobId").eq(job_id), "ScanIndexForward": False, "Limit": 50,
                "ConsistentRead": True, "ProjectionExpression": "executionId, #st",
                "FilterExpression": Attr("status").ne(ExecutionStatus.SKIPPED.value),
                "ExpressionAttributeNames": {"#st": "status"},
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            answer = self._table.query(**kwargs)
            for item in answer.get("Items", []):
                if item["executionId"] == execution_id:
                    continue
                if item["status"] == ExecutionStatus.RUNNING.value:
                    return True
                seen += 1
                if seen >= OVERLAP_NEWEST_RUNS:
                    return False
            examined += int(answer.get("ScannedCount", 0))
            start = answer.get("LastEvaluatedKey")
            if not start:
                return False
            if examined >= OVERLAP_SCAN_LIMIT:
                return True

    def put_pending(self, tenant_id: str, job_id: str, execution_id: str, scheduled_ms: int, generation: int) -> Execution:
        """A known execution that no worker has claimed yet (a manual trigger)."""
        item = {"jobId": job_id, "executionId": execution_id, "tenantId": tenant_id, "scheduledMs": scheduled_ms,
                "status": ExecutionStatus.PENDING.value, "attempt": 0, "generation": generation, "attempts": []}
        try:
            self._table.put_item(Item=item, ConditionExpression="attribute_not_exists(executionId)")
        except ClientError as exc:
            raise (_condition_lost(exc, "execution exists") or exc) from exc
        return Execution.from_item(item)

    def reopen_dead(self, job_id: str, execution_id: str) -> Execution:
        """DEAD → PENDING for one more attempt (redrive). Raises ConditionLost if not DEAD."""
        try:
            answer = self._table.update_item(
                Key={"jobId": job_id, "executionId": execution_id},
                UpdateExpression="SET #st = :pending REMOVE deadLetterTenant, deadAtMs, finishedMs, expiresAt",
                ConditionExpression="#st = :dead",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={":pending": ExecutionStatus.PENDING.value, ":dead": ExecutionStatus.DEAD.value},
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            raise (_condition_lost(exc, "not dead") or exc) from exc
        return Execution.from_item(plain(answer["Attributes"]))

    # --- runs and their steps (a job with steps; domain/steps.py) ------------------------------
    def put_step(self, tenant_id: str, job_id: str, run_id: str, name: str, step_id: str, scheduled_ms: int,
                 generation: int) -> bool:
        """A step's record, PENDING, before any of its run's steps is dispatched. False if it
        exists (the run's start is repeated after a crash: what the step did is kept)."""
        item = {"jobId": job_id, "executionId": step_id, "tenantId": tenant_id, "scheduledMs": scheduled_ms,
                "status": ExecutionStatus.PENDING.value, "attempt": 0, "generation": generation, "attempts": [],
                "runId": run_id, "stepName": name}
        return self._put_new(item)

    def put_hook(self, tenant_id: str, job_id: str, hook_id: str, of_execution: str, scheduled_ms: int,
                 generation: int) -> bool:
        """A completion hook's call, PENDING, before it is sent (False: recorded before)."""
        return self._put_new({"jobId": job_id, "executionId": hook_id, "tenantId": tenant_id,
                              "scheduledMs": scheduled_ms, "status": ExecutionStatus.PENDING.value, "attempt": 0,
                              "generation": generation, "attempts": [], "hookOf": of_execution})

    def join_step(self, job_id: str, step_id: str, upstream: str) -> Execution | None:
        """Record that `upstream` succeeded, once, whatever the step's state (an UPSTREAM_FAILED
        step that a redrive reopens then knows which of its upstream steps it still waits for).
        Returns the step as it now is, or None if `upstream` was recorded already. Whoever sees
        the set complete on a PENDING step that never started dispatches it."""
        try:
            answer = self._table.update_item(
                Key={"jobId": job_id, "executionId": step_id},
                UpdateExpression="ADD upstreamDone :names",
                ConditionExpression="attribute_exists(executionId) AND NOT contains(upstreamDone, :name)",
                ExpressionAttributeValues={":names": {upstream}, ":name": upstream},
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if _condition_lost(exc, "joined"):
                return None
            raise
        return Execution.from_item(plain(answer["Attributes"]))

    def mark_upstream_failed(self, job_id: str, step_id: str, now_ms: int) -> bool:
        """PENDING → UPSTREAM_FAILED: a step above it ended DEAD or CANCELLED."""
        return self._transition(
            job_id, step_id, "not pending",
            UpdateExpression="SET #st = :failed, finishedMs = :now, expiresAt = :expires",
            ConditionExpression="#st = :pending",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={":failed": ExecutionStatus.UPSTREAM_FAILED.value, ":now": now_ms,
                                       ":expires": self._expires_at(now_ms), ":pending": ExecutionStatus.PENDING.value})

    def _transition(self, job_id: str, execution_id: str, what: str, **update) -> bool:
        """One conditional update of an execution: True if it applied, False if its condition
        did not hold (someone else moved it first, or it is in another state)."""
        try:
            self._table.update_item(Key={"jobId": job_id, "executionId": execution_id}, **update)
            return True
        except ClientError as exc:
            if _condition_lost(exc, what):
                return False
            raise

    def reopen_upstream_failed(self, job_id: str, step_id: str) -> bool:
        """UPSTREAM_FAILED → PENDING (a redrive of its run): it waits for its upstream again."""
        return self._transition(
            job_id, step_id, "not upstream-failed",
            UpdateExpression="SET #st = :pending REMOVE finishedMs, expiresAt",
            ConditionExpression="#st = :failed",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={":failed": ExecutionStatus.UPSTREAM_FAILED.value,
                                       ":pending": ExecutionStatus.PENDING.value})

    def run_steps(self, job_id: str, run_id: str) -> list[Execution]:
        """Every step of a run, strongly consistent: one query of the run's own items (its cost
        grows with its steps, never with the job's history)."""
        steps: list[Execution] = []
        start: dict | None = None
        while True:
            kwargs: dict[str, Any] = {
                "KeyConditionExpression": Key("jobId").eq(job_id) & Key("executionId").begins_with(f"{run_id}.step."),
                "ConsistentRead": True,
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            answer = self._table.query(**kwargs)
            steps.extend(Execution.from_item(plain(i)) for i in answer.get("Items", []))
            start = answer.get("LastEvaluatedKey")
            if not start:
                return steps

    def note_steps_ended(self, job_id: str, run_id: str, names: list[str]) -> tuple[Execution, int] | None:
        """Add `names` to the run's set of ended steps (a set: a repeat adds nothing) and return
        the run with the set's size, or None if the run has no record. The run's end is then
        decided from this one small item; only when the set is complete are the steps read
        (service/runs.py: the steps carry their outputs, up to 64 KB each)."""
        try:
            answer = self._table.update_item(
                Key={"jobId": job_id, "executionId": run_id},
                UpdateExpression="ADD endedSteps :names",
                ConditionExpression="attribute_exists(executionId)",
                ExpressionAttributeValues={":names": set(names)},
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if _condition_lost(exc, "no run"):
                return None
            raise
        item = plain(answer["Attributes"])
        return Execution.from_item(item), len(item.get("endedSteps") or ())

    def forget_steps_ended(self, job_id: str, run_id: str, names: list[str]) -> None:
        """A redrive reopened these steps: they are no longer counted as ended."""
        if names:
            self._table.update_item(Key={"jobId": job_id, "executionId": run_id},
                                    UpdateExpression="DELETE endedSteps :names",
                                    ConditionExpression="attribute_exists(executionId)",
                                    ExpressionAttributeValues={":names": set(names)})

    def mark_run_started(self, job_id: str, run_id: str, attempt: int) -> None:
        """The run's steps are recorded and its first ones sent: no later delivery of its fire
        takes it over (no lease left to expire). Fenced like every write of an attempt."""
        try:
            self._table.update_item(
                Key={"jobId": job_id, "executionId": run_id},
                UpdateExpression="SET accepted = :yes REMOVE leaseUntilMs, callbackTokenHash",
                ConditionExpression="attempt = :mine AND #st = :running",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={":yes": True, ":mine": attempt, ":running": ExecutionStatus.RUNNING.value},
            )
        except ClientError as exc:
            raise (_condition_lost(exc, "stale attempt") or exc) from exc

    def finish_run(self, job_id: str, run_id: str, status: ExecutionStatus, now_ms: int, error: str | None,
                   tenant_id: str | None = None) -> bool:
        """RUNNING → its end, once (whoever sees every step ended first). Not while a redrive is
        reopening its steps. A DEAD run is a dead letter (in its shard of the index; without
        `tenant_id`, in shard 0)."""
        sets = ["#st = :status", "finishedMs = :now", "expiresAt = :expires", "#err = :error"]
        values: dict[str, Any] = {":status": status.value, ":now": now_ms, ":error": error,
                                  ":expires": self._expires_at(now_ms), ":running": ExecutionStatus.RUNNING.value}
        if status is ExecutionStatus.DEAD:
            if tenant_id is None:
                sets.extend(["deadLetterTenant = tenantId", "deadAtMs = :now"])
            else:
                sets.extend(["deadLetterTenant = :deadPartition", "deadAtMs = :now"])
                values[":deadPartition"] = dead_letter_partition(tenant_id, run_id)
        return self._transition(
            job_id, run_id, "not running",
            UpdateExpression="SET " + ", ".join(sets),
            ConditionExpression="#st = :running AND attribute_not_exists(redriving)",
            ExpressionAttributeNames={"#st": "status", "#err": "error"},
            ExpressionAttributeValues=values)

    def reopen_run(self, job_id: str, run_id: str) -> Execution:
        """DEAD → RUNNING, marked `redriving` until its failed steps are reopened (a redrive
        interrupted there is completed by repeating it, or by its sweep)."""
        try:
            answer = self._table.update_item(
                Key={"jobId": job_id, "executionId": run_id},
                UpdateExpression=("SET #st = :running, redriving = :yes "
                                  "REMOVE deadLetterTenant, deadAtMs, finishedMs, expiresAt, #err"),
                ConditionExpression="#st = :dead OR (#st = :running AND redriving = :yes)",
                ExpressionAttributeNames={"#st": "status", "#err": "error"},
                ExpressionAttributeValues={":running": ExecutionStatus.RUNNING.value, ":yes": True,
                                           ":dead": ExecutionStatus.DEAD.value},
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            raise (_condition_lost(exc, "not dead") or exc) from exc
        return Execution.from_item(plain(answer["Attributes"]))

    def end_redrive(self, job_id: str, run_id: str) -> None:
        self._table.update_item(Key={"jobId": job_id, "executionId": run_id}, UpdateExpression="REMOVE redriving",
                                ConditionExpression="attribute_exists(executionId)")

    def list_dead_letters(self, tenant_id: str, limit: int, cursor: str | None) -> Page:
        """The tenant's dead letters, newest first: one query per shard of the index (in parallel),
        merged by (deadAtMs, jobId, executionId). The cursor is the last item returned; each
        shard resumes below it. Items of another tenant whose id happens to spell one of this
        tenant's shard values ("a#3" is tenant "a"'s shard 3 and tenant "a#3"'s shard 0) are
        filtered out by their tenantId."""
        start = decode_cursor(cursor, {"jobId": str, "executionId": str, "deadLetterTenant": str, "deadAtMs": int})
        if start and start["deadLetterTenant"] != tenant_id:
            raise InvalidRequest("cursor: belongs to another list", [FieldProblem("cursor", "belongs to another list")])
        after = (start["deadAtMs"], start["jobId"], start["executionId"]) if start else None
        if self._dead_pool is None:
            self._dead_pool = ThreadPoolExecutor(max_workers=GET_PARALLELISM, thread_name_prefix="dead-letters")
        shards = list(self._dead_pool.map(lambda part: self._dead_shard(part, tenant_id, limit, after),
                                          dead_letter_partitions(tenant_id)))
        merged = sorted((e for items, _ in shards for e in items),
                        key=lambda e: (e.finished_ms, e.job_id, e.execution_id), reverse=True)
        more = len(merged) > limit or any(more for _, more in shards)
        items = merged[:limit]

        def cursor_after(e: Execution) -> str | None:
            return encode_cursor({"jobId": e.job_id, "executionId": e.execution_id, "deadLetterTenant": tenant_id,
                                  "deadAtMs": e.finished_ms})
        return Page(items, cursor_after(items[-1]) if more and items else None, cursor_after)

    def _dead_shard(self, partition: str, tenant_id: str, limit: int,
                    after: tuple[int, str, str] | None) -> tuple[list[Execution], bool]:
        """Up to `limit` dead letters of one shard below `after`, and whether the shard has more."""
        values = {":part": partition, ":tenant": tenant_id}
        condition = "deadLetterTenant = :part"
        if after is not None:
            condition += " AND deadAtMs <= :at"
            values[":at"] = after[0]
        kwargs: dict[str, Any] = {
            "TableName": self._name, "IndexName": DEAD_LETTERS_INDEX, "KeyConditionExpression": condition,
            "FilterExpression": "tenantId = :tenant", "ExpressionAttributeValues": values_to_wire(values),
            "ScanIndexForward": False, "Limit": limit + 1,
        }
        found: list[Execution] = []
        while True:
            answer = self._client.query(**kwargs)
            for raw in answer.get("Items", []):
                execution = Execution.from_item(item_from_wire(raw))
                # Equal deadAtMs: those at or above the cursor in (jobId, executionId) were listed.
                if after is None or (execution.finished_ms, execution.job_id, execution.execution_id) < after:
                    found.append(execution)
            if len(found) > limit:
                return found[:limit], True
            if not answer.get("LastEvaluatedKey"):
                return found, False
            kwargs["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def get(self, job_id: str, execution_id: str) -> Execution | None:
        item = self._table.get_item(Key={"jobId": job_id, "executionId": execution_id}, ConsistentRead=True).get("Item")
        return Execution.from_item(plain(item)) if item else None

    def summaries_between(self, job_id: str, from_ms: int, to_ms: int, max_records: int) -> tuple[list, bool]:
        """The job's executions scheduled in [from_ms, to_ms), newest first, as ExecutionSummary
        (not its runs' steps nor its hooks' calls), and whether all were read (False: stopped at
        `max_records`). Eventually consistent pages of 1 MB: a read costs the records' summed size
        / 8 KB in RCU on the job's key (10,080 records of about 600 B: about 750 RCU)."""
        from jobsched.domain.stats import ExecutionSummary

        kwargs: dict[str, Any] = {
            # Execution ids are `<jobId>.<scheduled ms, 13 digits>[.suffix]`: the window is a range.
            "KeyConditionExpression": Key("jobId").eq(job_id) & Key("executionId").between(
                f"{job_id}.{max(0, from_ms):013d}", f"{job_id}.{max(0, to_ms - 1):013d}~"),
            "ScanIndexForward": False,
            "FilterExpression": Attr("runId").not_exists() & Attr("hookOf").not_exists(),
            "ProjectionExpression": "executionId, #st, scheduledMs, startedMs, skippedCount",
            "ExpressionAttributeNames": {"#st": "status"},
        }
        found: list = []
        while True:
            answer = self._table.query(**kwargs)
            for item in answer.get("Items", []):
                item = plain(item)
                scheduled = int(item.get("scheduledMs") or 0)
                late = int(item["startedMs"]) - scheduled if item.get("startedMs") is not None else None
                found.append(ExecutionSummary(ExecutionStatus(item["status"]), scheduled, late,
                                              str(item["executionId"]).endswith(".manual"),
                                              int(item["skippedCount"]) if item.get("skippedCount") else None))
                if len(found) >= max_records:
                    return found, False
            if "LastEvaluatedKey" not in answer:
                return found, True
            kwargs["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def latest_run(self, job_id: str, pages: int = 4) -> int | None:
        """The highest fire number recorded on the job's newest executions (schedule bounds: the
        claim records it), None when none in reach has one. Newest first; a few small pages at
        most (a run's steps, triggers and hooks carry none), only the number projected."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key("jobId").eq(job_id),
            "ScanIndexForward": False,
            "Limit": 10,
            "ProjectionExpression": "#run",
            "ExpressionAttributeNames": {"#run": "run"},
        }
        for _ in range(pages):
            answer = self._table.query(**kwargs)
            runs = [int(i["run"]) for i in answer.get("Items", []) if i.get("run") is not None]
            if runs:
                return max(runs)
            if not answer.get("LastEvaluatedKey"):
                return None
            kwargs["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
        return None

    def list_for_job(self, job_id: str, limit: int, cursor: str | None) -> Page:
        """The job's history, newest first: its executions and runs, not the steps of its runs (a
        run lists its own) nor its completion hooks' calls (a page may then hold fewer than
        `limit`, with a cursor for more)."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key("jobId").eq(job_id),
            "ScanIndexForward": False,
            "Limit": limit,
            "FilterExpression": Attr("runId").not_exists() & Attr("hookOf").not_exists(),
        }
        start = decode_cursor(cursor, {"jobId": str, "executionId": str})
        if start:
            if start["jobId"] != job_id:
                raise InvalidRequest("cursor: belongs to another list", [FieldProblem("cursor", "belongs to another list")])
            kwargs["ExclusiveStartKey"] = start
        answer = self._table.query(**kwargs)
        items = [Execution.from_item(plain(i)) for i in answer.get("Items", [])]
        return Page(items, encode_cursor(answer.get("LastEvaluatedKey")),
                    lambda e: encode_cursor({"jobId": e.job_id, "executionId": e.execution_id}))


class ApiKeysStore:
    def __init__(self, dynamodb, table_name: str) -> None:
        self._table = dynamodb.Table(table_name)

    def tenant_for(self, key_hash: str) -> str | None:
        item = self._table.get_item(Key={"keyHash": key_hash}).get("Item")
        if not item or item.get("revoked"):
            return None
        return str(item["tenantId"])

    def list_keys(self, tenant_id: str | None) -> list[dict]:
        """Administration only (the CLI), never on a request path: the table holds one small
        item per key, and a scan reads them all."""
        kwargs: dict[str, Any] = {"ProjectionExpression": "keyId, tenantId, createdMs, revoked"}
        if tenant_id:
            kwargs["FilterExpression"] = Attr("tenantId").eq(tenant_id)
        items: list[dict] = []
        while True:
            answer = self._table.scan(**kwargs)
            items.extend(plain(i) for i in answer.get("Items", []))
            if not answer.get("LastEvaluatedKey"):
                return sorted(items, key=lambda i: (i["tenantId"], i["createdMs"]))
            kwargs["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def revoke(self, key_id: str, now_ms: int) -> dict | None:
        """Mark the key with this id revoked; None if no such key."""
        prefix = key_id.removeprefix("key_")
        kwargs: dict[str, Any] = {"FilterExpression": Attr("keyHash").begins_with(prefix) & Attr("keyId").eq(key_id)}
        while True:
            answer = self._table.scan(**kwargs)
            for item in answer.get("Items", []):
                self._table.update_item(Key={"keyHash": item["keyHash"]}, UpdateExpression="SET revoked = :now",
                                        ConditionExpression="attribute_exists(keyHash)",
                                        ExpressionAttributeValues={":now": now_ms})
                return plain({k: v for k, v in item.items() if k != "keyHash"})
            if not answer.get("LastEvaluatedKey"):
                return None
            kwargs["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def put(self, key_hash: str, tenant_id: str, key_id: str, now_ms: int) -> None:
        try:
            self._table.put_item(
                Item={"keyHash": key_hash, "tenantId": tenant_id, "keyId": key_id, "createdMs": now_ms},
                ConditionExpression="attribute_not_exists(keyHash)",
            )
        except ClientError as exc:
            raise (_condition_lost(exc, "key exists") or exc) from exc
