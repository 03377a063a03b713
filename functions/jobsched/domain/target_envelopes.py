"""Target envelopes: what SNS and EventBridge accept, envelope included, and the largest payload
that fits once the invoker's envelope is added. Pure sizes: the invoker (store/targets.py) checks
what it is about to send with them, and the API (api/mapping.py) refuses a payload that cannot fit."""
from __future__ import annotations

from jobsched.domain.jobs import TargetType

# What SNS and EventBridge accept, envelope included (shared/AWS-LIMITS.md §5, §6). A payload the
# API accepts (256 KB) could pass them once our envelope is added: the API refuses such a payload
# for these targets (api/mapping.py), and the invoker checks what it is about to send (a step's
# body carries its upstream outputs too) and fails the attempt, not retryable, rather than call.
SNS_MAX_MESSAGE_BYTES = 262_144  # the message and its attributes (name, type and value of each)
EVENTBRIDGE_MAX_ENTRY_BYTES = 262_144  # Time (14), Source, DetailType, Detail, Resources
EVENTBRIDGE_TIME_BYTES = 14
# The longest ids an envelope may carry: a step's execution id is its run's plus ".step.<name>"
# (name up to 64), a hook's its execution's plus a suffix; 200 bounds them all. 20 attempts at most.
LONGEST_EXECUTION_ID = 200
LONGEST_JOB_ID = 40
LONGEST_ATTEMPT = 20


def sns_message_bytes(body: str, attributes: dict) -> int:
    """SNS counts the message and each attribute's name, data type and value."""
    return len(body.encode()) + sum(
        len(name.encode()) + len(value["DataType"].encode()) + len(value["StringValue"].encode())
        for name, value in attributes.items())


def eventbridge_entry_bytes(source: str, detail_type: str, detail: str) -> int:
    """EventBridge's entry size (eb-putevent-size): Time counted although it is not sent."""
    return EVENTBRIDGE_TIME_BYTES + sum(len(text.encode()) for text in (source, detail_type, detail))


def _longest_attributes() -> dict:
    """The attributes the invoker sends (store/targets.py), each at its longest."""
    from jobsched.domain.trace import trace_context

    return {"executionId": {"DataType": "String", "StringValue": "x" * LONGEST_EXECUTION_ID},
            "attempt": {"DataType": "Number", "StringValue": str(LONGEST_ATTEMPT)},
            "jobId": {"DataType": "String", "StringValue": "x" * LONGEST_JOB_ID},
            "traceparent": {"DataType": "String", "StringValue": trace_context("x", 1).traceparent}}  # fixed length


def largest_payload_bytes(target_type: TargetType, config: dict) -> int | None:
    """The largest payload (compact JSON bytes) that fits a target of this type with the envelope
    our invoker adds at its longest; None when the target type adds nothing that limits it."""
    if target_type is TargetType.SNS:
        return SNS_MAX_MESSAGE_BYTES - sns_message_bytes("", _longest_attributes())
    if target_type is TargetType.EVENTBRIDGE:
        from jobsched.domain.json_text import compact

        empty = compact({"executionId": "x" * LONGEST_EXECUTION_ID, "attempt": LONGEST_ATTEMPT,
                         "jobId": "x" * LONGEST_JOB_ID, "payload": None})
        envelope = len(empty.encode()) - len(b"null")
        return EVENTBRIDGE_MAX_ENTRY_BYTES - eventbridge_entry_bytes(
            str(config.get("source", "")), str(config.get("detailType", "")), "") - envelope
    return None
