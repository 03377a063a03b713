"""The Executions table's runs and their steps (a job with steps; domain/steps.py), and completion
hooks' calls (a mixin of ExecutionsStore, store/executions.py)."""
from __future__ import annotations

from typing import Any

from boto3.dynamodb.conditions import Key
from botocore.exceptions import ClientError

from jobsched.domain.executions import Execution, ExecutionStatus
from jobsched.store.dead_letters import dead_letter_partition
from jobsched.store.dynamo import _condition_lost, plain


class RunsAndSteps:
    """A run's record and its steps' (a mixin of ExecutionsStore: its table, _put_new, _transition
    and _expires_at)."""

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
