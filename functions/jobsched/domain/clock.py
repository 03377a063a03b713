"""Clocks. The domain never reads the time itself: a clock is passed in."""
from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class FakeClock:
    """A clock that only moves when told to; `sleep` moves it instead of waiting.

    Threads sleeping at the same time overlap as they would in real time: each sleeps from the
    instant it last read, so two concurrent 0.5 s sleeps move the clock 0.5 s, not 1 s."""

    def __init__(self, now_ms: int) -> None:
        self._now_ms = now_ms
        self._lock = threading.Lock()
        self._seen = threading.local()

    def now_ms(self) -> int:
        with self._lock:
            self._seen.ms = self._now_ms
            return self._now_ms

    def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        with self._lock:
            start = getattr(self._seen, "ms", self._now_ms)
            self._now_ms = max(self._now_ms, start + int(seconds * 1000))
            self._seen.ms = self._now_ms

    def advance_ms(self, ms: int) -> None:
        with self._lock:
            self._now_ms += ms

    def set_ms(self, now_ms: int) -> None:
        with self._lock:
            if now_ms < self._now_ms:
                raise ValueError("a fake clock never moves backwards")
            self._now_ms = now_ms
