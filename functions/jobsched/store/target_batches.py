"""Batched target calls: a pack's entries due at the same instant for the same queue, topic or event
bus of one tenant go out in one SendMessageBatch, PublishBatch or PutEvents of up to ten
(docs/architecture.md, "Batched target calls"). Each entry is the message or event a single call
would send (the same body, attributes, FIFO group and deduplication id, trace) and gets its own
outcome from the batch's answer; a refusal of the whole request that one entry may have caused (a
size, a bad parameter) is retried entry by entry, so one tenant's oversized message never fails the
others of its batch. What a whole-request refusal says of the target (access denied, a KMS key, a
missing queue) is each entry's outcome, as each single call would have got it."""
from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from jobsched.domain.executions import AttemptOutcome, Dispatch
from jobsched.domain.jobs import Job, TargetType
from jobsched.domain.json_text import compact
from jobsched.domain.target_envelopes import EVENTBRIDGE_MAX_ENTRY_BYTES, SNS_MAX_MESSAGE_BYTES, sns_message_bytes
from jobsched.domain.tenant_tags import is_taggable
from jobsched.store.targets import (EXPIRED_CODES, AwsTargetInvoker, TargetSessionUnavailable, _Expired, _failed,
                                    _ok, _too_large, _unreached, event_entry, message_params)

# Entries per request: SQS SendMessageBatch, SNS PublishBatch and EventBridge PutEvents take ten.
MAX_BATCH_ENTRIES = 10
# A request's entries together (shared/AWS-LIMITS.md): SendMessageBatch 1 MiB, PublishBatch 256 KiB;
# PutEvents "less than 256KB" for the entries batched in one request (its API reference), ten at most.
MAX_BATCH_BYTES = {TargetType.SQS: 1_048_576, TargetType.SNS: 262_144, TargetType.EVENTBRIDGE: 262_143}
# Whole-request refusals one entry may cause: the entries are then sent one by one.
ENTRY_CAUSED = frozenset({"BatchRequestTooLong", "InvalidParameterValue", "InvalidParameter", "ValidationException",
                          "TooManyEntriesInBatchRequest", "InvalidBatchEntryId", "BatchEntryIdsNotDistinct",
                          "EmptyBatchRequest", "InvalidMessageContents"})

Call = tuple[Job, Dispatch, int]  # the job, the dispatch, the attempt number


def batch_key(job: Job) -> tuple | None:
    """What a call must share with others to ride their request: the tenant (its session), the
    target's type and address (queue URL, topic ARN, bus), the timeout (its client's read timeout).
    None for targets without a batch call (HTTP, Lambda, container tasks)."""
    kind = job.spec.target.type
    field = {TargetType.SQS: "queueUrl", TargetType.SNS: "topicArn", TargetType.EVENTBRIDGE: "eventBusName"}.get(kind)
    if field is None:
        return None
    return job.tenant_id, kind.value, str(job.spec.target.config[field]), job.spec.timeout_sec


class TargetBatches:
    def __init__(self, invoker: AwsTargetInvoker) -> None:
        self._invoker = invoker

    def invoke_batch(self, calls: list[Call]) -> list[AttemptOutcome]:
        """Each call's outcome, in order. The calls share one batch_key."""
        if len(calls) == 1 or (self._invoker.tenant_sessions is not None and not is_taggable(calls[0][0].tenant_id)):
            return [self._invoker.invoke(job, dispatch, attempt) for job, dispatch, attempt in calls]
        outcomes: list[AttemptOutcome | None] = [None] * len(calls)
        entries: list[tuple[int, dict, int]] = []  # (index in calls, the entry, its bytes)
        kind = calls[0][0].spec.target.type
        for i, (job, dispatch, attempt) in enumerate(calls):
            entry, size, refused = _entry(kind, job, dispatch, attempt, i)
            if refused is not None:
                outcomes[i] = refused
            else:
                entries.append((i, entry, size))
        for chunk in _chunks(entries, MAX_BATCH_BYTES[kind]):
            for i, outcome in zip([i for i, _, _ in chunk], self._send(kind, calls, chunk)):
                outcomes[i] = outcome
        return outcomes  # type: ignore[return-value]

    def _send(self, kind: TargetType, calls: list[Call], chunk: list[tuple[int, dict, int]]) -> list[AttemptOutcome]:
        job = calls[chunk[0][0]][0]
        sessions = self._invoker.tenant_sessions
        for again in (True, False):
            try:
                return self._request(kind, job, chunk)
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code")
                if code in EXPIRED_CODES and again and sessions is not None:
                    # Credentials AWS no longer takes: nothing was sent; once more with a fresh session.
                    sessions.forget(job.tenant_id)
                    continue
                if code in ENTRY_CAUSED:
                    return [self._invoker.invoke(*calls[i]) for i, _, _ in chunk]
                return [self._refused(exc, kind, job)] * len(chunk)
            except BotoCoreError as exc:
                return [_unreached(exc)] * len(chunk)
            except TargetSessionUnavailable as exc:  # our deployment's fault or STS's: retried
                return [_failed(str(exc))] * len(chunk)
        raise AssertionError("unreachable")

    def _request(self, kind: TargetType, job: Job, chunk: list[tuple[int, dict, int]]) -> list[AttemptOutcome]:
        config = job.spec.target.config
        address = config["eventBusName" if kind is TargetType.EVENTBRIDGE else
                         "queueUrl" if kind is TargetType.SQS else "topicArn"]
        service = {TargetType.SQS: "sqs", TargetType.SNS: "sns", TargetType.EVENTBRIDGE: "events"}[kind]
        client = self._invoker.client(service, address, job.spec.timeout_sec, job.tenant_id)
        sent = [entry for _, entry, _ in chunk]
        if kind is TargetType.EVENTBRIDGE:
            answer = client.put_events(Entries=sent)
            results = answer.get("Entries") or []
            return [_ok({"eventId": r.get("EventId")}) if r.get("EventId") else
                    self._refused_entry(kind, job, r.get("ErrorCode"), r.get("ErrorMessage")) for r in results] \
                + [_failed("PutEvents answered no entry for this event")] * (len(sent) - len(results))
        answer = (client.send_message_batch(QueueUrl=address, Entries=sent) if kind is TargetType.SQS
                  else client.publish_batch(TopicArn=address, PublishBatchRequestEntries=sent))
        done = {r["Id"]: r for r in answer.get("Successful") or []}
        failed = {r["Id"]: r for r in answer.get("Failed") or []}
        outcomes = []
        for entry in sent:
            if entry["Id"] in done:
                outcomes.append(_ok({"messageId": done[entry["Id"]].get("MessageId")}))
            elif entry["Id"] in failed:
                outcomes.append(self._refused_entry(kind, job, failed[entry["Id"]].get("Code"),
                                                    failed[entry["Id"]].get("Message")))
            else:
                outcomes.append(_failed("the batch's answer named neither a success nor a failure for this message"))
        return outcomes

    def _refused(self, exc: ClientError, kind: TargetType, job: Job) -> AttemptOutcome:
        try:
            return self._invoker.refused(exc, kind, job.tenant_id)
        except _Expired as expired:  # a second expiry in a row: the attempt's failure, retried
            return _failed(str(expired))

    def _refused_entry(self, kind: TargetType, job: Job, code: str | None, message: str | None) -> AttemptOutcome:
        """One entry refused inside a successful request: as a single call refused with that code."""
        return self._refused(ClientError({"Error": {"Code": code or "Failed", "Message": message or ""}}, "Batch"),
                             kind, job)


def _entry(kind: TargetType, job: Job, dispatch: Dispatch, attempt: int, index: int
           ) -> tuple[dict, int, AttemptOutcome | None]:
    """The batch entry of one call (what a single call sends: store/targets.py), its size as the
    service counts it, or the refusal a single call would have got before sending (an SNS message or
    EventBridge entry over the service's limit)."""
    if kind is TargetType.EVENTBRIDGE:
        entry, size = event_entry(job, dispatch, attempt)
        if size > EVENTBRIDGE_MAX_ENTRY_BYTES:
            return {}, size, _too_large("EventBridge entry", size, EVENTBRIDGE_MAX_ENTRY_BYTES)
        return entry, size, None
    body = compact(job.spec.payload)
    address = str(job.spec.target.config["queueUrl" if kind is TargetType.SQS else "topicArn"])
    params = message_params(job, dispatch, attempt, address)
    size = sns_message_bytes(body, params["MessageAttributes"])  # SQS counts a message the same way
    if kind is TargetType.SNS and size > SNS_MAX_MESSAGE_BYTES:
        return {}, size, _too_large("SNS message", size, SNS_MAX_MESSAGE_BYTES)
    return {"Id": f"e{index}", ("MessageBody" if kind is TargetType.SQS else "Message"): body, **params}, size, None


def _chunks(entries: list[tuple[int, dict, int]], max_bytes: int) -> list[list[tuple[int, dict, int]]]:
    """Requests of at most MAX_BATCH_ENTRIES entries and max_bytes together, in order."""
    chunks: list[list[tuple[int, dict, int]]] = []
    size = 0
    for item in entries:
        if not chunks or len(chunks[-1]) == MAX_BATCH_ENTRIES or size + item[2] > max_bytes:
            chunks.append([])
            size = 0
        chunks[-1].append(item)
        size += item[2]
    return chunks
