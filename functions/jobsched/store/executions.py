"""The Executions table: every execution's record, its claim, lease, result and dead letter."""
from __future__ import annotations

import json
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError

from jobsched.domain.errors import FieldProblem, InvalidRequest
from jobsched.domain.executions import AttemptRecord, Dispatch, DispatchKind, Execution, ExecutionStatus
from jobsched.domain.json_text import compact
from jobsched.store.dynamo import GET_PARALLELISM, Page, _condition_lost, decode_cursor, encode_cursor, plain, raw_client
from jobsched.store.wire import item_from_wire, values_to_wire

DEAD_LETTERS_INDEX = "DeadLetters"


# The index's partition key is spread over this many values per tenant (by execution id), so a
# tenant whose endpoint is down cannot throttle the Executions table through one hot index
# partition (a GSI out of capacity throttles the table's writes). docs/architecture.md, "Tables".
DEAD_LETTER_SHARDS = 16


def dead_letter_partition(tenant_id: str, execution_id: str) -> str:
    """The DeadLetters index partition of a dead execution. Shard 0 keeps the unsharded value (the
    tenant id), so every dead letter written before sharding is read as shard 0."""
    shard = zlib.crc32(execution_id.encode()) % DEAD_LETTER_SHARDS
    return tenant_id if shard == 0 else f"{tenant_id}#{shard}"


def dead_letter_partitions(tenant_id: str) -> list[str]:
    return [tenant_id] + [f"{tenant_id}#{shard}" for shard in range(1, DEAD_LETTER_SHARDS)]


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
                    # A backfill runs its occurrence late on purpose: it counts for no lateness.
                    + (", backfill = :backfill" if dispatch.kind is DispatchKind.BACKFILL else "")
                    # Regions: the lease epoch the claim was made under (service/ownership.py).
                    + (", leaseEpoch = :epoch" if dispatch.epoch else "")
                    # A container task: the previous attempt's task is no longer this attempt's.
                    + " REMOVE retryAtMs, accepted, #task"
                ),
                ConditionExpression=(
                    "attribute_not_exists(executionId)"
                    " OR (#st IN (:failed, :pending) AND attempt = :prev)"
                    " OR (#st = :running AND leaseUntilMs < :now)"
                ),
                ExpressionAttributeNames={"#st": "status", "#task": "task",
                                          **({"#run": "run"} if dispatch.run is not None else {})},
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
                    **({":backfill": True} if dispatch.kind is DispatchKind.BACKFILL else {}),
                    **({":epoch": dispatch.epoch} if dispatch.epoch else {}),
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

    def release_claim(self, dispatch: Dispatch, attempt: int, token_hash: str,
                      taken_over: AttemptRecord | None = None) -> None:
        """The attempt's call started nothing (the target throttled it): the execution waits again
        (PENDING) with the attempt before this one, so the dispatch sent again later claims this
        attempt number anew. Fenced on this claim (its token), on no task recorded and no cancel
        asked meanwhile; a taken-over attempt's LOST record is kept. Raises ConditionLost."""
        records = [taken_over.to_item()] if taken_over is not None else []
        try:
            self._client.update_item(
                TableName=self._name,
                Key={"jobId": {"S": dispatch.job_id}, "executionId": {"S": dispatch.execution_id}},
                UpdateExpression=("SET #st = :pending, attempt = :prev, "
                                  "attempts = list_append(if_not_exists(attempts, :empty), :records) "
                                  "REMOVE leaseUntilMs, callbackTokenHash, attemptStartedMs"),
                ConditionExpression=("#st = :running AND attempt = :mine AND callbackTokenHash = :token "
                                     "AND attribute_not_exists(#task) AND attribute_not_exists(cancelRequested)"),
                ExpressionAttributeNames={"#st": "status", "#task": "task"},
                ExpressionAttributeValues=values_to_wire({
                    ":pending": ExecutionStatus.PENDING.value, ":running": ExecutionStatus.RUNNING.value,
                    ":prev": attempt - 1, ":mine": attempt, ":token": token_hash, ":empty": [],
                    ":records": records}),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            raise (_condition_lost(exc, "claim released") or exc) from exc

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
        task: dict | None = None,
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
        if task is not None:  # a container task's end: its exit code, reason and log link
            sets.append("#task = :task")
            names["#task"] = "task"
            values[":task"] = task
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

    def accept(self, dispatch: Dispatch, attempt: int, lease_until_ms: int, task: dict | None = None) -> Execution:
        """A long-running target took the work: the attempt stays RUNNING under a lease that its
        heartbeats extend (a container task: until its deadline, with the task it started).
        Fenced like every write of an attempt; returns the execution as it now is."""
        if task is None:
            return self._fenced_update(dispatch.job_id, dispatch.execution_id, attempt,
                                       "SET accepted = :yes, leaseUntilMs = :lease",
                                       {":yes": True, ":lease": lease_until_ms})
        return self._fenced_update(dispatch.job_id, dispatch.execution_id, attempt,
                                   "SET accepted = :yes, leaseUntilMs = :lease, #task = :task",
                                   {":yes": True, ":lease": lease_until_ms, ":task": task}, {"#task": "task"})

    def heartbeat(self, job_id: str, execution_id: str, attempt: int, progress: Any, lease_until_ms: int,
                  now_ms: int, ok: bool = False) -> Execution:
        """Extend the lease and keep the progress; returns the execution as it now is. `ok`: the
        first heartbeat that says so is the success an absence check looks for (in the same write)."""
        values: dict[str, Any] = {":lease": lease_until_ms, ":now": now_ms}
        expression = "SET leaseUntilMs = :lease, lastHeartbeatMs = :now"
        if ok:
            expression += ", reportedOkMs = if_not_exists(reportedOkMs, :now)"
        if progress is not None:
            expression += ", progress = :progress"
            values[":progress"] = compact(progress)
        return self._fenced_update(job_id, execution_id, attempt, expression, values)

    def request_cancel(self, job_id: str, execution_id: str, attempt: int) -> Execution:
        return self._fenced_update(job_id, execution_id, attempt, "SET cancelRequested = :yes", {":yes": True})

    def _fenced_update(self, job_id: str, execution_id: str, attempt: int, expression: str,
                       values: dict[str, Any], names: dict[str, str] | None = None) -> Execution:
        try:
            answer = self._table.update_item(
                Key={"jobId": job_id, "executionId": execution_id},
                UpdateExpression=expression,
                ConditionExpression="attempt = :mine AND #st = :running",
                ExpressionAttributeNames={"#st": "status", **(names or {})},
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

    # --- absence alerts (service/expectations.py) ------------------------------------------------
    def mark_expectation(self, job_id: str, execution_id: str, mark: str, now_ms: int) -> bool:
        """MISSING or LATE on an execution, once: False if it was marked before (or has no record)."""
        return self._transition(
            job_id, execution_id, "marked",
            UpdateExpression="SET expectation = :mark, expectationAtMs = :now",
            ConditionExpression="attribute_exists(executionId) AND attribute_not_exists(expectation)",
            ExpressionAttributeValues={":mark": mark, ":now": now_ms})

    def put_not_fired(self, tenant_id: str, job_id: str, execution_id: str, scheduled_ms: int, generation: int,
                      now_ms: int) -> bool:
        """An occurrence due with no record by its deadline: a PENDING record (attempt 0, so a late
        fire still claims it) marked NOT_FIRED, expiring with the retention. False if a record
        exists (it fired meanwhile, or another check wrote this one)."""
        return self._put_new({"jobId": job_id, "executionId": execution_id, "tenantId": tenant_id,
                              "scheduledMs": scheduled_ms, "status": ExecutionStatus.PENDING.value, "attempt": 0,
                              "generation": generation, "attempts": [], "expectation": "NOT_FIRED",
                              "expectationAtMs": now_ms, "expiresAt": self._expires_at(now_ms)})

    def mark_alerted(self, job_id: str, execution_id: str, now_ms: int) -> None:
        """Its alert went out: a redelivered check sends none again."""
        self._transition(job_id, execution_id, "no record", UpdateExpression="SET alertedMs = :now",
                         ConditionExpression="attribute_exists(executionId)",
                         ExpressionAttributeValues={":now": now_ms})

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
            "ProjectionExpression": "executionId, #st, scheduledMs, startedMs, skippedCount, expectation, backfill",
            "ExpressionAttributeNames": {"#st": "status"},
        }
        found: list = []
        while True:
            answer = self._table.query(**kwargs)
            for item in answer.get("Items", []):
                item = plain(item)
                scheduled = int(item.get("scheduledMs") or 0)
                late = int(item["startedMs"]) - scheduled if item.get("startedMs") is not None else None
                mark = item.get("expectation")
                found.append(ExecutionSummary(ExecutionStatus(item["status"]), scheduled, late,
                                              str(item["executionId"]).endswith(".manual"),
                                              int(item["skippedCount"]) if item.get("skippedCount") else None,
                                              missing=mark in ("MISSING", "NOT_FIRED"),
                                              not_fired=mark == "NOT_FIRED" and late is None,
                                              backfill=bool(item.get("backfill"))))
                if len(found) >= max_records:
                    return found, False
            if "LastEvaluatedKey" not in answer:
                return found, True
            kwargs["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    # The occurrence ledger reads these of each record (a Query is billed on the whole items read).
    _LEDGER_PROJECTION = ("executionId, jobId, tenantId, scheduledMs, #st, attempt, startedMs, finishedMs, "
                          "skipReason, skippedThroughMs, catchUp, expectation, reportedOkMs, #run, #err")

    def scheduled_between(self, job_id: str, from_ms: int, to_ms: int, max_records: int,
                          newest_first: bool = False) -> list[Execution]:
        """The job's executions of its schedule whose id instant lies in [from_ms, to_ms] (no
        triggers, steps or hooks), oldest first (or newest first), at most `max_records`.
        Eventually consistent, projected to what the occurrence ledger reads."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key("jobId").eq(job_id) & Key("executionId").between(
                f"{job_id}.{max(0, from_ms):013d}", f"{job_id}.{max(0, to_ms):013d}~"),
            "ScanIndexForward": not newest_first,
            "FilterExpression": Attr("runId").not_exists() & Attr("hookOf").not_exists(),
            "ProjectionExpression": self._LEDGER_PROJECTION,
            "ExpressionAttributeNames": {"#st": "status", "#run": "run", "#err": "error"},
            "Limit": min(max_records + 10, 1000),
        }
        found: list[Execution] = []
        while True:
            answer = self._table.query(**kwargs)
            for item in answer.get("Items", []):
                if str(item["executionId"]).endswith(".manual"):
                    continue  # a trigger is no occurrence of the schedule
                found.append(Execution.from_item(plain(item)))
                if len(found) >= max_records:
                    return found
            if "LastEvaluatedKey" not in answer:
                return found
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
