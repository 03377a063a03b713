"""AWS targets: SQS, SNS, EventBridge, Lambda. Each carries the execution id and attempt (message
attributes, or fields of the event) so the target can dedupe its own side effects."""
from __future__ import annotations

import base64
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from jobsched.adapters.targets import (EVENTBRIDGE_MAX_ENTRY_BYTES, SNS_MAX_MESSAGE_BYTES, eventbridge_entry_bytes,
                                       sns_message_bytes)
from jobsched.domain.json_text import compact, loads_strict
from jobsched.domain.executions import AttemptOutcome, Dispatch, ExecutionStatus
from jobsched.domain.jobs import Job, TargetType
from jobsched.domain.trace import trace_context

MAX_OUTPUT_BYTES = 4096


def _attributes(dispatch: Dispatch, attempt: int, job: Job) -> dict:
    """Four of the ten attributes SQS and SNS allow a message."""
    return {
        "executionId": {"DataType": "String", "StringValue": dispatch.execution_id},
        "attempt": {"DataType": "Number", "StringValue": str(attempt)},
        "jobId": {"DataType": "String", "StringValue": job.job_id},
        "traceparent": {"DataType": "String", "StringValue": trace_context(dispatch.execution_id, attempt).traceparent},
    }


def _client_context(dispatch: Dispatch, attempt: int) -> str:
    """A Lambda target's trace context, where a function reads its caller's (context.client_context
    .custom): about 120 bytes of the 3,583 Lambda allows."""
    custom = {"traceparent": trace_context(dispatch.execution_id, attempt).traceparent}
    return base64.b64encode(compact({"custom": custom}).encode()).decode()


def _envelope(job: Job, dispatch: Dispatch, attempt: int, progress: Any) -> dict:
    envelope = {"executionId": dispatch.execution_id, "attempt": attempt, "jobId": job.job_id,
                "payload": job.spec.payload}
    if progress is not None:
        envelope["progress"] = progress
    return envelope


class AwsTargetInvoker:
    def __init__(self, session) -> None:
        self._session = session
        self._clients: dict[tuple[str, str | None, int], Any] = {}

    def _client(self, service: str, arn_or_url: str, timeout_sec: int):
        region = _region_of(arn_or_url)
        key = (service, region, timeout_sec)
        if key not in self._clients:
            # One call per attempt: botocore's own retries would repeat a call that may have taken
            # effect (a read timeout on a slow function invokes it again). The job's retry policy
            # decides whether there is another attempt, with its own execution-id-carrying call.
            config = Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=5,
                            read_timeout=timeout_sec)
            self._clients[key] = self._session.client(service, region_name=region, config=config)
        return self._clients[key]

    def invoke(self, job: Job, dispatch: Dispatch, attempt: int, callback_token: str | None = None,
               progress: Any = None) -> AttemptOutcome:
        config = job.spec.target.config
        kind = job.spec.target.type
        timeout = job.spec.timeout_sec
        body = compact(job.spec.payload)
        try:
            if kind in (TargetType.SQS, TargetType.SNS):
                # Same message shape for a queue and a topic; FIFO ones dedupe on the execution id.
                address = config["queueUrl"] if kind is TargetType.SQS else config["topicArn"]
                params: dict[str, Any] = {"MessageAttributes": _attributes(dispatch, attempt, job)}
                if address.endswith(".fifo"):
                    params.update(MessageGroupId=job.job_id, MessageDeduplicationId=dispatch.execution_id)
                if kind is TargetType.SQS:
                    answer = self._client("sqs", address, timeout).send_message(QueueUrl=address, MessageBody=body,
                                                                                **params)
                else:
                    size = sns_message_bytes(body, params["MessageAttributes"])
                    if size > SNS_MAX_MESSAGE_BYTES:
                        return _too_large("SNS message", size, SNS_MAX_MESSAGE_BYTES)
                    answer = self._client("sns", address, timeout).publish(TopicArn=address, Message=body, **params)
                return _ok({"messageId": answer.get("MessageId")})
            if kind is TargetType.EVENTBRIDGE:
                bus = config["eventBusName"]
                detail = compact(_envelope(job, dispatch, attempt, progress))
                size = eventbridge_entry_bytes(config["source"], config["detailType"], detail)
                if size > EVENTBRIDGE_MAX_ENTRY_BYTES:
                    return _too_large("EventBridge entry", size, EVENTBRIDGE_MAX_ENTRY_BYTES)
                # EventBridge entries have no attributes: the trace rides in TraceHeader, which
                # takes an X-Ray header (the same ids; not counted in the entry's size).
                answer = self._client("events", bus, timeout).put_events(Entries=[{
                    "EventBusName": bus, "Source": config["source"], "DetailType": config["detailType"],
                    "Detail": detail, "TraceHeader": trace_context(dispatch.execution_id, attempt).xray_header}])
                if answer.get("FailedEntryCount"):
                    entry = answer["Entries"][0]
                    return _failed(f"{entry.get('ErrorCode')}: {entry.get('ErrorMessage')}")
                return _ok({"eventId": answer["Entries"][0].get("EventId")})
            if kind is TargetType.LAMBDA:
                arn = config["functionArn"]
                answer = self._client("lambda", arn, timeout).invoke(
                    FunctionName=arn, InvocationType="RequestResponse",
                    ClientContext=_client_context(dispatch, attempt),
                    Payload=compact(_envelope(job, dispatch, attempt, progress)).encode())
                raw = answer["Payload"].read(MAX_OUTPUT_BYTES + 1)
                if answer.get("FunctionError"):
                    return _failed(f"function error: {raw[:200].decode('utf-8', 'replace')}")
                return _ok(_json_or_none(raw))
        except ClientError as exc:
            error = exc.response.get("Error", {})
            return _failed(f"{error.get('Code')}: {error.get('Message')}")
        except BotoCoreError as exc:
            status = ExecutionStatus.TIMED_OUT if "timeout" in type(exc).__name__.lower() else ExecutionStatus.FAILED
            return AttemptOutcome(False, status, str(exc))
        return _failed(f"target type {kind.value} is not an AWS target")


def _region_of(arn_or_url: str) -> str | None:
    if arn_or_url.startswith("arn:"):
        parts = arn_or_url.split(":")
        return parts[3] or None if len(parts) > 3 else None
    if arn_or_url.startswith("https://sqs."):
        return arn_or_url.split(".")[1]
    return None


def _ok(output: Any) -> AttemptOutcome:
    return AttemptOutcome(True, ExecutionStatus.SUCCEEDED, None, output)


def _failed(error: str) -> AttemptOutcome:
    return AttemptOutcome(False, ExecutionStatus.FAILED, error)


def _too_large(what: str, size: int, limit: int) -> AttemptOutcome:
    """Sending it would be refused, and so would every retry: not retried."""
    return AttemptOutcome(False, ExecutionStatus.FAILED, f"{what} of {size} bytes with its envelope is over the "
                          f"{limit}-byte limit", retryable=False)


def _json_or_none(raw: bytes) -> Any:
    if not raw or len(raw) > MAX_OUTPUT_BYTES:
        return None
    try:
        return loads_strict(raw)  # a target's NaN or duplicate keys never reach our responses
    except ValueError:
        return None
