"""Tenant fairness: a small tenant's 100 jobs due in the same second as another tenant's herd of
20,000. The tick of the segment hands the bucket off for real (against AWS answered in-process,
bench/instant_aws.py), and every message it sends is captured with its SQS delay. The lane's
workers are then modelled: each second they start up to `--drain` messages (the NORMAL lane's
default cap: 200 invocations of 10 messages, calls of about a second), chosen at random among
the visible ones, as SQS delivers a standard queue's messages in no particular order, their starts
spread evenly over the second. Printed: the small tenant's lateness p50/p99 (start minus due)
alone, beside the herd without fairness, and beside the herd with it; and when the herd's last
job starts.

`python -m bench fairness [--herd=N] [--small=N] [--drain=N] [--share=N] [--quick]`"""
from __future__ import annotations

import contextlib
import io
import json
import random

import boto3

from bench.common import int_option, machine, percentile, print_table, use_local_aws


def tenant_jobs(tenant: str, count: int, due_ms: int, start: int) -> list:
    """`count` one-time jobs of `tenant` in segment 0 of one segment, all due at `due_ms`."""
    from jobsched.domain.jobs import Job, JobSpec, JobState, Target, TargetType
    from jobsched.domain.schedule import one_time_schedule

    jobs = []
    for n in range(start, start + count):
        job_id = f"job_{n:012x}{'0' * 20}"
        spec = JobSpec(name=f"{tenant}-{n}", schedule=one_time_schedule(due_ms),
                       target=Target(TargetType.HTTP, {"url": "https://example.com/hook", "method": "POST"}))
        jobs.append((Job(tenant, job_id, spec, JobState.ACTIVE, 1, 1, due_ms - 3_600_000, due_ms - 3_600_000), due_ms))
    return jobs


def hand_off(jobs: list, share: int) -> list[tuple[str, int, int]]:
    """Run the tick over the bucket; return (tenant, due ms, visible ms) of every message sent."""
    from bench import cpu
    from jobsched.domain.clock import FakeClock
    from jobsched.handlers import tick
    from jobsched.local.events import LambdaContext
    from jobsched.settings import Env

    from jobsched.local import strict_aws

    strict_aws.install()  # before the session's clients are built: the ledger bills every call
    aws = cpu.instant_aws(jobs, with_timers=True, segment=0)
    session = boto3.session.Session(region_name="us-east-1")
    aws.attach(session)
    now_ms = (cpu.MINUTE + 1) * 60_000 + 5_000
    env = {**cpu.env(1), Env.TENANT_FIRES_PER_SECOND: str(share)}
    clock = FakeClock(now_ms)
    handler = tick.make_handler(env, clock, session)
    aws.recording = []
    layer = strict_aws.StrictAws.billing_only(cpu.TABLES, clock.now_ms)
    previous = strict_aws.activate(layer)
    try:
        with cpu.lambda_logging(), contextlib.redirect_stdout(io.StringIO()):  # the EMF lines: not ours to print
            handler({"segment": 0}, LambdaContext("jobsched-tick"))
    finally:
        strict_aws.activate(previous)
    hottest = layer.report().hottest[:3]
    print("  per partition key over the hand-off (the clock stands still): " + "; ".join(
        f"{key} {use.write_units:,.0f} WCU, {use.read_units:,.0f} RCU" for key, use in hottest))
    sent = []
    for service, operation, params in aws.recording:
        if operation != "SendMessageBatch":
            continue
        for entry in params["Entries"]:
            # A lane message is a pack of one or more executions (domain/packs.py); the model
            # starts each execution as its own unit (a pack's entries are called concurrently).
            from jobsched.domain.packs import Pack  # noqa: PLC0415 - as the bench's other jobsched imports

            pack = Pack.from_json(json.loads(entry["MessageBody"])["d"])
            visible = now_ms + int(entry.get("DelaySeconds", 0)) * 1000
            sent.extend((d.tenant_id, d.due_ms, visible) for d in pack.entries)
    assert len(sent) == len(jobs), (len(sent), len(jobs))
    return sent


def drain(sent: list[tuple[str, int, int]], per_second: int, seed: int = 7) -> dict[str, list[int]]:
    """The lane's workers: each second they start up to `per_second` of the visible messages,
    taken at random (SQS standard queues keep no order), their starts spread evenly over the
    second. A message's lateness: its start minus its due instant (a message visible early waits
    for its instant, as the worker does)."""
    rng = random.Random(seed)
    waiting = sorted(sent, key=lambda m: m[2])
    visible: list[tuple[str, int, int]] = []
    lateness: dict[str, list[int]] = {}
    second = waiting[0][2] // 1000 if waiting else 0
    i = 0
    while i < len(waiting) or visible:
        while i < len(waiting) and waiting[i][2] // 1000 <= second:
            visible.append(waiting[i])
            i += 1
        rng.shuffle(visible)
        taken, visible = visible[:per_second], visible[per_second:]
        for n, (tenant, due, _) in enumerate(taken):
            started = second * 1000 + n * 1000 // per_second
            lateness.setdefault(tenant, []).append(max(0, started - due))
        second += 1
    return lateness


def main(argv: list[str] | None = None) -> None:
    use_local_aws()
    flags = argv or []
    quick = "--quick" in flags
    herd = int_option(flags, "herd", 500 if quick else 20_000)
    small = int_option(flags, "small", 20 if quick else 100)
    per_second = int_option(flags, "drain", 200 if quick else 2_000)
    share = int_option(flags, "share", 50 if quick else 1000)
    from bench import cpu

    due = (cpu.MINUTE + 2) * 60_000  # every job due at the same second: the midnight herd
    small_jobs = tenant_jobs("small", small, due, 0)
    herd_jobs = tenant_jobs("herd", herd, due, small)
    print(f"fairness: {small} jobs of a small tenant due in the same second as {herd:,} of a herd; the lane "
          f"starts {per_second:,} a second; fair share {share} a second per tenant; on {machine()}")
    rows = []
    for label, jobs, fair in (("small tenant alone", small_jobs, 0),
                              ("beside the herd, no fairness", small_jobs + herd_jobs, 0),
                              (f"beside the herd, fair share {share}/s", small_jobs + herd_jobs, share)):
        lateness = drain(hand_off(jobs, fair), per_second)
        mine, theirs = lateness.get("small", []), lateness.get("herd", [])
        rows.append((label, len(mine), f"{percentile(mine, 50):.0f}", f"{percentile(mine, 99):.0f}",
                     f"{max(mine):.0f}", f"{max(theirs) / 1000:.1f}" if theirs else "-"))
    print_table("Small tenant's lateness (modelled workers; the tick's hand-off for real)", rows,
                ("run", "small jobs", "p50 ms", "p99 ms", "max ms", "herd's last start s"))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
