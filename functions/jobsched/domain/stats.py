"""A job's outcomes and lateness over a recent window, from its execution records (not a
CloudWatch metric per job, whose cost grows with the number of jobs)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from jobsched.domain.executions import ExecutionStatus

MS_PER_HOUR = 3_600_000
WINDOWS_MS = {"1h": MS_PER_HOUR, "24h": 24 * MS_PER_HOUR, "7d": 7 * 24 * MS_PER_HOUR}
# At most this many records are read for one answer (newest first): a job firing every second has
# 604,800 in seven days. Past it the answer covers the newest part of the window and says so.
MAX_RECORDS = 20_000


@dataclass(frozen=True)
class ExecutionSummary:
    """What the statistics read of an execution record."""
    status: ExecutionStatus
    scheduled_ms: int
    late_ms: int | None
    manual: bool  # a trigger's: counted in the outcomes, not as a fire of the schedule
    skipped_count: int | None = None  # a catch-up's MISSED_WINDOW record: the occurrences it stands for
    # Absence alerts: marked MISSING or NOT_FIRED by its check (a later success does not unmark it).
    missing: bool = False
    not_fired: bool = False  # a NOT_FIRED record that no late fire claimed: not running
    backfill: bool = False  # first claimed by a backfill: run late on purpose, counts for no lateness


def nearest_rank(sorted_values: list[int], percent: float) -> int | None:
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(percent / 100 * len(sorted_values)) - 1)]


def job_stats(records: list[ExecutionSummary], window: str, now_ms: int, complete: bool) -> dict:
    """`records`: the executions scheduled in the window (newest first, as read); `complete`:
    False when the read stopped at MAX_RECORDS."""
    counts = {status: 0 for status in ExecutionStatus}
    fires = 0
    lateness: list[int] = []
    missing = 0
    for record in records:
        missing += record.missing
        if record.not_fired:
            continue  # an occurrence that never fired (absence alerts): counted in `missing` only
        counts[record.status] += record.skipped_count or 1
        if not record.manual and record.status not in (ExecutionStatus.SKIPPED, ExecutionStatus.CANCELLED):
            fires += 1
        if record.late_ms is not None and not record.backfill:
            lateness.append(record.late_ms)
    lateness.sort()
    covered_from = now_ms - WINDOWS_MS[window]
    if not complete and records:
        covered_from = min(r.scheduled_ms for r in records)
    return {
        "window": window,
        "from": covered_from,
        "to": now_ms,
        "complete": complete,
        "fires": fires,
        "succeeded": counts[ExecutionStatus.SUCCEEDED],
        # An execution whose last attempt failed and that waits for its retry; DEAD ones have none left.
        "failed": counts[ExecutionStatus.FAILED] + counts[ExecutionStatus.TIMED_OUT] + counts[ExecutionStatus.LOST],
        "dead": counts[ExecutionStatus.DEAD],
        "skipped": counts[ExecutionStatus.SKIPPED],
        "running": counts[ExecutionStatus.RUNNING] + counts[ExecutionStatus.PENDING],
        "lateMs": {"p50": nearest_rank(lateness, 50), "p99": nearest_rank(lateness, 99),
                   "max": lateness[-1] if lateness else None},
        # Absence alerts: occurrences of a job with `expect` marked MISSING or NOT_FIRED by their check.
        "missing": missing,
    }
