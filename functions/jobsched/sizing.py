"""How many segments a peak needs, from measured CPU and DynamoDB's documented limits.

One segment is one tick per minute and one bucket per minute, spread over TIMER_SLICES partition
keys. Its bucket must be handed off within HANDOFF_GOAL_S (the look-ahead leaves at least 60 s:
docs/architecture.md), so per segment-minute the timers are bounded by:

- our CPU: `bench cpu` measures at most TICK_CPU_MS_PER_TIMER per handed-off timer on one core;
  the tick runs at TICK_MEMORY_MB, which Lambda gives TICK_VCPU of a vCPU;
- the partitions: a herd's next timers all land in one future bucket (same schedule, same
  segment), spread over its TIMER_SLICES partitions, and one partition takes about
  PARTITION_WRITES_PER_SECOND writes a second (timer items are under 1 KB: one write unit each);
- the sends, which go out beside those writes, SEND_PARALLELISM batches of SQS_BATCH at a time;
- the hand-off's other calls on AWS latencies (bench herd models them from the counted calls).

tests/infra/test_sizing.py holds this rule to the code's constants and to the documented figures;
docs/operations.md shows it worked through.
"""
from __future__ import annotations

import math

from jobsched.domain.timers import TIMER_SLICES
from jobsched.store.queues import SEND_PARALLELISM, SQS_BATCH

HANDOFF_GOAL_S = 15.0
# Lambda allocates CPU in proportion to memory: one full vCPU at 1,769 MB.
LAMBDA_MB_PER_VCPU = 1769
TICK_MEMORY_MB = 1769
TICK_VCPU = TICK_MEMORY_MB / LAMBDA_MB_PER_VCPU
# Our CPU per handed-off timer, boto3 included (bench cpu; the bound the code is held to).
TICK_CPU_MS_PER_TIMER = 0.25
# DynamoDB: "a single partition can support a maximum of 1,000 write units per second".
PARTITION_WRITES_PER_SECOND = 1000
# The calls of one page of 500 timers that do not overlap anything (the Query, the job reads in
# one parallel wave, the saved position): bench herd models the rest from counted calls.
PAGE_SIZE = 500
PAGE_SEQUENTIAL_IO_MS = 10 + 10 + 8
# A typical in-region SendMessageBatch (bench herd's model takes it from here).
SEND_BATCH_MS = 20
MAX_SEGMENTS = 128


def handoff_ms_per_timer() -> float:
    """Worst case, a herd: each page's sends go out beside its next-timer writes (the longer of
    the two counts: the writes at the partitions' rate, the sends in parallel waves), then our
    CPU at the tick's share, then the page's reads."""
    writes = 1000 / (PARTITION_WRITES_PER_SECOND * TIMER_SLICES)
    sends = SEND_BATCH_MS / (SQS_BATCH * SEND_PARALLELISM)
    cpu = TICK_CPU_MS_PER_TIMER / TICK_VCPU
    return max(writes, sends) + cpu + PAGE_SEQUENTIAL_IO_MS / PAGE_SIZE


def timers_per_segment_minute() -> int:
    """The most timers one segment's bucket may hold at the sizing peak for its hand-off to stay
    within HANDOFF_GOAL_S (a minute twice as busy still hands off inside the look-ahead's 60 s)."""
    return int(HANDOFF_GOAL_S * 1000 / handoff_ms_per_timer())


def segments_for(jobs_per_minute: int) -> int:
    """Segments for a peak of `jobs_per_minute` timers due in one minute."""
    needed = max(1, math.ceil(jobs_per_minute / timers_per_segment_minute()))
    if needed > MAX_SEGMENTS:
        raise ValueError(f"{jobs_per_minute} jobs a minute needs {needed} segments; the stack allows {MAX_SEGMENTS}")
    return needed
