"""Flow control's items (service/flow.py, domain/flow.py). They live in the Jobs table under
partition keys of their own, never in the tenant's partition: a key's load is spread over its
shards' partition keys instead of adding to the tenant's jobs.

- Slots: partition "flow#<tenant>#<key>#<shard>" (tenant and key percent-encoded, so no tenant or
  key can spell another's), sort "~slots": a map execution id → the lease of the attempt holding
  the slot, at most SLOTS_PER_ITEM entries.
- Lane shares (service/lane_shares.py) use the same slot maps under partition
  "lanetenant#<lane>#<tenant>#<shard>" and "lanehost#<lane>#<host>#<shard>": a map of worker
  container id → the lease of its longest attempt in flight.
- Rate: partition "flowrate#<tenant>#<key>#<second>#<shard>", sort "~rate": a counter `used`,
  expiring by TTL."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

from botocore.exceptions import ClientError

from jobsched.store.dynamo import _condition_lost
SLOTS_SORT_KEY = "~slots"
RATE_SORT_KEY = "~rate"


# Slot-map spaces: the prefix of their partition keys. The parts after it are percent-encoded, so
# no space, tenant, key or host spells another's; the sort key ("~slots") is never a job id.
FLOW_SPACE = "flow"
LANE_TENANT_SPACE = "lanetenant"
LANE_HOST_SPACE = "lanehost"


def slots_key(tenant_id: str, key: str, shard: int, space: str = FLOW_SPACE) -> dict[str, str]:
    return {"tenantId": f"{space}#{quote(tenant_id, safe='')}#{quote(key, safe='')}#{shard}", "jobId": SLOTS_SORT_KEY}


def rate_key(tenant_id: str, key: str, second: int, shard: int) -> dict[str, str]:
    return {"tenantId": f"flowrate#{quote(tenant_id, safe='')}#{quote(key, safe='')}#{second}#{shard}",
            "jobId": RATE_SORT_KEY}


class SlotTaken:
    """The answer of take_slot: "new", "held" (this execution holds it already) or "full", and
    for "full" the slots as DynamoDB returned them with the failed condition (no read needed to
    find the expired ones)."""

    def __init__(self, outcome: str, held: dict[str, int] | None = None) -> None:
        self.outcome = outcome
        self.held = held or {}


class FlowStore:
    def __init__(self, dynamodb, table_name: str) -> None:
        self._table = dynamodb.Table(table_name)

    def take_slot(self, tenant_id: str, key: str, shard: int, execution_id: str, limit: int,
                  lease_until_ms: int, space: str = FLOW_SPACE) -> SlotTaken:
        """A slot in shard `shard` (at most `limit` held there). The shard's first taker makes its
        map; one that loses that race to another first taker takes its slot in the map just made
        (answering "full" there held records back behind a map with room: the local lane's crowd of
        one-record batches of one tenant lost 6 of 20 so)."""
        item_key = slots_key(tenant_id, key, shard, space)
        for _ in range(2):
            try:
                answer = self._table.update_item(
                    Key=item_key,
                    UpdateExpression="SET slots.#ex = if_not_exists(slots.#ex, :lease)",
                    ConditionExpression="attribute_exists(slots) AND (attribute_exists(slots.#ex) OR size(slots) < :limit)",
                    ExpressionAttributeNames={"#ex": execution_id},
                    ExpressionAttributeValues={":lease": lease_until_ms, ":limit": limit},
                    # Returned values cost no write units: the map (at most SLOTS_PER_ITEM entries)
                    # tells whether this execution held a slot already, or, when every slot is held,
                    # which leases have expired, without a read.
                    ReturnValues="ALL_OLD", ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                held = (answer.get("Attributes") or {}).get("slots") or {}
                return SlotTaken("held" if execution_id in held else "new")
            except ClientError as exc:
                lost = _condition_lost(exc, "all slots held")
                if lost is None:
                    raise
                current = lost.current or {}
            if "slots" in current:
                return SlotTaken("full", {k: int(v) for k, v in current["slots"].items()})
            # The first slot of this shard: make the map (conditional, so a racing first writer wins).
            try:
                self._table.update_item(
                    Key=item_key, UpdateExpression="SET slots = :one", ConditionExpression="attribute_not_exists(slots)",
                    ExpressionAttributeValues={":one": {execution_id: lease_until_ms}},
                )
                return SlotTaken("new")
            except ClientError as exc:
                if not _condition_lost(exc, "slots exist"):
                    raise
                # A racer made the map first: take a slot in it (the loop's second pass).
        return SlotTaken("full")  # made and filled between our writes: the caller tries again later

    def held(self, tenant_id: str, key: str, shard: int, space: str = FLOW_SPACE) -> dict[str, int]:
        """The slots of one shard (tests and the bench; the worker never reads them)."""
        item = self._table.get_item(Key=slots_key(tenant_id, key, shard, space), ConsistentRead=True).get("Item") or {}
        return {k: int(v) for k, v in (item.get("slots") or {}).items()}

    def give_back(self, tenant_id: str, key: str, shard: int, execution_id: str, if_lease: int | None = None,
                  space: str = FLOW_SPACE) -> bool:
        """Free the slot (only if it still has the lease `if_lease`, when given: an expired slot
        is reclaimed by nobody else meanwhile)."""
        condition = "attribute_exists(slots.#ex)" + (" AND slots.#ex = :lease" if if_lease is not None else "")
        try:
            self._table.update_item(
                Key=slots_key(tenant_id, key, shard, space), UpdateExpression="REMOVE slots.#ex",
                ConditionExpression=condition, ExpressionAttributeNames={"#ex": execution_id},
                **({"ExpressionAttributeValues": {":lease": if_lease}} if if_lease is not None else {}),
            )
            return True
        except ClientError as exc:
            if _condition_lost(exc, "not held"):
                return False
            raise

    def extend(self, tenant_id: str, key: str, shard: int, execution_id: str, lease_until_ms: int,
               space: str = FLOW_SPACE) -> None:
        """A long-running attempt keeps its slot while it heartbeats."""
        try:
            self._table.update_item(
                Key=slots_key(tenant_id, key, shard, space), UpdateExpression="SET slots.#ex = :lease",
                ConditionExpression="attribute_exists(slots.#ex)",
                ExpressionAttributeNames={"#ex": execution_id}, ExpressionAttributeValues={":lease": lease_until_ms})
        except ClientError as exc:
            if not _condition_lost(exc, "not held"):
                raise

    def take_rate(self, tenant_id: str, key: str, second: int, shard: int, limit: int, expires_at: int) -> bool:
        """One start in `second` on counter shard `shard`, if it stays within `limit`."""
        try:
            self._table.update_item(
                Key=rate_key(tenant_id, key, second, shard), UpdateExpression="ADD used :one SET expiresAt = :expires",
                ConditionExpression="attribute_not_exists(used) OR used < :limit",
                ExpressionAttributeValues={":one": 1, ":limit": limit, ":expires": expires_at})
            return True
        except ClientError as exc:
            if _condition_lost(exc, "rate"):
                return False
            raise

    def rate_used(self, tenant_id: str, key: str, second: int, shard: int) -> int:
        """Tests and the bench only."""
        item: dict[str, Any] = self._table.get_item(Key=rate_key(tenant_id, key, second, shard),
                                                    ConsistentRead=True).get("Item") or {}
        return int(item.get("used", 0))
