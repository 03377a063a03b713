"""Retry policy: exponential or fixed backoff with full jitter, capped."""
from __future__ import annotations

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
