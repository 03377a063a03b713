"""SQS lanes: dispatches go out in batches of 10, the batches in parallel."""
from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Callable

from botocore.exceptions import ClientError

from jobsched.domain.clock import Clock
from jobsched.domain.dispatch_seal import DispatchSeal
from jobsched.domain.errors import WrongRegion
from jobsched.domain.executions import Dispatch
from jobsched.domain.jobs import Priority
from jobsched.domain.packs import Pack, packable, packs_of

SQS_BATCH = 10
# SendMessageBatch calls in flight at once (one bucket page of 500 timers is 50 batches).
SEND_PARALLELISM = 16
SQS_MAX_DELAY_SECONDS = 900
MAX_VISIBILITY_SECONDS = 12 * 3600  # SQS's limit for ChangeMessageVisibility


# Entries SendMessageBatch reports Failed through no fault of ours (SenderFault false: throttled,
# an internal error) are sent again with capped exponential backoff and full jitter, as the
# DynamoDB batches are (store/dynamo.py): at once, a throttled queue would refuse them again.
# An entry refused as our fault (SenderFault true) would be refused again: not retried.
SEND_RETRIES = 5
SEND_BACKOFF_BASE_S = 0.05
SEND_BACKOFF_CAP_S = 1.0


class SendFailed(RuntimeError):
    """Some messages could not be sent after the retries; the caller must not mark them handed off."""


@dataclass(frozen=True)
class Outgoing:
    priority: Priority
    dispatch: Dispatch
    visible_at_ms: int  # when the message should become visible; 0 for at once


# What ChangeMessageVisibility answers for a receipt that is no longer good (botocore's SQS model:
# ReceiptHandleIsInvalid, MessageNotInflight; an expired handle: InvalidParameterValue), bare or
# with the query protocol's "AWS.SimpleQueueService." prefix.
STALE_RECEIPT_CODES = frozenset({"ReceiptHandleIsInvalid", "MessageNotInflight", "InvalidParameterValue"})


def stale_receipt(error: ClientError) -> bool:
    code = error.response.get("Error", {}).get("Code", "")
    return code.removeprefix("AWS.SimpleQueueService.") in STALE_RECEIPT_CODES


def delay_seconds(visible_at_ms: int, now_ms: int) -> int:
    """Whole seconds, rounded down and capped at SQS's 15 minutes: the message becomes visible
    at most a second early and the worker waits out the remainder."""
    return max(0, min(SQS_MAX_DELAY_SECONDS, (visible_at_ms - now_ms) // 1000))


class LaneQueues:
    def __init__(self, sqs, lane_urls: dict[Priority, str], clock: Clock, dispatch_key: Callable[[], bytes],
                 parallelism: int = SEND_PARALLELISM, unit_random: Callable[[], float] = random.random,
                 dead_letter_urls: dict[Priority, str] | None = None) -> None:
        self._sqs = sqs
        self._dead_letter_urls = dead_letter_urls or {}
        self._random = unit_random
        self._urls = lane_urls
        self._clock = clock
        self._dispatch_key = dispatch_key
        # Packs (domain/packs.py): a FIRE's segment, which keys its pack; 0 when not set.
        self.segment_of: Callable[[str], int] = lambda job_id: 0
        # Regions (service/ownership.py): the epoch each message is sent under, by job id; None
        # in a single-region deployment (no epoch written).
        self.epoch_of: Callable[[str], int | None] | None = None
        self._seal: DispatchSeal | None = None
        self._seal_lock = threading.Lock()
        # Kept for the container's life (threads start at the first use, not here).
        self._pool = ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="send")

    @property
    def seal(self) -> DispatchSeal:
        """Read once per container (one GetItem at the first send or receive)."""
        with self._seal_lock:
            if self._seal is None:
                self._seal = DispatchSeal(self._dispatch_key())
            return self._seal

    def open(self, body: str) -> Dispatch:
        """The dispatch in a lane message; ForgedDispatch if the scheduler did not seal it."""
        return self.seal.open(body)

    def send(self, outgoing: list[Outgoing]) -> int:
        """Send every message or raise SendFailed. Returns the number of SendMessageBatch calls.
        The FIRE dispatches of one lane, segment, due second and visible second go out as packs
        (domain/packs.py); anything else as a message of one dispatch."""
        seal = self.seal  # once, before the batches fan out to threads
        batches: list[tuple[str, list[tuple[Pack, int]]]] = []
        for priority in Priority:
            messages: list[tuple[Pack, int]] = []
            groups: dict[tuple[int, int, int], list[Outgoing]] = {}
            for o in outgoing:
                if o.priority is not priority:
                    continue
                if packable(o.dispatch):
                    key = (self.segment_of(o.dispatch.job_id), o.dispatch.due_ms // 1000, o.visible_at_ms // 1000)
                    groups.setdefault(key, []).append(o)
                else:
                    messages.append((Pack(None, (o.dispatch,)), o.visible_at_ms))
            for (segment, _, _), group in groups.items():
                visible_at = min(o.visible_at_ms for o in group)
                messages.extend((pack, visible_at) for pack in packs_of([o.dispatch for o in group], segment,
                                                                         priority.value))
            for start in range(0, len(messages), SQS_BATCH):
                batches.append((self._urls[priority], messages[start:start + SQS_BATCH]))
        if len(batches) <= 1:
            for url, batch in batches:
                self._send_batch(url, batch, seal)
        else:
            list(self._pool.map(lambda b: self._send_batch(*b, seal), batches))
        return len(batches)

    def send_back(self, queue_arn: str, backs: list[tuple[Pack | Dispatch, int]]) -> int:
        """Hand-backs (handlers/worker.py): send these received records ((dispatch, visible-at
        instant) pairs) again, as new messages, to the lane they came from (`queue_arn`), each
        delayed until its instant (at most SQS's 15 minutes), the dispatch as it was (its epoch is
        not stamped again: a region's verdict on it is the one it was sent under). Raises
        SendFailed (or ClientError) if some were not accepted; returns the SendMessageBatch calls."""
        url = self._url_of(queue_arn)
        priority = next((p for p, u in self._urls.items() if u == url), None)
        if priority is None:
            raise SendFailed(f"{queue_arn} is not a lane")
        return self._send_to(url, [(_as_pack(message), at) for message, at in backs])

    def to_dead_letters(self, queue_arn: str, dispatches: list[Pack | Dispatch]) -> int:
        """A record handed back as new messages that failed MAX_RECEIVE_COUNT receives: into the
        lane's dead-letter queue, where SQS's redrive puts a message received that often (its count
        starts anew, as that of a message moved back from there does). Raises SendFailed when the
        lane has no dead-letter queue known here or the send failed."""
        url = self._url_of(queue_arn)
        priority = next((p for p, u in self._urls.items() if u == url), None)
        dead = self._dead_letter_urls.get(priority) if priority is not None else None
        if dead is None:
            raise SendFailed(f"no dead-letter queue known for {queue_arn}")
        return self._send_to(dead, [(_as_pack(d).with_receives(0), 0) for d in dispatches])

    def _send_to(self, url: str, outgoing: list[tuple[Pack, int]]) -> int:
        seal = self.seal
        for start in range(0, len(outgoing), SQS_BATCH):
            self._send_batch(url, outgoing[start:start + SQS_BATCH], seal, stamp=False)
        return -(-len(outgoing) // SQS_BATCH)

    def redeliver_after(self, queue_arn: str, receipt_handle: str, seconds: int) -> bool:
        """Make a received message visible again in `seconds` (0 to 12 hours) instead of after the
        lane's visibility timeout. False when the queue is not a lane or the receipt is no longer
        valid (expired, or the message no longer in flight: it then comes back after the visibility
        timeout, or was deleted). Any other error (a throttle, a denial) is raised."""
        url = self._url_of(queue_arn)
        if url is None:
            return False
        try:
            self._sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=receipt_handle,
                                                VisibilityTimeout=max(0, min(MAX_VISIBILITY_SECONDS, seconds)))
        except ClientError as error:
            if stale_receipt(error):
                return False
            raise
        return True

    def redeliver_many_after(self, queue_arn: str, receipts: list[tuple[str, str]], seconds: int) -> int:
        """Set the visibility of received messages ((message id, receipt handle) pairs) to
        `seconds`, ten a call (ChangeMessageVisibilityBatch, allowed by sqs:ChangeMessageVisibility).
        Returns how many were set; a message not set keeps the lane's visibility timeout."""
        url = self._url_of(queue_arn)
        if url is None:
            return 0
        done = 0
        for start in range(0, len(receipts), SQS_BATCH):
            entries = [{"Id": str(i), "ReceiptHandle": handle,
                        "VisibilityTimeout": max(0, min(MAX_VISIBILITY_SECONDS, seconds))}
                       for i, (_, handle) in enumerate(receipts[start:start + SQS_BATCH])]
            try:
                answer = self._sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)
            except ClientError:
                continue
            done += len(answer.get("Successful", []))
        return done

    def _stamped(self, dispatch: Dispatch) -> Dispatch:
        if self.epoch_of is None:
            return dispatch
        epoch = self.epoch_of(dispatch.job_id)
        if epoch is None:
            # Not held here now: its workers would refuse it (another region holds the segment) or
            # it would wait for a lease this region may never get back. The caller answers for it
            # (the API: 503, retried; a worker: its record comes back, and is then refused or run).
            raise WrongRegion(f"job {dispatch.job_id}'s segment is not held by this region now")
        return replace(dispatch, epoch=epoch)

    def _url_of(self, queue_arn: str) -> str | None:
        name = queue_arn.rsplit(":", 1)[-1]
        return next((u for u in self._urls.values() if u.rstrip("/").rsplit("/", 1)[-1] == name), None)

    def _send_batch(self, url: str, batch: list[tuple[Pack, int]], seal: DispatchSeal, stamp: bool = True) -> None:
        # The delay is computed at each try, as the entries go out, from each message's visible-at
        # instant: CPU work, writes and the retries' waits before a send must not make it late.
        entries = {
            str(i): ({"Id": str(i), "MessageBody": seal.seal_pack(
                Pack(pack.pack_id, tuple(self._stamped(d) for d in pack.entries)) if stamp else pack)}, at)
            for i, (pack, at) in enumerate(batch)
        }
        for retry in range(SEND_RETRIES + 1):
            if retry:
                self._clock.sleep(self._random() * min(SEND_BACKOFF_CAP_S, SEND_BACKOFF_BASE_S * 2 ** (retry - 1)))
            now = self._clock.now_ms()
            answer = self._sqs.send_message_batch(QueueUrl=url, Entries=[
                {**entry, "DelaySeconds": delay_seconds(at, now)} for entry, at in entries.values()])
            failed = answer.get("Failed", [])
            if any(f.get("SenderFault") for f in failed):
                raise SendFailed(f"messages refused by {url}: " + "; ".join(
                    f"{f.get('Code')}: {f.get('Message')}" for f in failed if f.get("SenderFault")))
            entries = {k: v for k, v in entries.items() if k in {f["Id"] for f in failed}}
            if not entries:
                return
        raise SendFailed(f"{len(entries)} messages not accepted by {url} after {SEND_RETRIES} retries")


def _as_pack(message: Pack | Dispatch) -> Pack:
    return message if isinstance(message, Pack) else Pack(None, (message,))
