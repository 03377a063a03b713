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


# Aligned sends (the tick's small hand-offs; docs/architecture.md, "Aligned sends"). SQS counts a
# delay in whole seconds from its receipt, so a message sent at an instant unrelated to its due
# second surfaces up to a second early (half a second on average) and the worker, holding its
# invocation, waits out the rest. Sent ALIGN_EARLY_MS before a whole number of seconds ahead of its
# instant, it surfaces that long before it: the margin covers the send's and Lambda's poll-to-invoke
# latency, so a message surfaces late only if those take longer (unaligned, every message whose
# remainder was shorter than them did). Messages whose sends fall within ALIGN_WINDOW_MS of each
# other share a batch (one SendMessageBatch; each surfaces at most that much earlier). At most
# ALIGN_MAX_MESSAGES, a quiet bucket's (one message every 2 s of a segment's minute): at that rate
# one warm worker environment takes a lane's messages one after another. Where the rate grows, new
# environments start cold (about 800 ms, `bench e2e`'s model) and a message that surfaced half a
# second early on average hid part of that; aligned, a fire would be late by all but 100 ms of it
# (`bench e2e --quick`, 20 a second from idle: p99 137 -> 550 ms with no such bound).
ALIGN_EARLY_MS = 100
ALIGN_WINDOW_MS = 100
ALIGN_MAX_MESSAGES = 30


def early_ms(visible_at_ms: int, sent_ms: int) -> int:
    """How long before its instant a message sent at `sent_ms` surfaces (delay_seconds), 0 if late."""
    delay = delay_seconds(visible_at_ms, sent_ms)
    return max(0, visible_at_ms - (sent_ms + delay * 1000))


def aligned_plan(messages: list[tuple[str, int]], now_ms: int, cost: float) -> list[tuple[int, list[int]]] | None:
    """`send_plan` when it is worth its wait, else None (send them as they come): None for more than
    ALIGN_MAX_MESSAGES, or when the worker time it saves (the messages' earliness as they would be
    sent now, less as planned) is less than `cost` times the wait (the waiting function's memory
    over the worker's)."""
    if not messages or len(messages) > ALIGN_MAX_MESSAGES:
        return None
    groups = send_plan(messages, now_ms)
    saved = sum(early_ms(messages[i][1], now_ms) - early_ms(messages[i][1], now_ms + start)
                for start, members in groups for i in members)
    return groups if saved >= cost * groups[-1][0] else None


def send_plan(messages: list[tuple[str, int]], now_ms: int) -> list[tuple[int, list[int]]]:
    """When to send each of these messages ((queue url, visible-at instant)), as (ms after `now_ms`,
    message indexes) groups in order, each a batch of one queue: a message due ALIGN_EARLY_MS or more
    ahead is sent ALIGN_EARLY_MS before a whole number of seconds ahead of its instant (within a
    second of now), one due sooner at once; a group holds messages whose sends fall within
    ALIGN_WINDOW_MS of its first."""
    waits = [(at - ALIGN_EARLY_MS - now_ms) % 1000 if at - now_ms >= ALIGN_EARLY_MS else 0 for _, at in messages]
    groups: list[tuple[int, list[int]]] = []
    open_groups: dict[str, tuple[int, list[int]]] = {}
    for i in sorted(range(len(messages)), key=lambda i: (waits[i], messages[i][0])):
        url = messages[i][0]
        group = open_groups.get(url)
        if group is None or len(group[1]) == SQS_BATCH or waits[i] - group[0] > ALIGN_WINDOW_MS:
            group = open_groups[url] = (waits[i], [])
            groups.append(group)
        group[1].append(i)
    return sorted(groups, key=lambda g: g[0])


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

    def send(self, outgoing: list[Outgoing], align_cost: float | None = None) -> int:
        """Send every message or raise SendFailed. Returns the number of SendMessageBatch calls.
        The FIRE dispatches of one lane, segment, due second and visible second go out as packs
        (domain/packs.py); anything else as a message of one dispatch. `align_cost` (the tick's
        small hand-offs): each message is sent just before a whole number of seconds ahead of its
        instant (`aligned_plan`) when the worker time that saves is worth `align_cost` times the wait."""
        seal = self.seal  # once, before the batches fan out to threads
        lanes: list[list[tuple[str, Pack, int]]] = []
        for priority in Priority:
            messages: list[tuple[str, Pack, int]] = []
            lanes.append(messages)
            groups: dict[tuple[int, int, int], list[Outgoing]] = {}
            for o in outgoing:
                if o.priority is not priority:
                    continue
                if packable(o.dispatch):
                    key = (self.segment_of(o.dispatch.job_id), o.dispatch.due_ms // 1000, o.visible_at_ms // 1000)
                    groups.setdefault(key, []).append(o)
                else:
                    messages.append((self._urls[priority], Pack(None, (o.dispatch,)), o.visible_at_ms))
            for (segment, _, _), group in groups.items():
                visible_at = min(o.visible_at_ms for o in group)
                messages.extend((self._urls[priority], pack, visible_at)
                                for pack in packs_of([o.dispatch for o in group], segment, priority.value))
        if align_cost is not None:
            now = self._clock.now_ms()
            every = [m for messages in lanes for m in messages]
            plan = aligned_plan([(url, at) for url, _, at in every], now, align_cost)
            if plan is not None:
                return self._send_aligned(every, plan, now, seal)
        batches = [(messages[start][0], [(pack, at) for _, pack, at in messages[start:start + SQS_BATCH]])
                   for messages in lanes for start in range(0, len(messages), SQS_BATCH)]
        if len(batches) <= 1:
            for url, batch in batches:
                self._send_batch(url, batch, seal)
        else:
            list(self._pool.map(lambda b: self._send_batch(*b, seal), batches))
        return len(batches)

    def _send_aligned(self, messages: list[tuple[str, Pack, int]], plan: list[tuple[int, list[int]]], now: int,
                      seal: DispatchSeal) -> int:
        """Each group of the plan sent at its instant (sealed before the first wait, so that only the
        send itself follows it), the groups' sends overlapping: the next wait starts once a thread
        has taken the group and read the clock for its delays. Raises what a batch raised."""
        sealed = [(messages[members[0]][0], self._entries([messages[i][1:] for i in members], seal))
                  for _, members in plan]
        futures = []
        for (wait, _), (url, entries) in zip(plan, sealed):
            lag_ms = now + wait - self._clock.now_ms()
            if lag_ms > 0:
                self._clock.sleep(lag_ms / 1000)
            taken = threading.Event()
            futures.append(self._pool.submit(self._send_entries, url, entries, taken))
            futures[-1].add_done_callback(lambda _, taken=taken: taken.set())  # also if it raised first
            taken.wait()
        for future in futures:
            future.result()
        return len(plan)

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
        self._send_entries(url, self._entries(batch, seal, stamp))

    def _entries(self, batch: list[tuple[Pack, int]], seal: DispatchSeal, stamp: bool = True) -> dict:
        return {
            str(i): ({"Id": str(i), "MessageBody": seal.seal_pack(
                Pack(pack.pack_id, tuple(self._stamped(d) for d in pack.entries)) if stamp else pack)}, at)
            for i, (pack, at) in enumerate(batch)
        }

    def _send_entries(self, url: str, entries: dict, taken: threading.Event | None = None) -> None:
        # The delay is computed at each try, as the entries go out, from each message's visible-at
        # instant: CPU work, writes and the retries' waits before a send must not make it late.
        for retry in range(SEND_RETRIES + 1):
            if retry:
                self._clock.sleep(self._random() * min(SEND_BACKOFF_CAP_S, SEND_BACKOFF_BASE_S * 2 ** (retry - 1)))
            now = self._clock.now_ms()
            if taken is not None:
                taken.set()  # the aligned sends' next wait may start (_send_aligned)
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
