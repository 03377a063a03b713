"""Scale: what one tick reads and requests with 10,000 and with 1,000,000 registered far-future
jobs. Counted, not timed: the emulator's own query time grows with table size, AWS's does not."""
from __future__ import annotations

import sys
import time

import boto3

from bench.common import READ_OPS, CallCounter, emulator, machine, print_table, template, use_local_aws
from bench.dispatch import seed_bucket
from jobsched.service.handoff import LOOK_AHEAD_MINUTES


def seed_far_future(stack, count: int) -> None:
    """`count` jobs whose next timers lie 1 to 30 days ahead, written straight to the tables."""
    from jobsched.domain.jobs import Job, JobSpec, JobState, Target, TargetType
    from jobsched.domain.schedule import cron_schedule
    from jobsched.domain.timers import Timer, TimerKind, segment_of

    resource = stack.session.resource("dynamodb")
    jobs_table = resource.Table(stack.settings.jobs_table)
    timers_table = resource.Table(stack.settings.timers_table)
    now = stack.clock.now_ms()
    schedule = cron_schedule("0 3 1 * *", "UTC", now)
    target = Target(TargetType.HTTP, {"url": "http://127.0.0.1:9/x", "method": "POST"})
    with jobs_table.batch_writer() as jobs, timers_table.batch_writer() as timers:
        for i in range(count):
            job_id = f"job_{i:012x}{'f' * 20}"
            spec = JobSpec(name="far", schedule=schedule, target=target, payload=None)
            jobs.put_item(Item=Job("far", job_id, spec, JobState.ACTIVE, 1, 1, now, now).to_item())
            due = now + 86_400_000 + (i * 2_591_999) % (29 * 86_400_000)
            timers.put_item(Item=Timer(due, TimerKind.FIRE, "far", job_id, 1,
                                       segment_of(job_id, stack.settings.segments)).to_item())


def measure(far_jobs: int, due: int) -> dict:
    from jobsched.domain.clock import FakeClock
    from jobsched.local.inprocess import InProcessStack

    start_minute = 31_557_600
    clock = FakeClock(start_minute * 60_000 + 1_000)
    counter = CallCounter()
    with emulator(clock):
        session = boto3.session.Session(region_name="us-east-1")
        counter.attach(session)
        stack = InProcessStack(template(), clock, session=session)
        started = time.perf_counter()
        seed_far_future(stack, far_jobs)
        seeding = time.perf_counter() - started
        seed_bucket(stack, start_minute + 1 + LOOK_AHEAD_MINUTES, due)
        clock.set_ms((start_minute + 1) * 60_000)  # the tick of minute m hands off bucket m + LOOK_AHEAD_MINUTES
        counter.calls.clear()
        counter.items_read = 0
        result = stack.tick_fn.invoke({"segment": 0})
        assert result["dispatched"] == due, result
    return {"far": far_jobs, "due": due, "dispatched": result["dispatched"], "items_read": counter.items_read,
            "read_requests": counter.total("dynamodb", READ_OPS), "requests": sum(counter.calls.values()),
            "seeding_s": seeding}


def main(argv: list[str] | None = None) -> None:
    use_local_aws()
    quick = "--quick" in (argv or sys.argv[1:])
    plans = [(100, 20), (1000, 20)] if quick else [(10_000, 200), (1_000_000, 200)]
    for flag in argv if argv is not None else sys.argv[1:]:
        if flag.startswith("--far="):  # one size only (seeding a million takes moto about 17 minutes)
            plans = [(int(flag.split("=", 1)[1]), 200)]
    print(f"scale: one tick of segment 0 with many registered far-future jobs, on {machine()}")
    results = [measure(*plan) for plan in plans]
    print_table("One tick, counted", [
        (f"{r['far']:,}", r["due"], r["dispatched"], r["items_read"], r["read_requests"], r["requests"],
         f"{r['seeding_s']:.0f}") for r in results],
        ("registered far-future jobs", "due in bucket", "dispatched", "items read", "read requests",
         "all requests", "seeding s"))
    print("\nThe tick reads only its own due partition (bucket = minute # segment): the counts do not "
          "change with the number of registered jobs.")


if __name__ == "__main__":
    main()
