"""Which jobs a worker's batch reads at once before its records fan out."""
from jobsched.domain.executions import Dispatch, DispatchKind
from jobsched.service.worker import batch_read_keys

NOW = 1_893_456_000_000


def dispatch(kind: DispatchKind, job: str, due_ms: int) -> Dispatch:
    return Dispatch(kind, "t", job, f"{job}.{due_ms}", due_ms, 1)


def test_a_batch_reads_the_jobs_of_records_due_by_now_and_no_fire_still_before_its_instant():
    records = [
        dispatch(DispatchKind.FIRE, "late", NOW - 60_000),
        dispatch(DispatchKind.FIRE, "on_time", NOW),
        dispatch(DispatchKind.FIRE, "waits", NOW + 440),  # reads its own after its wait
        dispatch(DispatchKind.FIRE, "too_early", NOW + 2_600),  # goes back to its queue
        dispatch(DispatchKind.RETRY, "retry", NOW + 440),
        dispatch(DispatchKind.MANUAL, "manual", NOW + 440),
        dispatch(DispatchKind.CHECK, "check", NOW - 1_000),
        dispatch(DispatchKind.LEASE, "lease", NOW - 1_000),
    ]
    assert batch_read_keys(records, NOW) == [("t", "late"), ("t", "on_time"), ("t", "retry"), ("t", "manual")]
