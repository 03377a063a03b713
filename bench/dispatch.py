"""Dispatch throughput: one tick over a bucket of due timers, in-process on moto.

Prints dispatches/s, the split of wall time between our code and the emulator's handling of
the calls, the calls made, peak memory added by the tick (flat in bucket size: pages stream),
and the hand-off time modelled on AWS latencies from the measured call counts."""
from __future__ import annotations

import sys
import time
import tracemalloc

import boto3

from bench.common import CallCounter, emulator, machine, print_table, template, use_local_aws
from jobsched.service.handoff import LOOK_AHEAD_MINUTES
from jobsched.store.queues import SEND_PARALLELISM

# Typical in-region latencies (ms) per call, for the model: DynamoDB single-digit ms per request
# (AWS: "single-digit millisecond performance"), SQS SendMessageBatch tens of ms.
MODEL_LATENCY_MS = {("dynamodb", "Query"): 10, ("dynamodb", "BatchGetItem"): 10, ("dynamodb", "BatchWriteItem"): 15,
                    ("dynamodb", "GetItem"): 5, ("dynamodb", "UpdateItem"): 8, ("dynamodb", "PutItem"): 8,
                    ("sqs", "SendMessageBatch"): 20}


def seed_bucket(stack, minute: int, count: int, segment: int = 0) -> None:
    """`count` recurring jobs of one segment, each with its FIRE timer due in `minute`."""
    from jobsched.domain.jobs import Job, JobSpec, JobState, Target, TargetType
    from jobsched.domain.schedule import rate_schedule
    from jobsched.domain.timers import Timer, TimerKind, segment_of

    resource = stack.session.resource("dynamodb")
    jobs_table = resource.Table(stack.settings.jobs_table)
    timers_table = resource.Table(stack.settings.timers_table)
    made, n = 0, 0
    with jobs_table.batch_writer() as jobs, timers_table.batch_writer() as timers:
        while made < count:
            job_id = f"job_{n:012x}{'0' * 20}"
            n += 1
            if segment_of(job_id, stack.settings.segments) != segment:
                continue
            due = minute * 60_000 + (made * 997) % 60_000
            spec = JobSpec(name=f"bench-{made}", schedule=rate_schedule("PT1H", due - 3_600_000),
                           target=Target(TargetType.HTTP, {"url": "http://127.0.0.1:9/x", "method": "POST"}),
                           payload={"n": made})
            job = Job("bench", job_id, spec, JobState.ACTIVE, 1, 1, due - 3_600_000, due - 3_600_000)
            jobs.put_item(Item=job.to_item())
            timers.put_item(Item=Timer(due, TimerKind.FIRE, "bench", job_id, 1, segment).to_item())
            made += 1


def measure(size: int) -> dict:
    from jobsched.domain.clock import FakeClock
    from jobsched.local.inprocess import InProcessStack

    start_minute = 31_557_600  # 2030-01-01T00:00Z
    clock = FakeClock(start_minute * 60_000 + 1_000)
    counter = CallCounter()
    with emulator(clock, counter):
        session = boto3.session.Session(region_name="us-east-1")
        counter.attach(session)
        stack = InProcessStack(template(), clock, session=session)
        seed_bucket(stack, start_minute + 1 + LOOK_AHEAD_MINUTES, size)
        clock.set_ms((start_minute + 1) * 60_000)  # the tick of minute m hands off bucket m + LOOK_AHEAD_MINUTES
        for segment in range(1, stack.settings.segments):
            stack.tick_fn.invoke({"segment": segment})
        counter.calls.clear()
        counter.emulator_seconds = 0.0
        tracemalloc.start()
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        counter.timing = True
        started = time.perf_counter()
        result = stack.tick_fn.invoke({"segment": 0})
        wall = time.perf_counter() - started
        counter.timing = False
        assert result["dispatched"] == size, result
        after, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    dispatched = result["dispatched"]
    modeled_ddb = sum(n * MODEL_LATENCY_MS.get(k, 10) for k, n in counter.calls.items() if k[0] == "dynamodb")
    sends = counter.calls[("sqs", "SendMessageBatch")]
    modeled = modeled_ddb + sends * MODEL_LATENCY_MS[("sqs", "SendMessageBatch")] / SEND_PARALLELISM
    return {"size": size, "dispatched": dispatched, "wall": wall, "emulator": counter.emulator_seconds,
            "calls": dict(counter.calls), "modeled_s": modeled / 1000,
            # What the emulator keeps (the messages and timers it now stores) grows with the bucket;
            # the rest of the peak is what the tick held at once: flat when pages stream.
            "retained_mb": (after - before) / 2**20, "transient_mb": (peak - after) / 2**20}


def main(argv: list[str] | None = None) -> None:
    use_local_aws()
    quick = "--quick" in (argv or sys.argv[1:])
    # (moto recomputes queue attributes over every queued message on each send: its SQS time grows
    # with the square of the bucket, so the emulator caps these sizes, not our code)
    sizes = [200] if quick else [1000, 2500, 5000]
    print(f"dispatch: one tick over a bucket of due timers (in-process moto) on {machine()}")
    results = [measure(size) for size in sizes]
    print_table("Dispatch throughput", [
        (r["size"], r["dispatched"], f"{r['wall']:.2f}", f"{r['dispatched'] / r['wall']:.0f}",
         f"{r['emulator']:.2f} ({100 * r['emulator'] / r['wall']:.0f}%)",
         f"{r['wall'] - r['emulator']:.2f} ({100 * (r['wall'] - r['emulator']) / r['wall']:.0f}%)",
         f"{r['transient_mb']:.1f}", f"{r['retained_mb']:.1f}", f"{r['modeled_s']:.2f}")
        for r in results],
        ("timers", "dispatched", "wall s", "dispatches/s", "emulator s", "our code s", "transient peak MB",
         "kept by emulator MB", "AWS model s"))
    big = results[-1]
    print_table(f"Calls made by the tick for {big['size']} timers", sorted(
        ((f"{s}:{op}", n, f"{n / big['size']:.3f}") for (s, op), n in big["calls"].items())),
        ("call", "count", "per timer"))
    print(f"\nAWS model: DynamoDB calls in sequence at {MODEL_LATENCY_MS[('dynamodb', 'Query')]}-15 ms each, "
          f"SendMessageBatch at {MODEL_LATENCY_MS[('sqs', 'SendMessageBatch')]} ms with {SEND_PARALLELISM} in flight "
          "(a conservative model: `bench herd` models the parallel job reads and next-timer writes too).")


if __name__ == "__main__":
    main()
