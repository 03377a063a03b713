"""W3C trace context for target calls (https://www.w3.org/TR/trace-context/).

An execution is one trace: its id is derived from the execution id, so every attempt of it (and
the record the API shows) names the same trace without storing anything. Each attempt is a span
of its own, derived from the execution id and the attempt number. Pure functions of their input:
a redelivered message sends the same context again."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

VERSION = "00"
SAMPLED = "01"  # the scheduler's hop is always worth recording: the target decides what it keeps


@dataclass(frozen=True)
class TraceContext:
    trace_id: str  # 32 lowercase hex digits, never all zeros
    span_id: str  # 16 lowercase hex digits, never all zeros

    @property
    def traceparent(self) -> str:
        return f"{VERSION}-{self.trace_id}-{self.span_id}-{SAMPLED}"

    @property
    def xray_header(self) -> str:
        """The same ids as an X-Ray trace header (EventBridge's TraceHeader takes only this form):
        X-Ray reads a W3C trace id as Root=1-<first 8 digits>-<last 24>."""
        return f"Root=1-{self.trace_id[:8]}-{self.trace_id[8:]};Parent={self.span_id};Sampled=1"


def _nonzero_hex(seed: str, digits: int) -> str:
    value = hashlib.sha256(seed.encode()).hexdigest()[:digits]
    return value if value.strip("0") else "1".rjust(digits, "0")  # all zeros is invalid


def trace_id_of(execution_id: str) -> str:
    return _nonzero_hex(f"trace:{execution_id}", 32)


def trace_context(execution_id: str, attempt: int) -> TraceContext:
    return TraceContext(trace_id_of(execution_id), _nonzero_hex(f"span:{execution_id}:{attempt}", 16))
