"""Pack items in the Executions table: a pack's claim, its checkpoints and the outcomes the API reads
(docs/architecture.md, "Packs"). Partition `pack#<segment>#<due-second>`, sort key `<lane>#<digest>`."""
from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterable

from botocore.exceptions import ClientError

from jobsched.domain.errors import ConditionLost
from jobsched.domain.packs import FENCE_PREFIX, FENCE_TTL_S, PackKey, PackOutcome, PackStatus, fence_key, partition_of
from jobsched.store.dynamo import _condition_lost, raw_client
from jobsched.store.wire import item_from_wire, values_to_wire

# Reads of many pack partitions (a job's page of occurrences) go out this many at once.
READ_PARALLELISM = 8
# When several items of a partition hold one execution (it left a pack and was re-sent), the one
# that says where it ended wins: a recorded end over a hand-off.
_RANK = {PackStatus.SUCCEEDED: 3, PackStatus.STALE: 2, PackStatus.MOVED: 1, PackStatus.BACK: 0}


class PackLeased(Exception):
    """Another delivery of the pack holds it under a live lease."""

    def __init__(self, lease_until_ms: int | None, recorded: frozenset = frozenset()) -> None:
        super().__init__(f"pack leased until {lease_until_ms}")
        self.lease_until_ms = lease_until_ms
        self.recorded = recorded  # the execution ids its holder has recorded so far


@dataclass(frozen=True)
class PackClaim:
    attempt: int  # the pack's fencing token: every checkpoint is conditional on it
    outcomes: dict[str, PackOutcome]  # what earlier deliveries recorded


class PacksStore:
    def __init__(self, dynamodb, table_name: str, retention_days: int = 30, client=None) -> None:
        # The low-level client (wire format), as the other hot calls of the Executions table.
        self._client = client or raw_client(dynamodb)
        self._name = table_name
        self._retention_s = retention_days * 86_400
        self._pool: ThreadPoolExecutor | None = None

    def claim(self, key: PackKey, now_ms: int, lease_until_ms: int, tags: str = "") -> PackClaim:
        """One conditional UpdateItem: the pack is new, or its last holder's lease has ended. Sets
        the next attempt and the lease, and returns the outcomes recorded so far. PackLeased
        otherwise (a botocore retry of our own applied claim is recognised by its token). `tags`: the
        entries' tags (domain/packs.py entry_tag), written by the first claim, for the reads."""
        token = secrets.token_hex(8)
        try:
            answer = self._client.update_item(
                TableName=self._name, Key=_key(key),
                UpdateExpression=("SET attempt = if_not_exists(attempt, :zero) + :one, leaseUntilMs = :lease, "
                                  "claimToken = :token, outcomes = if_not_exists(outcomes, :empty), "
                                  "entries = if_not_exists(entries, :tags), expiresAt = :expires"),
                ConditionExpression="attribute_not_exists(attempt) OR leaseUntilMs < :now",
                ExpressionAttributeValues=values_to_wire({
                    ":zero": 0, ":one": 1, ":lease": lease_until_ms, ":token": token, ":empty": {}, ":now": now_ms,
                    ":tags": tags,
                    ":expires": key.due_second + self._retention_s}),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            lost = _condition_lost(exc, "pack claimed")
            if lost is None:
                raise
            current = lost.current or {}
            if current.get("claimToken") == token:
                return _claim_of(current)
            lease = current.get("leaseUntilMs")
            raise PackLeased(int(lease) if lease is not None else None,
                             frozenset((current.get("outcomes") or {}).keys())) from exc
        return _claim_of(item_from_wire(answer["Attributes"]))

    def checkpoint(self, key: PackKey, attempt: int, outcomes: dict[str, PackOutcome], release: bool = False) -> None:
        """Record these entries' outcomes, conditional on the pack's attempt still being ours:
        ConditionLost when a later delivery took the pack over (nothing is applied). `release`:
        the last checkpoint, every entry recorded: the lease ends now, so that a duplicate of the
        message is claimed at once (and finds nothing left to run) instead of waiting for it."""
        if not outcomes and not release:
            return
        names: dict = {}
        values: dict = {":mine": attempt}
        sets = ["leaseUntilMs = :ended"] if release else []
        if release:
            values[":ended"] = 0
        for i, (execution_id, outcome) in enumerate(outcomes.items()):
            names["#m"] = "outcomes"
            names[f"#e{i}"] = execution_id
            values[f":v{i}"] = outcome.to_item()
            sets.append(f"#m.#e{i} = :v{i}")
        try:
            self._client.update_item(
                TableName=self._name, Key=_key(key),
                UpdateExpression="SET " + ", ".join(sets),
                ConditionExpression="attempt = :mine",
                **({"ExpressionAttributeNames": names} if names else {}),
                ExpressionAttributeValues=values_to_wire(values),
            )
        except ClientError as exc:
            lost = _condition_lost(exc, "pack checkpoint")
            raise (lost or exc) from exc

    def outcomes(self, segment: int, due_second: int, consistent: bool = False) -> dict[str, PackOutcome]:
        """Every entry outcome recorded in one pack partition (a segment's packs of one second),
        the one that says where it ended when several items hold an execution."""
        return self.partition(segment, due_second, consistent)[0]

    def partition(self, segment: int, due_second: int,
                  consistent: bool = False) -> tuple[dict[str, PackOutcome], list[tuple[str, int, int]]]:
        """One pack partition: the outcomes recorded (as `outcomes`), and each pack's entry tags,
        attempt and lease end (an entry without an outcome is running under them)."""
        kwargs = {"TableName": self._name, "KeyConditionExpression": "jobId = :p",
                  "ExpressionAttributeValues": {":p": {"S": partition_of(segment, due_second)}},
                  "ProjectionExpression": "outcomes, entries, attempt, leaseUntilMs", "ConsistentRead": consistent}
        found: dict[str, PackOutcome] = {}
        packs: list[tuple[str, int, int]] = []
        while True:
            answer = self._client.query(**kwargs)
            for item in answer.get("Items", []):
                item = item_from_wire(item)
                if not item or "attempt" not in item:  # a fence (below), not a pack
                    continue
                packs.append((str(item.get("entries") or ""), int(item.get("attempt") or 0),
                              int(item.get("leaseUntilMs") or 0)))
                for execution_id, raw in (item.get("outcomes") or {}).items():
                    outcome = PackOutcome.from_item(raw)
                    if execution_id not in found or _RANK[outcome.status] > _RANK[found[execution_id].status]:
                        found[execution_id] = outcome
            if "LastEvaluatedKey" not in answer:
                return found, packs
            kwargs["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def fence(self, segment: int, due_second: int, job_id: str, generation: int) -> None:
        """Job snapshots: the job's entries of generations below `generation` in this partition's
        packs read their job again (it may have been paused, changed or deleted after their
        hand-off). Conditional: a fence only ever rises (a later change's lower fence, landing
        second, changes nothing)."""
        try:
            self._client.update_item(
                TableName=self._name,
                Key={"jobId": {"S": partition_of(segment, due_second)}, "executionId": {"S": fence_key(job_id)}},
                UpdateExpression="SET g = :g, expiresAt = :expires",
                ConditionExpression="attribute_not_exists(g) OR g < :g",
                ExpressionAttributeValues=values_to_wire({":g": generation,
                                                          ":expires": due_second + FENCE_TTL_S}))
        except ClientError as exc:
            if _condition_lost(exc, "fence") is None:
                raise

    def fences(self, segment: int, due_second: int, job_ids: Iterable[str] = ()) -> dict[str, int]:
        """A partition's fences, job id -> the generation below which entries read their job: one
        strongly consistent Query over the `fence#` sort keys, only those between the smallest and
        the largest of `job_ids` when given (a pack's own range: a bulk change's many fences in the
        same second are not read by every pack), billed on the fences read."""
        ids = sorted(job_ids)
        condition, values = ("jobId = :p AND executionId BETWEEN :lo AND :hi",
                             {":lo": {"S": fence_key(ids[0])}, ":hi": {"S": fence_key(ids[-1])}}) if ids \
            else ("jobId = :p AND begins_with(executionId, :f)", {":f": {"S": FENCE_PREFIX}})
        kwargs = {"TableName": self._name, "KeyConditionExpression": condition,
                  "ExpressionAttributeValues": {":p": {"S": partition_of(segment, due_second)}, **values},
                  "ConsistentRead": True}
        found: dict[str, int] = {}
        while True:
            answer = self._client.query(**kwargs)
            for item in answer.get("Items", []):
                found[item["executionId"]["S"][len(FENCE_PREFIX):]] = int(item["g"]["N"])
            if "LastEvaluatedKey" not in answer:
                return found
            kwargs["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def partitions(self, segment: int, due_seconds: Iterable[int]) -> tuple[dict, list]:
        """Several partitions of one segment (a job's occurrences), read at once."""
        seconds = sorted(set(due_seconds))
        found: dict[str, PackOutcome] = {}
        packs: list = []
        if self._pool is None and len(seconds) > 1:
            self._pool = ThreadPoolExecutor(max_workers=READ_PARALLELISM, thread_name_prefix="packs")
        parts = self._pool.map(lambda s: self.partition(segment, s), seconds) if len(seconds) > 1 \
            else (self.partition(segment, s) for s in seconds)
        for outcomes, items in parts:
            found.update(outcomes)
            packs += items
        return found, packs


def _key(key: PackKey) -> dict:
    return {"jobId": {"S": key.partition}, "executionId": {"S": key.sort_key}}


def _claim_of(item: dict) -> PackClaim:
    return PackClaim(int(item["attempt"]), {k: PackOutcome.from_item(v)
                                            for k, v in (item.get("outcomes") or {}).items()})


__all__ = ["ConditionLost", "PackClaim", "PackLeased", "PacksStore"]
