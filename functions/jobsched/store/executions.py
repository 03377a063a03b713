"""The Executions table: every execution's record, its claim, lease and result. Its runs and steps
(store/runs.py), its DeadLetters index (store/dead_letters.py) and the reads of a job's history
(store/execution_history.py) are mixins of ExecutionsStore, each in a module of its own."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError

from jobsched.domain.executions import AttemptRecord, Dispatch, DispatchKind, Execution, ExecutionStatus
from jobsched.domain.json_text import compact
from jobsched.store.dead_letters import DeadLetters, dead_letter_partition
from jobsched.store.dynamo import _condition_lost, plain, raw_client
from jobsched.store.execution_history import ExecutionHistory
from jobsched.store.runs import RunsAndSteps
from jobsched.store.wire import item_from_wire, values_to_wire


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


class ExecutionsStore(RunsAndSteps, DeadLetters, ExecutionHistory):
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

    def get(self, job_id: str, execution_id: str) -> Execution | None:
        item = self._table.get_item(Key={"jobId": job_id, "executionId": execution_id}, ConsistentRead=True).get("Item")
        return Execution.from_item(plain(item)) if item else None
