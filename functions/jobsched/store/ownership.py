"""The ownership table (issue 25; domain/ownership.py): one item per global segment, the lease
that says which region may hand off and claim its work, and one heartbeat item per region.

In AWS it is a global table with multi-Region strong consistency (MRSC: three Regions, a
conditional write is checked against every replica, a read with ConsistentRead sees every write
that succeeded anywhere). MRSC supports neither TTL nor transactions: nothing here relies on them.

Item (largest about 120 bytes, 1 WU a write, 0.5 RU a strongly consistent read):
    segment (N, partition key; heartbeats: -1000 - region's number), region (S), epoch (N),
    endsMs (N), renewedMs (N).
Rates: a lease item is renewed once a minute by its segment's tick (0.017 WU/s a key); all of
them are read by each worker container at most every LEASE_CACHE_MS (a Scan of a few hundred
bytes, 0.5 to 2 RU), and by each tick run (a GetItem)."""
from __future__ import annotations

import logging
import threading
import time

from botocore.exceptions import ClientError, ConnectionError as BotoConnectionError, HTTPClientError

from jobsched.domain.ownership import Lease, heartbeat_key
from jobsched.store.dynamo import _condition_lost, plain


# MRSC answers ReplicatedWriteConflictException when another Region is writing the same item at
# once; AWS marks it safe to retry (DDB/multi-region-strong-consistency). botocore does not retry
# it, nor (past its own attempts) a throttle: a tick that gave up on them would let its lease lapse.
RETRIED_CODES = frozenset({"ReplicatedWriteConflictException", "ThrottlingException",
                           "ProvisionedThroughputExceededException", "RequestLimitExceeded"})
ATTEMPTS = 3
# Failover between the table's replicas (DDB/V2globaltables_HowItWorks, "Availability": a Region's
# replica isolated or degraded, requests go to another replica of the same table). AWS does not
# say which error an isolated MRSC replica answers, so every failure of the call in this replica
# (after botocore's own attempts and _Retrying's) moves it to the next one: no connection (refused,
# DNS, connect or read timeout, connection closed: botocore's ConnectionError and HTTPClientError),
# a server-side error (HTTP 5xx), a throttle or a ReplicatedWriteConflictException that outlasted
# its retries, any error code not below. That is safe because every write here is conditional on
# the lease's epoch, end or heartbeat (_Failover). Not: an answer about the request itself, which
# another replica would give the same.
REQUEST_LEVEL_CODES = frozenset({"ConditionalCheckFailedException", "ValidationException", "AccessDeniedException",
                                 "AccessDenied", "UnrecognizedClientException", "ItemCollectionSizeLimitExceededException"})
# A replica that failed is passed over (the next one is called first) for this long, then tried
# first again: one slow failure a minute per process, not one per call.
FAILBACK_S = 60.0
logger = logging.getLogger(__name__)


def region_level(exc: BaseException) -> bool:
    """An error that may be the replica's region failing, not an answer about the request (see
    REQUEST_LEVEL_CODES): the call is made again in the next replica."""
    if isinstance(exc, BotoConnectionError | HTTPClientError):
        return True
    if isinstance(exc, ClientError):
        return exc.response.get("Error", {}).get("Code") not in REQUEST_LEVEL_CODES
    return False


def _code_of(exc: BaseException) -> str | None:
    """The AWS error code (logged: the first real isolation shows what a replica answers)."""
    return exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else None


class _Retrying:
    """The table, each call tried up to ATTEMPTS times on RETRIED_CODES (50 ms, then 100 ms apart)."""

    def __init__(self, table, sleep=time.sleep) -> None:
        self._table = table
        self._sleep = sleep

    def __getattr__(self, name):
        call = getattr(self._table, name)

        def retrying(**kwargs):
            for attempt in range(ATTEMPTS):
                try:
                    return call(**kwargs)
                except ClientError as exc:
                    if exc.response.get("Error", {}).get("Code") not in RETRIED_CODES or attempt == ATTEMPTS - 1:
                        raise
                    self._sleep(0.05 * 2 ** attempt)
        return retrying


class _Failover:
    """The table through each replica's regional endpoint, in order (the nearest first): a call that
    fails for its region (`region_level`) is made again in the next replica. Every write here is
    conditional on the lease's epoch, so a write made again after an ambiguous failure (a read
    timeout after DynamoDB applied it) either applies the same change again (renew, release, beat)
    or fails its condition (a take: the lease then looks taken by someone, this region acts on
    nothing, and its next tick finds the lease its own)."""

    def __init__(self, tables: list[tuple[str, _Retrying]], monotonic=time.monotonic) -> None:
        self._tables = tables
        self._monotonic = monotonic
        self._passed_over: dict[int, float] = {}  # replica's place -> until when
        self._lock = threading.Lock()

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(region for region, _ in self._tables)

    def __getattr__(self, name):
        def failing_over(**kwargs):
            now = self._monotonic()
            with self._lock:
                order = sorted(range(len(self._tables)), key=lambda i: (self._passed_over.get(i, 0.0) > now, i))
            for place, i in enumerate(order):
                region, table = self._tables[i]
                try:
                    answer = getattr(table, name)(**kwargs)
                except Exception as exc:
                    if place == len(order) - 1 or not region_level(exc):
                        raise
                    with self._lock:
                        self._passed_over[i] = now + FAILBACK_S
                    logger.warning("the ownership table's replica failed; calling the next one",
                                   extra={"replica": region, "next": self._tables[order[place + 1]][0],
                                          "error": type(exc).__name__, "code": _code_of(exc)})
                    continue
                if i in self._passed_over:
                    with self._lock:
                        self._passed_over.pop(i, None)
                return answer
        return failing_over


class OwnershipStore:
    def __init__(self, dynamodb, table_name: str, sleep=time.sleep, fallbacks=(), monotonic=time.monotonic) -> None:
        """`dynamodb`: the resource of the replica called first; `fallbacks`: the other replicas'
        resources, in the order they are called when the ones before fail (_Failover)."""
        self._table = _Failover([(_region_of(d), _Retrying(d.Table(table_name), sleep)) for d in (dynamodb, *fallbacks)],
                                monotonic)

    def get(self, segment: int) -> Lease | None:
        item = self._table.get_item(Key={"segment": segment}, ConsistentRead=True).get("Item")
        return _lease(item) if item else None

    def all(self) -> tuple[dict[int, Lease], dict[int, int]]:
        """Every lease (by segment) and every region's last heartbeat (by region number): one
        strongly consistent scan of a table of (regions x segments + regions) small items."""
        leases: dict[int, Lease] = {}
        beats: dict[int, int] = {}
        kwargs: dict = {"ConsistentRead": True}
        while True:
            page = self._table.scan(**kwargs)
            for raw in page.get("Items", []):
                item = plain(raw)
                segment = int(item["segment"])
                if segment <= heartbeat_key(0):
                    beats[heartbeat_key(0) - segment] = int(item["renewedMs"])
                else:
                    leases[segment] = _lease(raw)
            if "LastEvaluatedKey" not in page:
                return leases, beats
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def beat(self, region_index: int, now_ms: int) -> None:
        """This region is up and reaches the store (only forwards: a late write never moves it back)."""
        try:
            self._table.update_item(Key={"segment": heartbeat_key(region_index)},
                                    UpdateExpression="SET renewedMs = :now",
                                    ConditionExpression="attribute_not_exists(renewedMs) OR renewedMs < :now",
                                    ExpressionAttributeValues={":now": now_ms})
        except ClientError as exc:
            if not _condition_lost(exc, "heartbeat"):
                raise

    def renew(self, lease: Lease, now_ms: int, lease_ms: int) -> Lease | None:
        """Extend a lease this region holds; None when it no longer holds it (taken meanwhile)."""
        renewed = Lease(lease.segment, lease.region, lease.epoch, now_ms + lease_ms, now_ms)
        try:
            self._table.update_item(
                Key={"segment": lease.segment},
                UpdateExpression="SET endsMs = :ends, renewedMs = :now",
                # Region and epoch suffice: a take needs the epoch unchanged and the lease ended by
                # more than the clock bound, and MRSC orders the two writes.
                ConditionExpression="#region = :me AND #epoch = :epoch",
                ExpressionAttributeNames={"#region": "region", "#epoch": "epoch"},
                ExpressionAttributeValues={":me": lease.region, ":epoch": lease.epoch, ":ends": renewed.ends_ms,
                                           ":now": now_ms})
        except ClientError as exc:
            if _condition_lost(exc, "lease renewal") is None:
                raise
            return None
        return renewed

    def take(self, segment: int, previous: Lease | None, region: str, now_ms: int, lease_ms: int,
             clock_bound_ms: int, rewind_from_ms: int | None = None) -> Lease | None:
        """Take the segment with the next epoch: only if nobody holds it (no lease yet), or the
        lease read is still the current one and has ended by more than the clock bound. None when
        another region won the race."""
        epoch = previous.epoch + 1 if previous else 1
        taken = Lease(segment, region, epoch, now_ms + lease_ms, now_ms, now_ms, rewind_from_ms)
        if previous is None:
            condition, values = "attribute_not_exists(#seg)", {}
        else:
            condition = "#epoch = :old AND endsMs <= :cutoff"
            values = {":old": previous.epoch, ":cutoff": now_ms - clock_bound_ms}
        try:
            self._table.put_item(
                Item={"segment": segment, "region": region, "epoch": epoch, "endsMs": taken.ends_ms,
                      "renewedMs": now_ms, "takenMs": now_ms,
                      "rewindFromMs": rewind_from_ms if rewind_from_ms is not None else now_ms},
                ConditionExpression=condition,
                ExpressionAttributeNames={"#seg": "segment"} if previous is None else {"#epoch": "epoch"},
                **({"ExpressionAttributeValues": values} if values else {}))
        except ClientError as exc:
            if _condition_lost(exc, "lease take") is None:
                raise
            return None
        return taken

    def release(self, lease: Lease, ends_ms: int) -> bool:
        """Give the segment up (its home region is back): the lease ends at `ends_ms` (never later
        than it would have; service/ownership.py picks it), and its next taker may start the clock
        bound after that."""
        try:
            self._table.update_item(
                Key={"segment": lease.segment},
                UpdateExpression="SET endsMs = :ends",
                ConditionExpression="#region = :me AND #epoch = :epoch",
                ExpressionAttributeNames={"#region": "region", "#epoch": "epoch"},
                ExpressionAttributeValues={":me": lease.region, ":epoch": lease.epoch, ":ends": ends_ms})
        except ClientError as exc:
            if _condition_lost(exc, "lease release") is None:
                raise
            return False
        return True


def _lease(raw: dict) -> Lease:
    item = plain(raw)
    return Lease(int(item["segment"]), str(item["region"]), int(item["epoch"]), int(item["endsMs"]),
                 int(item["renewedMs"]), int(item["takenMs"]) if "takenMs" in item else None,
                 int(item["rewindFromMs"]) if "rewindFromMs" in item else None)


def _region_of(dynamodb) -> str:
    try:
        return dynamodb.meta.client.meta.region_name
    except AttributeError:  # a test's stand-in
        return ""
