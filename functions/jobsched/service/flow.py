"""Flow control (shared/API.md, "Flow control"): a tenant's executions sharing a key never run
more than maxConcurrency at once nor start more than ratePerSecond in any second. The excess is
not failed, not dropped and uses no attempt: before its claim, an execution that may not start
is sent again with a delay (its dispatch carries when it was first held back; the execution shows
`throttledMs`), and its message is deleted.

- Rate: a counter per key and second beside the tenant's jobs (a conditional ADD below the limit,
  expiring with TTL); over it, the execution waits for the next second.
- Concurrency: a map of the slots held, execution id → the attempt's lease (store FlowStore). A
  slot is given back when the attempt ends (any end, or a retry scheduled); a worker that dies
  holding one leaves its lease, and an execution that finds every slot held reclaims the expired
  ones (a conditional remove on the lease it read), so a crash never holds a slot past its lease.
  A long-running attempt's heartbeats extend its slot's lease.
Held back, an execution tries again after RETRY_HELD_MS (spread by a little jitter), and no
scan is made: one item per key, at most maxConcurrency entries."""
from __future__ import annotations

import random
from dataclasses import replace

from jobsched.domain.clock import Clock
from jobsched.domain.executions import Dispatch
from jobsched.domain.jobs import Job
from jobsched.store.queues import Outgoing

RETRY_HELD_MS = 1_000
RATE_COUNTER_TTL_S = 120


class FlowGate:
    def __init__(self, stores, clock: Clock, unit_random=random.random) -> None:
        self._flow = stores.flow
        self._jobs = stores.jobs
        self._lanes = stores.lanes
        self._clock = clock
        self._random = unit_random

    def admit(self, job: Job, dispatch: Dispatch, lease_until_ms: int) -> tuple[bool, bool]:
        """(may start now, took a new slot). Rate first (a token used by one that then finds no
        slot is wasted: the limit errs toward fewer starts, never more)."""
        control = job.spec.flow_control
        if control is None:
            return True, False
        now = self._clock.now_ms()
        if control.rate_per_second is not None:
            second = now // 1000
            if not self._jobs.take_quota(job.tenant_id, f"flow#{control.key}#{second}", control.rate_per_second,
                                         expires_at=second + RATE_COUNTER_TTL_S):
                return False, False
        if control.max_concurrency is None:
            return True, False
        for _ in range(2):
            taken = self._flow.take_slot(job.tenant_id, control.key, dispatch.execution_id, control.max_concurrency,
                                         lease_until_ms)
            if taken != "full":
                # "held": another delivery of this execution holds it; the claim decides which runs.
                return True, taken == "new"
            held = self._flow.held(job.tenant_id, control.key)
            expired = {execution: lease for execution, lease in held.items() if lease < now}
            if not expired:
                return False, False
            for execution, lease in expired.items():  # a crashed worker's slots: reclaimed
                self._flow.give_back(job.tenant_id, control.key, execution, if_lease=lease)
        return False, False

    def hold_back(self, job: Job, dispatch: Dispatch) -> None:
        """Send the dispatch again for later; the caller then lets its message be deleted (a crash
        in between: the message comes back, and its claim absorbs a duplicate)."""
        now = self._clock.now_ms()
        later = replace(dispatch, throttled_from_ms=dispatch.throttled_from_ms or now)
        wait = RETRY_HELD_MS + int(self._random() * 250)
        self._lanes.send([Outgoing(job.spec.priority, later, now + wait)])

    def give_back(self, job: Job | None, execution_id: str) -> None:
        if job is not None and job.spec.flow_control is not None and job.spec.flow_control.max_concurrency:
            self._flow.give_back(job.tenant_id, job.spec.flow_control.key, execution_id)

    def extend(self, job: Job | None, execution_id: str, lease_until_ms: int) -> None:
        if job is not None and job.spec.flow_control is not None and job.spec.flow_control.max_concurrency:
            self._flow.extend(job.tenant_id, job.spec.flow_control.key, execution_id, lease_until_ms)
