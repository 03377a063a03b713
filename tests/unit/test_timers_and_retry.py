from jobsched.domain.executions import Dispatch, execution_id_for, job_id_of, scheduled_ms_of
from jobsched.domain.retry import Backoff, RetryPolicy
from jobsched.domain.timers import (TIMER_SLICES, Timer, TimerKind, bucket_key, parse_position, position_key,
                                    segment_of, slice_of)


def test_segment_is_stable_and_spread():
    assert segment_of("job_abc", 16) == segment_of("job_abc", 16)
    counts = [0] * 8
    for i in range(8000):
        counts[segment_of(f"job_{i:032x}", 8)] += 1
    assert min(counts) > 850 and max(counts) < 1150


def test_timer_keys_order_by_due_time_and_carry_the_generation():
    a = Timer(1_000_000, TimerKind.FIRE, "t", "job_a", 1, 0)
    b = Timer(999_999, TimerKind.FIRE, "t", "job_b", 1, 0)
    assert b.sort_key < a.sort_key
    assert a.bucket == bucket_key(16, 0, slice_of("job_a", 16))
    assert Timer(1_000_000, TimerKind.FIRE, "t", "job_a", 2, 0).sort_key != a.sort_key
    assert Timer.from_item(a.to_item()) == a
    assert a.to_item()["expiresAt"] > 1_000_000 // 1000


def test_a_bucket_spreads_over_its_slices_and_slice_0_keeps_the_unsliced_key():
    assert bucket_key(16, 3) == bucket_key(16, 3, 0) == "16#3"
    assert bucket_key(16, 3, 5) == "16#3#5"
    # One schedule's herd (many jobs, one due minute) spreads evenly over the slices...
    counts = [0] * TIMER_SLICES
    for i in range(8000):
        counts[slice_of(f"job_{i:032x}", 27_000_000)] += 1
    assert min(counts) > 850 and max(counts) < 1150
    # ...and one job moves between slices from minute to minute.
    assert len({slice_of("job_a", minute) for minute in range(100)}) == TIMER_SLICES


def test_the_jobs_of_one_slice_scatter_over_every_slice_of_the_next_minute():
    """The tick hands a bucket off slice after slice, writing each job's next timer as it goes: the
    jobs of one slice must not share a slice next minute, or one partition takes the tick's full
    pace (crc32, linear, sent a whole slice into one: 1 of 8)."""
    ids = [f"job_{0x19c3f0a2b00:012x}{i * 7919:020x}" for i in range(4000)]  # one length, as new_job_id
    for minute in (27_000_000, 27_000_001, 27_000_059):
        one_slice = [j for j in ids if slice_of(j, minute) == 3]
        assert len(one_slice) > 400
        next_counts = [0] * TIMER_SLICES
        for j in one_slice:
            next_counts[slice_of(j, minute + 1)] += 1
        assert min(next_counts) > 0.6 * len(one_slice) / TIMER_SLICES
        assert max(next_counts) < 1.4 * len(one_slice) / TIMER_SLICES


def test_positions_order_in_hand_off_order_and_read_the_unsliced_format():
    a = Timer(1_000_000, TimerKind.FIRE, "t", "job_a", 1, 0).sort_key
    b = Timer(2_000_000, TimerKind.FIRE, "t", "job_b", 1, 0).sort_key
    assert position_key(0, b) < position_key(1, a) < position_key(1, b) < position_key(TIMER_SLICES - 1, a)
    assert parse_position(position_key(3, a)) == (3, a)
    assert parse_position(None) == (0, None)
    # A position saved before slices existed: slice 0, and any newer position is ahead of it.
    assert parse_position(b) == (0, b)
    assert b < position_key(0, a)


def test_execution_ids_are_deterministic_and_parseable():
    eid = execution_id_for("job_x", 1_893_456_000_000)
    assert eid == execution_id_for("job_x", 1_893_456_000_000)
    assert job_id_of(eid) == "job_x" and scheduled_ms_of(eid) == 1_893_456_000_000
    assert job_id_of("nonsense") is None
    d = Dispatch(TimerKind.FIRE, "t", "job_x", eid, 1_893_456_000_000, 3, 2)
    assert Dispatch.from_json(d.to_json()) == d


def test_exponential_backoff_doubles_within_full_jitter_and_caps():
    policy = RetryPolicy(max_attempts=10, initial_delay_ms=1000, max_delay_ms=5000)
    assert [policy.delay_before(n, 1.0) for n in (2, 3, 4, 5)] == [1000, 2000, 4000, 5000]
    assert [policy.delay_before(n, 0.0) for n in (2, 3, 4, 5)] == [500, 1000, 2000, 2500]
    assert policy.exhausted(10) and not policy.exhausted(9)


def test_fixed_backoff():
    policy = RetryPolicy(backoff=Backoff.FIXED, initial_delay_ms=3000)
    assert policy.delay_before(2, 1.0) == policy.delay_before(7, 1.0) == 3000


def test_jitter_offsets_are_deterministic_bounded_and_spread():
    from jobsched.domain.jobs import jitter_offset_ms

    offsets = [jitter_offset_ms(f"job_{i:032x}", 30) for i in range(3000)]
    assert offsets == [jitter_offset_ms(f"job_{i:032x}", 30) for i in range(3000)]
    assert min(offsets) >= 0 and max(offsets) <= 30_000
    per_second = [0] * 31
    for offset in offsets:
        per_second[offset // 1000] += 1
    assert max(per_second[:30]) < 2 * 3000 / 30  # spread across the window, no hot second
    assert jitter_offset_ms("job_x", 0) == 0


def test_fake_clock_concurrent_sleeps_overlap_like_real_time():
    import threading

    from jobsched.domain.clock import FakeClock

    clock = FakeClock(1000)
    barrier = threading.Barrier(3)

    def sleeper():
        clock.now_ms()
        barrier.wait()
        clock.sleep(0.5)

    threads = [threading.Thread(target=sleeper) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clock.now_ms() == 1500


def test_job_items_round_trip_and_the_hand_off_projection_leaves_out_the_payload_and_target():
    from jobsched.domain.jobs import Job, JobSpec, JobState, Target, TargetType
    from jobsched.domain.schedule import cron_schedule
    from jobsched.store.jobs import HAND_OFF_ATTRIBUTES
    spec = JobSpec(name="n", schedule=cron_schedule("0 3 * * *", "Europe/Paris", 0),
                   target=Target(TargetType.HTTP, {"url": "https://e.com", "method": "POST", "headers": {}}),
                   payload={"big": [1.5, None, "x"]}, jitter_sec=7, max_runs=5, exclude_calendars=("holidays",))
    job = Job("t", "job_1", spec, JobState.ACTIVE, 3, 4, 10, 20)
    item = job.to_item()
    assert Job.from_item(item) == job
    assert {"payload", "target", "retryPolicy"} <= set(item) - set(HAND_OFF_ATTRIBUTES)
    # catchUp, expect: only on a job with a catch-up policy, an expectation
    assert set(HAND_OFF_ATTRIBUTES) - {"catchUp", "expect"} <= set(item)
    projected = Job.for_hand_off({k: v for k, v in item.items() if k in HAND_OFF_ATTRIBUTES})
    assert projected.spec.schedule == spec.schedule and projected.spec.payload is None
    assert projected.spec.target is None and projected.spec.jitter_sec == 7
    assert projected.spec.max_runs == 5  # schedule bounds: the hand-off ends the chain at maxRuns
    assert projected.spec.exclude_calendars == ("holidays",)  # the hand-off skips their dates
