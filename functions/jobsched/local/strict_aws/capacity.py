"""Capacity: the ledger of units per partition key per second, token buckets (Fargate's rates),
the KMS count per second, the limits a layer applies, and its report."""
from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass

from jobsched.local.strict_aws.base import (FARGATE_LAUNCHES, KMS_REQUESTS_PER_SECOND,
    PARTITION_RCU_PER_SECOND, PARTITION_WCU_PER_SECOND, RUN_TASK_CALLS, SQS_IN_FLIGHT_PER_QUEUE)


@dataclass
class PartitionUse:
    read_units: float = 0.0
    write_units: float = 0.0
    peak_rcu: float = 0.0
    peak_wcu: float = 0.0
    throttled: int = 0


@dataclass
class Report:
    hottest: list[tuple[str, PartitionUse]]
    kms_peak_per_second: int
    kms_requests: int
    throttled: int
    denied: list[str]
    assumed_roles: int = 0

    def text(self, top: int = 5) -> str:
        lines = [f"strict AWS: peak per partition key (limit {PARTITION_WCU_PER_SECOND} WCU/s, "
                 f"{PARTITION_RCU_PER_SECOND} RCU/s per key)"]
        for key, use in self.hottest[:top]:
            lines.append(f"  {key}: peak {use.peak_wcu:g} WCU/s, {use.peak_rcu:g} RCU/s "
                         f"(total {use.write_units:g} WCU, {use.read_units:g} RCU, throttled {use.throttled})")
        lines.append(f"  KMS: peak {self.kms_peak_per_second} requests/s ({self.kms_requests} in all)")
        lines.append(f"  STS AssumeRole: {self.assumed_roles}")
        if self.denied:
            lines.append(f"  AccessDenied: {len(self.denied)} ({', '.join(sorted(set(self.denied))[:5])})")
        return "\n".join(lines)


class Ledger:
    """Capacity units per partition key per second of the emulator's clock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.partitions: dict[str, PartitionUse] = defaultdict(PartitionUse)
        self._second: dict[str, tuple[int, float, float]] = {}  # key → (second, rcu, wcu)
        self.kms_second = (0, 0)
        self.kms_peak = 0
        self.kms_total = 0
        self.denied: list[str] = []
        self.allowed: set[tuple[str, str]] = set()  # (caller, IAM action) allowed at least once (grant_report.py)
        self.assumed_roles = 0
        self.buckets: dict[str, tuple[float, int]] = {}  # token buckets: name → (tokens, when)
        self.throttled_calls = 0

    def used(self, key: str, second: int) -> tuple[float, float]:
        with self._lock:
            at, rcu, wcu = self._second.get(key, (second, 0.0, 0.0))
            return (rcu, wcu) if at == second else (0.0, 0.0)

    def bill(self, key: str, second: int, rcu: float = 0.0, wcu: float = 0.0) -> None:
        with self._lock:
            at, used_r, used_w = self._second.get(key, (second, 0.0, 0.0))
            if at != second:
                used_r = used_w = 0.0
            used_r, used_w = used_r + rcu, used_w + wcu
            self._second[key] = (second, used_r, used_w)
            use = self.partitions[key]
            use.read_units += rcu
            use.write_units += wcu
            use.peak_rcu = max(use.peak_rcu, used_r)
            use.peak_wcu = max(use.peak_wcu, used_w)

    def count_assume_role(self) -> None:
        with self._lock:
            self.assumed_roles += 1

    def take_tokens(self, bucket: str, now_ms: int, size: int, per_second: int, count: int = 1) -> bool:
        """A token bucket of the account's (full at first): False, and nothing taken, when it has
        fewer than `count` tokens now."""
        with self._lock:
            tokens, at = self.buckets.get(bucket, (float(size), now_ms))
            tokens = min(float(size), tokens + (now_ms - at) * per_second / 1000)
            taken = tokens >= count
            self.buckets[bucket] = (tokens - count if taken else tokens, now_ms)
            if not taken:
                self.throttled_calls += 1
            return taken

    def count_kms(self, second: int) -> int:
        with self._lock:
            at, count = self.kms_second
            count = count + 1 if at == second else 1
            self.kms_second = (second, count)
            self.kms_peak = max(self.kms_peak, count)
            self.kms_total += 1
            return count


@dataclass
class Limits:
    partition_wcu: int = PARTITION_WCU_PER_SECOND
    partition_rcu: int = PARTITION_RCU_PER_SECOND
    kms_per_second: int = KMS_REQUESTS_PER_SECOND
    run_task_calls: tuple[int, int] = RUN_TASK_CALLS
    fargate_launches: tuple[int, int] = FARGATE_LAUNCHES
    sqs_in_flight: int = SQS_IN_FLIGHT_PER_QUEUE  # per queue; a test sets it small
