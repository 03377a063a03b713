"""The Segments table: each segment's watermarks, and the key that seals lane messages."""
from __future__ import annotations

import secrets

from botocore.exceptions import ClientError

from jobsched.domain.timers import CLAIM_SLOTS, Watermark, claim_slot
from jobsched.store.dynamo import _condition_lost, plain
# Not a segment: the segments table's item that holds the dispatch key.
DISPATCH_KEY_ITEM = -1


class WatermarksStore:
    def __init__(self, dynamodb, table_name: str, region_index: int = 0) -> None:
        self._table = dynamodb.Table(table_name)
        # Regions: each region seals its own lane messages (they never leave it) with a key of its
        # own. One key for all would be made by each region in its own replica at the first use,
        # and last-writer-wins would then replace all but one: a region's cached key would no
        # longer open its own messages. Region 0's item is the single-region one.
        self._key_item = DISPATCH_KEY_ITEM - region_index

    def get(self, segment: int) -> Watermark | None:
        item = self._table.get_item(Key={"segment": segment}, ConsistentRead=True).get("Item")
        if not item:
            return None
        item = plain(item)
        return Watermark(segment, item.get("claimedThrough"), item.get("doneThrough"), item.get("positionMinute"),
                         item.get("positionSk"), _claims(item))

    def claim(self, segment: int, minute: int, at_ms: int | None = None) -> int | None:
        """Raise claimedThrough to `minute` before its bucket is read, keeping `at_ms` (the tick's
        clock before this call) as the bucket's claim instant. A lost condition means another tick
        claimed it already: harmless, dispatch is idempotent; the instant kept by that claim is
        read then. Returns the bucket's claim instant (None when none is kept)."""
        if at_ms is None:
            self._raise(segment, "claimedThrough", minute)
            return None
        try:
            self._table.update_item(
                Key={"segment": segment},
                UpdateExpression="SET claimedThrough = :m, #slot = :at",
                ConditionExpression="attribute_not_exists(claimedThrough) OR claimedThrough < :m",
                ExpressionAttributeNames={"#slot": claim_slot(minute)},
                ExpressionAttributeValues={":m": minute, ":at": f"{minute}:{at_ms}"},
            )
            return at_ms
        except ClientError as exc:
            if not _condition_lost(exc, "claimedThrough"):
                raise
        watermark = self.get(segment)
        return watermark.claimed_at(minute) if watermark else None

    def rewind(self, segment: int, minute: int, epoch: int) -> None:
        """Regions: a region that took the segment under `epoch` hands it off again from bucket
        `minute` (never forwards: a segment behind stays where it is). Once per epoch: a replay of
        the take (or a slower replica's) never moves the watermarks back twice."""
        current = self.get(segment)
        done = minute if current is None or current.done_through is None else min(current.done_through, minute)
        try:
            self._table.update_item(
                Key={"segment": segment},
                UpdateExpression="SET claimedThrough = :m, doneThrough = :m, leaseEpoch = :e "
                                 "REMOVE positionMinute, positionSk",
                ConditionExpression="attribute_not_exists(leaseEpoch) OR leaseEpoch < :e",
                ExpressionAttributeValues={":m": done, ":e": epoch},
            )
        except ClientError as exc:
            if not _condition_lost(exc, "rewind"):
                raise

    def mark_done(self, segment: int, minute: int) -> None:
        self._raise(segment, "doneThrough", minute)

    def dispatch_key(self) -> bytes:
        """The key that seals lane messages (domain/dispatch_seal.py): made once, by whichever
        function needs it first (a conditional put, so all converge on one), then only read.
        It lives beside the watermarks: only the stack's own functions may read this table."""
        item = self._table.get_item(Key={"segment": self._key_item}, ConsistentRead=True).get("Item")
        if item is None:
            try:
                self._table.put_item(Item={"segment": self._key_item, "dispatchKey": secrets.token_hex(32)},
                                     ConditionExpression="attribute_not_exists(#seg)",
                                     ExpressionAttributeNames={"#seg": "segment"})
            except ClientError as exc:
                if not _condition_lost(exc, "dispatch key"):
                    raise
            item = self._table.get_item(Key={"segment": self._key_item}, ConsistentRead=True)["Item"]
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


def _claims(item: dict) -> dict[int, int]:
    """The claim instants kept in the item's slots (`claim<n>` = "<minute>:<ms>")."""
    claims: dict[int, int] = {}
    for n in range(CLAIM_SLOTS):
        value = item.get(f"claim{n}")
        if isinstance(value, str) and ":" in value:
            minute, at = value.split(":", 1)
            claims[int(minute)] = int(at)
    return claims
