"""SQS (and SNS's and EventBridge's message limits): sizes of messages and batches, a queue's own
MaximumMessageSize, and the in-flight limit of a standard queue."""
from __future__ import annotations

import threading
from collections import defaultdict

from botocore.exceptions import ClientError

from jobsched.local.strict_aws.base import (ACCOUNT, EVENTS_MAX_ENTRIES, EVENTS_MAX_ENTRY_BYTES, REGION,
    SNS_MAX_BATCH_BYTES, SNS_MAX_BATCH_ENTRIES, SNS_MAX_MESSAGE_BYTES, SQS_MAX_BATCH_BYTES,
    SQS_MAX_BATCH_ENTRIES, SQS_MAX_MESSAGE_BYTES, _Call, _error, _internal, _raw_bytes)


# A queue attribute's value when the queue cannot be read (or does not say): SQS's defaults.
_QUEUE_FALLBACKS = {"VisibilityTimeout": 30, "MaximumMessageSize": SQS_MAX_MESSAGE_BYTES}


class InFlight:
    """Each queue's in-flight messages (message id → when it is visible again), found by their
    receipt handles. A message visible again, or deleted, is in flight no more."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, dict[str, int]] = defaultdict(dict)
        self._handles: dict[str, tuple[str, str]] = {}  # receipt handle → (queue, message id)
        self.defaults: dict[tuple[str, str], int] = {}  # (queue url, attribute) → value
        self.peak: dict[str, int] = defaultdict(int)

    def count(self, queue: str, now_ms: int) -> int:
        with self._lock:
            messages = self._queues[queue]
            for message_id in [m for m, until in messages.items() if until <= now_ms]:
                del messages[message_id]
            self._handles = {h: ref for h, ref in self._handles.items() if ref[1] in self._queues[ref[0]]} \
                if len(self._handles) > 2 * sum(len(q) for q in self._queues.values()) + 1000 else self._handles
            return len(messages)

    def received(self, queue: str, message_id: str, handle: str, visible_at_ms: int) -> None:
        with self._lock:
            self._queues[queue][message_id] = visible_at_ms
            self._handles[handle] = (queue, message_id)
            self.peak[queue] = max(self.peak[queue], len(self._queues[queue]))

    def changed(self, handle: str, visible_at_ms: int) -> None:
        """A visibility change (a deletion: visible at once, never again)."""
        with self._lock:
            ref = self._handles.get(handle)
            if ref is None or ref[1] not in self._queues[ref[0]]:
                return
            self._queues[ref[0]][ref[1]] = visible_at_ms


class Messaging:
    """SQS, SNS and EventBridge for the strict layer (a mixin of StrictAws): message and batch
    sizes, each queue's own MaximumMessageSize, and its in-flight messages."""

    def _check_sqs(self, client, call: _Call) -> None:
        p, op = call.params, call.operation
        if op == "ReceiveMessage":
            queue = _queue_arn(p.get("QueueUrl", ""))
            count = self.in_flight.count(queue, self.now_ms())
            if count >= self.limits.sqs_in_flight:
                wait = p.get("WaitTimeSeconds")
                if wait is None:
                    wait = self._queue_default(p["QueueUrl"], "ReceiveMessageWaitTimeSeconds")
                if int(wait):
                    call.answer_empty = True  # a long poll past the limit: no error, no message (_empty_receive)
                else:
                    raise _error(client, op, "OverLimit", f"The maximum number of in flight messages ({count}) "
                                 "is reached", 403)
        elif op == "SetQueueAttributes":  # the attributes read once (_queue_default) are read again
            for key in [k for k in list(self.in_flight.defaults) if k[0] == p.get("QueueUrl")]:
                self.in_flight.defaults.pop(key, None)
        if op in ("SendMessageBatch", "DeleteMessageBatch", "ChangeMessageVisibilityBatch"):
            entries = p.get("Entries", [])
            if len(entries) > SQS_MAX_BATCH_ENTRIES:
                raise _error(client, op, "TooManyEntriesInBatchRequest",
                             f"Maximum number of entries per request are {SQS_MAX_BATCH_ENTRIES}. You have sent "
                             f"{len(entries)}.", 400)
            if op == "SendMessageBatch":
                sizes = [_sqs_size(e) for e in entries]
                if any(s > SQS_MAX_MESSAGE_BYTES for s in sizes) or sum(sizes) > SQS_MAX_BATCH_BYTES:
                    raise _error(client, op, "BatchRequestTooLong",
                                 f"Batch requests cannot be longer than {SQS_MAX_BATCH_BYTES} bytes. You have sent "
                                 f"{sum(sizes)} bytes.", 400)
        if op in ("SendMessage", "SendMessageBatch"):
            # The queue's own MaximumMessageSize (1,024 B to 1 MiB, default 1 MiB), of each message;
            # a batch with one entry over it is refused whole, as the emulator does for its body.
            limit = min(SQS_MAX_MESSAGE_BYTES, self._queue_default(p.get("QueueUrl", ""), "MaximumMessageSize")
                        if self._queue_attributes else SQS_MAX_MESSAGE_BYTES)
            if any(_sqs_size(m) > limit for m in (p.get("Entries", []) if op == "SendMessageBatch" else [p])):
                raise _error(client, op, "InvalidParameterValue",
                             f"One or more parameters are invalid. Reason: Message must be shorter than "
                             f"{limit} bytes.", 400)

    def _bill_sqs(self, client, call: _Call, parsed: dict, ok: bool) -> None:
        """The queue's in-flight messages, as SQS counts them: received, until deleted or visible
        again (the receive's visibility timeout or the queue's, changed by ChangeMessageVisibility)."""
        p, op, now = call.params, call.operation, self.now_ms()
        if not ok or op not in ("ReceiveMessage", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch",
                                "DeleteMessage", "DeleteMessageBatch"):
            return
        queue = _queue_arn(p.get("QueueUrl", ""))
        if op == "ReceiveMessage":
            messages = parsed.get("Messages") or []
            if messages:
                seconds = p.get("VisibilityTimeout")
                if seconds is None:
                    seconds = self._queue_default(p["QueueUrl"], "VisibilityTimeout")
                for message in messages:
                    self.in_flight.received(queue, message["MessageId"], message["ReceiptHandle"],
                                            now + int(seconds) * 1000)
            return
        if op == "ChangeMessageVisibility":
            entries, done = [p], None
        elif op == "DeleteMessage":
            entries, done = [p], None
        else:
            entries, done = p.get("Entries", []), {e.get("Id") for e in parsed.get("Successful") or []}
        for entry in entries:
            if done is not None and entry.get("Id") not in done:
                continue
            seconds = 0 if op.startswith("Delete") else int(entry.get("VisibilityTimeout") or 0)
            self.in_flight.changed(entry.get("ReceiptHandle", ""), now + seconds * 1000)

    def _queue_default(self, url: str, attribute: str) -> int:
        """A queue attribute the checks need (VisibilityTimeout, ReceiveMessageWaitTimeSeconds,
        MaximumMessageSize), read once per queue (again after a SetQueueAttributes of it) without a
        check of its own."""
        key = (url, attribute)
        if key not in self.in_flight.defaults:
            token = _internal.set(True)
            try:
                if self._raw_sqs is None:  # a client of its own: the caller's counts no call of the layer's
                    import boto3

                    self._raw_sqs = boto3.session.Session().client("sqs", region_name=self.region)
                answer = self._raw_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[attribute])
                self.in_flight.defaults[key] = int(answer.get("Attributes", {}).get(attribute) or 0)
                if attribute not in answer.get("Attributes", {}):
                    self.in_flight.defaults[key] = _QUEUE_FALLBACKS.get(attribute, 0)
            except ClientError:
                self.in_flight.defaults[key] = _QUEUE_FALLBACKS.get(attribute, 0)
            finally:
                _internal.reset(token)
        return self.in_flight.defaults[key]

    def _check_sns(self, client, call: _Call) -> None:
        p, op = call.params, call.operation
        if op == "Publish" and _sns_size(p) > SNS_MAX_MESSAGE_BYTES:
            raise _error(client, op, "InvalidParameter",
                         f"Invalid parameter: Message too long ({_sns_size(p)} bytes > {SNS_MAX_MESSAGE_BYTES})", 400)
        if op == "PublishBatch":
            entries = p.get("PublishBatchRequestEntries", [])
            if len(entries) > SNS_MAX_BATCH_ENTRIES:
                raise _error(client, op, "TooManyEntriesInBatchRequest",
                             f"The batch request contains more entries than permissible ({len(entries)})", 400)
            if sum(_sns_size(e) for e in entries) > SNS_MAX_BATCH_BYTES:
                raise _error(client, op, "BatchRequestTooLong",
                             f"The length of all the messages put together is more than the limit "
                             f"({SNS_MAX_BATCH_BYTES} bytes)", 400)

    def _check_events(self, client, call: _Call) -> None:
        if call.operation != "PutEvents":
            return
        entries = call.params.get("Entries", [])
        if len(entries) > EVENTS_MAX_ENTRIES:
            raise _error(client, call.operation, "ValidationException",
                         f"1 validation error detected: Value at 'entries' failed to satisfy constraint: Member "
                         f"must have length less than or equal to {EVENTS_MAX_ENTRIES}", 400)
        # Each entry's size (eb-putevent-size), and the request's entries together: "you can batch
        # multiple event entries into one request ... the total entry size must be less than 256KB".
        sizes = [(14 if entry.get("Time") else 0) + sum(len(str(entry.get(k) or "").encode("utf-8"))
                                                       for k in ("Source", "DetailType", "Detail"))
                 + sum(len(r.encode("utf-8")) for r in entry.get("Resources") or []) for entry in entries]
        for size in (*sizes, sum(sizes)):
            if size > EVENTS_MAX_ENTRY_BYTES:
                raise _error(client, call.operation, "ValidationException",
                             f"Total size of the entries in the request is over the limit ({size} bytes > "
                             f"{EVENTS_MAX_ENTRY_BYTES}).", 400)


def _queue_arn(url: str) -> str:
    parts = url.rstrip("/").split("/")
    account = parts[-2] if len(parts) >= 2 and parts[-2].isdigit() else ACCOUNT
    return f"arn:aws:sqs:{REGION}:{account}:{parts[-1]}"


def _attributes_size(attributes: dict | None) -> int:
    total = 0
    for name, value in (attributes or {}).items():
        total += len(name.encode()) + len(value.get("DataType", "").encode())
        total += len((value.get("StringValue") or "").encode()) + len(_raw_bytes(value["BinaryValue"])
                                                                      if "BinaryValue" in value else b"")
    return total


def _sqs_size(params: dict) -> int:
    return len(params.get("MessageBody", "").encode("utf-8")) + _attributes_size(params.get("MessageAttributes"))


def _sns_size(params: dict) -> int:
    return len(params.get("Message", "").encode("utf-8")) + _attributes_size(params.get("MessageAttributes"))
