"""Retry policy: exponential or fixed backoff with full jitter, capped."""
from __future__ import annotations

import email.utils
from dataclasses import dataclass
from enum import Enum

# SQS delays a message by at most 15 minutes; a longer backoff becomes a RETRY timer.
SQS_MAX_DELAY_MS = 900_000


class Backoff(str, Enum):
    EXPONENTIAL = "EXPONENTIAL"
    FIXED = "FIXED"


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    backoff: Backoff = Backoff.EXPONENTIAL
    initial_delay_ms: int = 1000
    max_delay_ms: int = 3_600_000

    def delay_before(self, next_attempt: int, unit_random: float) -> int:
        """Backoff before attempt `next_attempt` (2, 3, ...). `unit_random` in [0, 1) gives
        full jitter: a uniform delay in [cap/2, cap] keeps retries spread without collapsing
        to zero."""
        if self.backoff is Backoff.FIXED:
            cap = self.initial_delay_ms
        else:
            cap = self.initial_delay_ms * (2 ** max(0, next_attempt - 2))
        cap = min(cap, self.max_delay_ms)
        return int(cap / 2 + unit_random * cap / 2)

    def exhausted(self, attempt: int) -> bool:
        return attempt >= self.max_attempts

    def to_item(self) -> dict:
        return {
            "maxAttempts": self.max_attempts,
            "backoff": self.backoff.value,
            "initialDelayMs": self.initial_delay_ms,
            "maxDelayMs": self.max_delay_ms,
        }

    @classmethod
    def from_item(cls, item: dict) -> "RetryPolicy":
        return cls(
            max_attempts=int(item["maxAttempts"]),
            backoff=Backoff(item["backoff"]),
            initial_delay_ms=int(item["initialDelayMs"]),
            max_delay_ms=int(item["maxDelayMs"]),
        )


def retry_after_ms(value: str | None, date: str | None, now_s: float) -> int | None:
    """An answer's Retry-After as milliseconds from now: delta-seconds, or an HTTP date (measured
    against the answer's own Date header when it has one, so that clock skew does not count; else
    against `now_s`). None if absent or unreadable. Read by the HTTP target adapter and by the
    Python client (jobsched.client)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value) * 1000
    try:
        at = email.utils.parsedate_to_datetime(value)
        now = email.utils.parsedate_to_datetime(date) if date else None
    except (TypeError, ValueError, IndexError):
        return None
    if at is None:
        return None
    reference = now.timestamp() if now is not None else now_s
    return max(0, int((at.timestamp() - reference) * 1000))
