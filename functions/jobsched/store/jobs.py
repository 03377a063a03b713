"""The Jobs table: jobs, their index entries (tags, names), idempotency records, quota counters and bulk positions."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Callable
from urllib.parse import quote

from botocore.exceptions import ClientError

from jobsched.domain.calendars import calendars_held
from jobsched.domain.errors import ChangedConcurrently, ConditionLost
from jobsched.domain.jobs import CompletedReason, Job, JobState, job_partition
from jobsched.store.dynamo import BATCH_GET_LIMIT, GET_PARALLELISM, _condition_lost, batch_until_done, plain, raw_client, sharded_counter
from jobsched.store.job_lists import JobLists
from jobsched.store.jobs_state_index import JOBS_BY_STATE_SHARD_INDEX, STATE_SHARD_ATTRIBUTE, state_shard
from jobsched.store.wire import item_from_wire, values_to_wire


# Idempotency records share the Jobs table (same tenant partition), under another sort-key prefix.
IDEMPOTENCY_PREFIX = "idem#"


QUOTA_PREFIX = "quota#"


ACTIVE_JOBS_COUNTER = "active"


BULK_PREFIX = "bulk#"


# What a hand-off reads of a job: everything but the payload.
# What a hand-off reads of a job (Job.for_hand_off): each attribute left out is one less for
# boto3 to parse and for us to decode, thousands of times a minute (bench cpu: about 15% of the
# tick's CPU per timer).
HAND_OFF_ATTRIBUTES = ("tenantId", "jobId", "schedule", "priority", "misfirePolicy", "jitterSec", "state", "generation",
                       "maxRuns", "catchUp",  # catchUp: catch-up that does not flood
                       "excludeCalendars",
                       "expect")  # absence alerts: a CHECK timer beside each FIRE timer


def job_key(tenant_id: str, job_id: str) -> dict:
    """A job item's key: its tenant's own key or one of its shards (domain/jobs.py job_partition);
    the tenant's other items (index entries, idempotency records, counters) stay on its own key."""
    return {"tenantId": job_partition(tenant_id, job_id), "jobId": job_id}


def _wire_key(tenant_id: str, job_id: str) -> dict:
    return {"tenantId": {"S": job_partition(tenant_id, job_id)}, "jobId": {"S": job_id}}


def active_counter(shard: int) -> str:
    return sharded_counter(ACTIVE_JOBS_COUNTER, shard)


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


class JobsStore(JobLists):
    def __init__(self, dynamodb, table_name: str, sleep: Callable[[float], None] = time.sleep, client=None,
                 retention_days: int = 30, state_index: str = JOBS_BY_STATE_SHARD_INDEX) -> None:
        self._retention_days = retention_days
        self._table = dynamodb.Table(table_name)
        self._dynamodb = dynamodb
        self._client = client or raw_client(dynamodb)  # the hot calls, in wire format (store/wire.py)
        # Kept for the container's life (threads start at the first use, not here).
        self._pool = ThreadPoolExecutor(max_workers=GET_PARALLELISM, thread_name_prefix="batch-get")
        self._name = table_name
        self._sleep = sleep
        self._state_index = state_index  # the index lists by state read (Settings.jobs_state_index)
        self._shards_done = False  # the state-shard upgrade's record said done (_state_shards_done)

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

    def remove_new(self, job: Job) -> bool:
        """Take back a job just created whose first timer could not be written (a batch's job is
        created whole or not at all), only while it is still that first version (nobody changed
        it since) and holds no calendar (their counts change in a transaction: such a job stays,
        its create answered with an error that says to repeat it with its idempotency key).
        True when it is gone."""
        if job.spec.exclude_calendars:
            return False
        try:
            self._table.delete_item(Key=job_key(job.tenant_id, job.job_id),
                                    ConditionExpression="version = :first AND generation = :first",
                                    ExpressionAttributeValues={":first": 1})
        except ClientError as exc:
            if _condition_lost(exc, "job changed"):
                return False
            raise
        self._unindex(job.tenant_id, index_keys(job))  # after the job: a crash leaves an extra entry
        return True

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

    def get(self, tenant_id: str, job_id: str, consistent: bool = False) -> Job | None:
        item = self._client.get_item(TableName=self._name, Key=_wire_key(tenant_id, job_id),
                                     ConsistentRead=consistent).get("Item")
        return Job.from_item(item_from_wire(item)) if item else None

    def get_many(self, keys: list[tuple[str, str]], whole: bool = False,
                 items: dict | None = None) -> dict[tuple[str, str], Job]:
        """One BatchGetItem per 100 distinct jobs instead of a read per timer. Unless `whole`, only
        what a hand-off reads (HAND_OFF_ATTRIBUTES, Job.for_hand_off: no payload of up to 256 KB,
        no target); the worker, and the tick for its jobs' snapshots, read them whole (`items`:
        filled with the plain items too, keyed as the answer).

        Strongly consistent: the hand-off drops a timer whose job looks missing or of another
        generation, so a stale read of a job created, resumed or replaced a moment ago would drop
        its only timer and the job would never fire."""
        unique = list(dict.fromkeys(keys))
        chunks = [unique[start:start + BATCH_GET_LIMIT] for start in range(0, len(unique), BATCH_GET_LIMIT)]
        found: dict[tuple[str, str], Job] = {}
        if len(chunks) <= 1:
            for chunk in chunks:
                found.update(self._get_chunk(chunk, whole, items))
            return found
        for part in self._pool.map(lambda chunk: self._get_chunk(chunk, whole, items), chunks):
            found.update(part)
        return found

    def _get_chunk(self, keys: list[tuple[str, str]], whole: bool = False,
                   items: dict | None = None) -> dict[tuple[str, str], Job]:
        request: dict = {self._name: {
            "Keys": [_wire_key(t, j) for t, j in keys],
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
                if items is not None:  # the plain items too (job snapshots: service/handoff.py)
                    items[(job.tenant_id, job.job_id)] = plain_item
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
                lambda exc: ChangedConcurrently(f"job {before.job_id} was changed concurrently; read it again and retry"))
            self._unindex(after.tenant_id, old_keys - new_keys)
            return
        try:
            self._table.put_item(Item=self._item(after), ConditionExpression="#ver = :read",
                                 ExpressionAttributeNames={"#ver": "version"},
                                 ExpressionAttributeValues={":read": before.version})
        except ClientError as exc:
            if _condition_lost(exc, "job changed"):
                raise ChangedConcurrently(f"job {before.job_id} was changed concurrently; read it again and retry") from exc
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
        # Its key in JobsByStateShard: every write of a whole job (and each update that changes
        # its state: mark_completed, pause_itself) writes it with the state.
        item[STATE_SHARD_ATTRIBUTE] = state_shard(job.tenant_id, job.state.value, job.job_id)
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
    def take_create_place(self, tenant_id: str, counter: str, active_limit: int, second: int, rate_limit: int,
                          new_second_first: bool = False) -> tuple[str | None, int]:
        """One create counted in one item for both quotas (take_create_places of one)."""
        taken, refused, second = self.take_create_places(tenant_id, counter, active_limit, second, rate_limit, 1,
                                                         new_second_first)
        return (None if taken else refused), second

    def take_create_places(self, tenant_id: str, counter: str, active_limit: int, second: int, rate_limit: int,
                           count: int, new_second_first: bool = False) -> tuple[int, str | None, int]:
        """Up to `count` creates counted in one item for both quotas: places among the tenant's
        jobs that have not ended (`used` stays <= `active_limit`) and among this second's creates
        (`secUsed` stays <= `rate_limit` while `sec` is this second; a later second starts again
        at the count). Returns (places taken, the quota that refused the rest or None, the second
        counted). One write when the item's second is the one guessed (`new_second_first`: the
        item is expected to hold an earlier second) and all fit; a wrong guess or a partial fit
        costs a failed write more (the failed write's ALL_OLD says what fits). An item whose second
        is later than `second` (another API container's clock is ahead) counts in that second. A
        batch create takes its jobs' places in this one write."""
        key = {"tenantId": tenant_id, "jobId": f"{QUOTA_PREFIX}{counter}"}
        attempt = "new" if new_second_first else "same"
        refused: str | None = None
        if count > rate_limit:  # more than a whole second's creates: the rest wait for a later second
            refused, count = "rate", rate_limit
        for _ in range(4):
            try:
                # DynamoDB conditions have no arithmetic: "used + n <= limit" is "used <= limit - n".
                if attempt == "same":
                    self._table.update_item(
                        Key=key, UpdateExpression="ADD used :n, secUsed :n",
                        ConditionExpression="(attribute_not_exists(used) OR used <= :amax) AND sec = :sec "
                                            "AND secUsed <= :rmax",
                        ExpressionAttributeValues={":n": count, ":amax": active_limit - count, ":sec": second,
                                                   ":rmax": rate_limit - count},
                        ReturnValuesOnConditionCheckFailure="ALL_OLD")
                else:
                    self._table.update_item(
                        Key=key, UpdateExpression="ADD used :n SET sec = :sec, secUsed = :n",
                        ConditionExpression="(attribute_not_exists(used) OR used <= :amax) AND "
                                            "(attribute_not_exists(sec) OR sec < :sec)",
                        ExpressionAttributeValues={":n": count, ":amax": active_limit - count, ":sec": second},
                        ReturnValuesOnConditionCheckFailure="ALL_OLD")
                return count, refused, second
            except ClientError as exc:
                lost = _condition_lost(exc, "quota")
                if not lost:
                    raise
            # The item as the condition saw it decides: the quota that refused, or the write that fits.
            current = lost.current or {}
            active_room = active_limit - int(current.get("used", 0))
            if active_room <= 0:
                return 0, "active", second
            if active_room < count:  # a partial fit: the places that remain, the rest refused
                refused, count = "active", active_room
            counted = current.get("sec")
            if counted is not None and int(counted) >= second:
                second = int(counted)  # this second, or a later one another container's clock started
                rate_room = rate_limit - int(current.get("secUsed", 0))
                if rate_room <= 0:
                    return 0, "rate", second
                if rate_room < count:
                    refused, count = "rate", rate_room
                attempt = "same"
            else:
                attempt = "new"  # the item holds an earlier second, or none: this create starts one
        return 0, "rate", second  # the item changed under four writes in a row: busy now, refused

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
                Key=_wire_key(job.tenant_id, job.job_id),
                UpdateExpression="SET #state = :completed, #shard = :shard, #ver = #ver + :one, updatedMs = :now"
                                 + (", expiresAt = :expires" if expires_at is not None else "")
                                 + (", completedReason = :reason" if reason is not None else "")
                                 + (", runCount = :runs" if run_count is not None else ""),
                ConditionExpression="#state = :active AND generation = :gen",
                ExpressionAttributeNames={"#state": "state", "#ver": "version", "#shard": STATE_SHARD_ATTRIBUTE},
                ExpressionAttributeValues=values_to_wire({
                    ":completed": JobState.COMPLETED.value,
                    ":shard": state_shard(job.tenant_id, JobState.COMPLETED.value, job.job_id),
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
                Key=_wire_key(job.tenant_id, job.job_id),
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
        return self._update_if(
            Key=job_key(job.tenant_id, job.job_id),
            # The occurrence ledger: the pause opens a span (at most MAX_PAUSED_SPANS + 1: the resume,
            # a whole put, keeps the newest MAX_PAUSED_SPANS).
            UpdateExpression="SET #state = :paused, #shard = :shard, pausedReason = :reason, "
                             "generation = generation + :one, #ver = #ver + :one, updatedMs = :now, "
                             "pausedSpans = list_append(if_not_exists(pausedSpans, :none), :span)",
            ConditionExpression="#state = :active AND consecutiveFailures >= :threshold",
            ExpressionAttributeNames={"#state": "state", "#ver": "version", "#shard": STATE_SHARD_ATTRIBUTE},
            ExpressionAttributeValues={":paused": JobState.PAUSED.value, ":active": JobState.ACTIVE.value,
                                       ":shard": state_shard(job.tenant_id, JobState.PAUSED.value, job.job_id),
                                       ":reason": reason, ":one": 1, ":now": now_ms, ":threshold": threshold,
                                       ":none": [], ":span": [[now_ms]]})

    def clear_failures(self, job: Job, now_ms: int) -> None:
        """A success ends the run of failures (a no-op if another end cleared it first)."""
        self._update_if(
            Key=job_key(job.tenant_id, job.job_id),
            UpdateExpression="SET consecutiveFailures = :zero, #ver = #ver + :one, updatedMs = :now "
                             "REMOVE lastDeadExecution",
            ConditionExpression="consecutiveFailures > :zero",
            ExpressionAttributeNames={"#ver": "version"},
            ExpressionAttributeValues={":zero": 0, ":one": 1, ":now": now_ms})
