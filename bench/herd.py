"""The herd minute: one segment's bucket of 30,000 timers (10,000 jobs/s over 20 segments), and
1,000,000 timers due in one minute across the segments the sizing rule picks.

Each segment's tick runs for real against AWS answered in-process (bench/instant_aws.py): our
CPU is measured, every call is counted, and the hand-off time on AWS is modelled from the counts
with the code's own parallelism and typical in-region latencies, at the tick's vCPU share in
Lambda, and against DynamoDB's write limit per partition (the next timers of a herd land in one
bucket of their segment, spread over its TIMER_SLICES partitions).

Pinned to one core, as the tick has one vCPU (bench/common.py one_core).

`python -m bench herd [--timers=N] [--million=N] [--quick] [--all-cores]`"""
from __future__ import annotations

import math
import sys
import time

import boto3

from bench.common import int_option, machine, one_core, print_table, use_local_aws
from jobsched.sizing import SEND_BATCH_MS

# Typical in-region latencies (ms) per call; every wave of parallel calls costs one latency.
LATENCY_MS = {"Query": 10, "BatchGetItem": 10, "BatchWriteItem": 15, "SendMessageBatch": SEND_BATCH_MS, "GetItem": 5,
              "UpdateItem": 8, "PutItem": 8}


def run_segment(timers: int, segment: int, segments: int) -> dict:
    """One tick over one bucket of `timers` timers of `segment`: our CPU and the calls made."""
    from bench import cpu
    from jobsched.domain.clock import FakeClock
    from jobsched.handlers import tick
    from jobsched.local.events import LambdaContext

    jobs = cpu.jobs_of_segment(timers, segment, segments)
    aws = cpu.instant_aws(jobs, with_timers=True, segment=segment)
    session = boto3.session.Session(region_name="us-east-1")
    aws.attach(session)
    clock = FakeClock((cpu.MINUTE + 1) * 60_000 + 5_000)
    handler = tick.make_handler(cpu.env(segments), clock, session)
    result: dict = {}
    aws.calls.clear()
    aws.empty_queries = 0
    started = time.perf_counter()
    ours, answering = cpu.measure(aws, lambda: result.update(handler({"segment": segment},
                                                                      LambdaContext("jobsched-tick"))))
    wall = time.perf_counter() - started
    assert result["dispatched"] == timers, result
    return {"timers": timers, "cpu_s": ours, "answering_s": answering, "wall_s": wall,
            "next_timers": result["nextTimers"], "calls": {op: n for (_, op), n in aws.calls.items()},
            "empty_queries": aws.empty_queries}


def partition_peaks(timers: int, segment: int, segments: int):
    """The same hand-off, not measured, under the strict layer's ledger (local/strict_aws/):
    capacity units per partition key over the whole hand-off (the bench's clock stands still)."""
    from bench import cpu
    from jobsched.domain.clock import FakeClock
    from jobsched.handlers import tick
    from jobsched.local import strict_aws
    from jobsched.local.events import LambdaContext

    strict_aws.install()  # before the session's clients are built
    aws = cpu.instant_aws(cpu.jobs_of_segment(timers, segment, segments), with_timers=True, segment=segment)
    session = boto3.session.Session(region_name="us-east-1")
    aws.attach(session)
    clock = FakeClock((cpu.MINUTE + 1) * 60_000 + 5_000)
    layer = strict_aws.StrictAws.billing_only(cpu.TABLES, clock.now_ms)
    previous = strict_aws.activate(layer)
    try:
        cpu.measure(aws, lambda: tick.make_handler(cpu.env(segments), clock, session)({"segment": segment},
                                                                                    LambdaContext("jobsched-tick")))
    finally:
        strict_aws.activate(previous)
    return layer.report()


def print_partition_peaks(report, seconds: float) -> None:
    from jobsched.local.strict_aws import PARTITION_RCU_PER_SECOND, PARTITION_WCU_PER_SECOND

    print(f"\nper partition key over one segment's hand-off (strict layer's ledger), and its rate if the hand-off "
          f"takes the modelled {seconds:.2f} s (limit {PARTITION_WCU_PER_SECOND:,} WCU/s, "
          f"{PARTITION_RCU_PER_SECOND:,} RCU/s per key):")
    for key, use in report.hottest[:6]:
        print(f"  {key}: {use.write_units:,.0f} WCU, {use.read_units:,.0f} RCU -> "
              f"{use.write_units / seconds:,.0f} WCU/s, {use.read_units / seconds:,.0f} RCU/s")


def modelled_seconds(run: dict) -> dict:
    """The hand-off on AWS: pages one after another; within a page the job reads go out in one
    parallel wave, then the sends beside the next-timer writes (the code's own parallelism), then
    the saved position; our CPU at the tick's vCPU share. A herd's next timers land in one bucket,
    TIMER_SLICES partitions, each taking about 1,000 writes a second: `herd_s` is the hand-off at
    that limit, `spread_s` the same hand-off when the next timers fall in many buckets."""
    from jobsched.domain.timers import TIMER_SLICES
    from jobsched.sizing import PARTITION_WRITES_PER_SECOND, TICK_VCPU
    from jobsched.store.dynamo import GET_PARALLELISM, WRITE_PARALLELISM
    from jobsched.store.queues import SEND_PARALLELISM

    calls = dict(run["calls"])
    # A page is a Query that found timers; the empty ones (empty slices) cost one latency each.
    empty = run.get("empty_queries", 0)
    calls["Query"] = calls.get("Query", 0) - empty
    pages = max(1, calls["Query"])

    def per_page(op: str, parallel: int) -> float:
        return math.ceil(calls.get(op, 0) / pages / parallel) * LATENCY_MS[op]

    reads = per_page("Query", 1) + per_page("BatchGetItem", GET_PARALLELISM)
    writes_latency = per_page("BatchWriteItem", WRITE_PARALLELISM)
    next_timers_per_page = run["next_timers"] / pages
    writes_partition = max(writes_latency,
                           1000 * next_timers_per_page / (PARTITION_WRITES_PER_SECOND * TIMER_SLICES))
    sends = per_page("SendMessageBatch", SEND_PARALLELISM)
    small = sum(calls.get(op, 0) * LATENCY_MS[op] for op in ("GetItem", "UpdateItem", "PutItem")) / pages
    cpu = 1000 * run["cpu_s"] / TICK_VCPU / pages

    def page_ms(writes: float) -> float:
        return reads + max(writes, sends) + small + cpu  # the sends go out beside the writes

    empty_s = empty * LATENCY_MS["Query"] / 1000
    return {"io_s": pages * (page_ms(writes_partition) - cpu) / 1000 + empty_s, "cpu_lambda_s": pages * cpu / 1000,
            "herd_s": pages * page_ms(writes_partition) / 1000 + empty_s,
            "spread_s": pages * page_ms(writes_latency) / 1000 + empty_s}


def main(argv: list[str] | None = None) -> None:
    from jobsched.domain.timers import TIMER_SLICES
    from jobsched.sizing import HANDOFF_GOAL_S, TICK_MEMORY_MB, TICK_VCPU, segments_for

    flags = argv if argv is not None else sys.argv[1:]
    use_local_aws()
    quick = "--quick" in flags
    one = int_option(flags, "timers", 600 if quick else 30_000)
    million = int_option(flags, "million", 3_000 if quick else 1_000_000)
    print(f"herd: the herd minute, AWS answered in-process, on {machine()}")
    print(f"model: tick at {TICK_MEMORY_MB} MB = {TICK_VCPU:.2f} vCPU; latencies {LATENCY_MS}")

    from bench.cpu import lambda_logging

    rows = []
    with one_core(flags) as where, lambda_logging():
        print(f"measured on {where}")
        herd = run_segment(one, 0, 20)
        rows.append(("one segment", 1, one, herd))
        segments = segments_for(million)
        per_segment = math.ceil(million / segments)
        total = {"timers": 0, "cpu_s": 0.0, "answering_s": 0.0, "wall_s": 0.0, "next_timers": 0, "calls": {}}
        worst = None
        for segment in range(segments):
            # Every segment gets its share (the last one what is left); they tick in parallel.
            count = min(per_segment, million - segment * per_segment)
            run = run_segment(count, segment, segments)
            total["timers"] += run["timers"]
            total["cpu_s"] += run["cpu_s"]
            total["wall_s"] += run["wall_s"]
            for op, n in run["calls"].items():
                total["calls"][op] = total["calls"].get(op, 0) + n
            if worst is None or modelled_seconds(run)["herd_s"] > modelled_seconds(worst)["herd_s"]:
                worst = run
            print(f"  segment {segment + 1}/{segments}: {count} timers, our CPU {run['cpu_s']:.2f} s", flush=True)
        rows.append((f"{million:,} in one minute", segments, million, worst))
    table = []
    for name, segs, timers, run in rows:
        model = modelled_seconds(run)
        table.append((name, segs, f"{run['timers']:,}", f"{1000 * run['cpu_s'] / run['timers']:.3f}",
                      f"{run['cpu_s']:.2f}", f"{model['io_s']:.2f}", f"{model['cpu_lambda_s']:.2f}",
                      f"{model['herd_s']:.2f}", "met" if model["herd_s"] <= HANDOFF_GOAL_S else "MISSED",
                      f"{model['spread_s']:.2f}"))
    print_table("Hand-off of one segment's bucket on AWS, modelled (the slowest segment for the million)", table,
                ("herd", "segments", "timers/segment", "our CPU ms/timer", "our CPU s", "AWS I/O s",
                 "CPU s in Lambda", "hand-off s", f"goal {HANDOFF_GOAL_S:.0f} s", "if next timers spread s"))
    print_partition_peaks(partition_peaks(one, 0, 20), modelled_seconds(herd)["herd_s"])
    print(f"\nthe million: {total['timers']:,} timers handed off by {segments} ticks, our CPU {total['cpu_s']:.1f} s "
          f"in all; calls: " + ", ".join(f"{op} {n:,}" for op, n in sorted(total["calls"].items())))
    print(f"hand-off: every timer sent to SQS and every next timer written, the next timers at\n"
          f"{TIMER_SLICES} partitions' ~1,000 writes/s each (a herd's next timers share one bucket of their\n"
          f"segment, spread over its slices); 'if next timers spread': the same calls when the next\n"
          f"timers fall in many buckets (jobs of different periods).")


if __name__ == "__main__":
    main()
