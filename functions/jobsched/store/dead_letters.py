"""The Executions table's DeadLetters index: its shards, the tenant's list of dead letters, and the
redrive of a dead execution (a mixin of ExecutionsStore, store/executions.py)."""
from __future__ import annotations

import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ClientError

from jobsched.domain.errors import FieldProblem, InvalidRequest
from jobsched.domain.executions import Execution, ExecutionStatus
from jobsched.store.dynamo import GET_PARALLELISM, Page, _condition_lost, decode_cursor, encode_cursor, plain
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


class DeadLetters:
    """The dead letters of the Executions table (a mixin of ExecutionsStore: its table, client,
    table name and thread pool)."""

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
