"""Our own CPU per handed-off timer (the tick) and per executed job (the worker, the target call
excluded), boto3 included and AWS excluded.

The worker runs what the deployed tick sends it: the fires of a segment's second as packs (lane
messages of up to 100 entries, built by the real LaneQueues.send: domain/packs.py packs_of), at the
pack fill bench/pack_fill.py gives a deployment at 10,000 a second on the deployed template's
segments (`--fill=N` for another), through handlers/worker.py's pack path (service/packs.py). Beside
them, messages of one dispatch, the per-execution path production still takes for the fires a
writer sends alone (a job's first minutes, a one-time job due within minutes), retries and triggers.

The real handlers run against AWS answered at once in-process (bench/instant_aws.py): boto3
builds, signs and parses every request as it would in Lambda, and the CPU spent making the
answers is measured and subtracted. Beside each figure, the floor: the very requests the run made
(captured from the wire) replayed through a bare low-level boto3 client, which is what those
calls cost whatever code made them.

The process is pinned to one core (bench/common.py one_core): Lambda gives the tick one vCPU and
the worker less than one.

`--target-calls` adds the worker on packs whose jobs send to one SQS queue, their target calls made
and measured: one SendMessage each, and SendMessageBatch of ten (batched target calls).

`python -m bench cpu [--timers=N] [--jobs=N] [--repeat=N] [--fill=N] [--target-calls] [--all-cores]`"""
from __future__ import annotations

import hashlib

import contextlib
import io
import logging
import sys
import time
from typing import Iterator

import boto3
from boto3.dynamodb.types import TypeSerializer
from botocore import xform_name

from bench.common import int_option, machine, one_core, print_table, use_local_aws
from bench.instant_aws import InstantAws

TABLES = {"Jobs": ("tenantId", "jobId"), "Timers": ("bucket", "sk"), "Executions": ("jobId", "executionId"),
          "Segments": ("segment",), "ApiKeys": ("keyHash",)}
LANES = {"HIGH": "lane-high", "NORMAL": "lane-normal", "LOW": "lane-low"}
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/{}"
SEGMENTS = 20
MINUTE = 31_557_600  # 2030-01-01T00:00Z, in minutes
DISPATCH_KEY = "ab" * 32
TARGET_QUEUE = QUEUE_URL.format("tenant-inbox")
# The bounds, on this machine (ms of our CPU, boto3 included).
BOUND_TICK_MS = 0.25
BOUND_WORKER_MS = 1.5
_SERIALIZER = TypeSerializer()


def env(segments: int = SEGMENTS) -> dict[str, str]:
    from jobsched.settings import Env

    env = {Env.JOBS_TABLE: "Jobs", Env.TIMERS_TABLE: "Timers", Env.EXECUTIONS_TABLE: "Executions",
           Env.SEGMENTS_TABLE: "Segments", Env.API_KEYS_TABLE: "ApiKeys", Env.SEGMENTS: str(segments),
           Env.ALLOW_PRIVATE_TARGETS: "true", Env.EXECUTION_RETENTION_DAYS: "30",
           Env.TARGETS_ROLE_ARN: "arn:aws:iam::123456789012:role/targets", Env.TARGET_ACCOUNT: "123456789012",
           Env.ATTEMPT_LOG_PERCENT: "1"}  # as deployed (infra's attemptLogPercent)
    for priority, variable in Env.LANE_URL.items():
        env[variable] = QUEUE_URL.format(LANES[priority.value])
    return env


def _wire(item: dict) -> dict:
    return {k: _SERIALIZER.serialize(v) for k, v in item.items()}


def _job_id(n: int) -> str:
    """As new_job_id makes them: the shard mark and 19 random hex digits after the time (made from
    n, so every run has the same jobs). Not zeros: a timer pack's compression would make its items
    too small."""
    return f"job_{n:012x}k{hashlib.sha256(str(n).encode()).hexdigest()[:19]}"


def _job(job_id: str, index: int, due: int, recurring: bool, queue: bool = False):
    """`queue`: the job sends to the tenant's SQS queue (TARGET_QUEUE), else it calls a webhook."""
    from jobsched.domain.jobs import Job, JobSpec, JobState, Target, TargetType
    from jobsched.domain.schedule import one_time_schedule, rate_schedule

    created = due - 3_600_000
    schedule = rate_schedule("PT1H", created) if recurring else one_time_schedule(due)
    target = Target(TargetType.SQS, {"queueUrl": TARGET_QUEUE}) if queue else \
        Target(TargetType.HTTP, {"url": "https://example.com/hook", "method": "POST"})
    spec = JobSpec(name=f"bench-{index}", schedule=schedule, target=target, payload={"n": index, "report": "daily"})
    return Job("tenant-bench", job_id, spec, JobState.ACTIVE, 1, 1, created, created)


def jobs_of_segment(count: int, segment: int = 0, segments: int = SEGMENTS, recurring: bool = True) -> list:
    """`count` (job, due instant) of one segment, each due in the bucket MINUTE + 2."""
    from jobsched.domain.timers import segment_of

    jobs, n = [], 0
    while len(jobs) < count:
        job_id = _job_id(n)
        n += 1
        if segment_of(job_id, segments) != segment:
            continue
        due = (MINUTE + 2) * 60_000 + (len(jobs) * 997) % 60_000
        jobs.append((_job(job_id, len(jobs), due, recurring), due))
    return jobs


def packed_jobs(count: int, fill: int, recurring: bool = True, segments: int = SEGMENTS, queue: bool = False) -> list:
    """`count` (job, due instant) due in the bucket MINUTE + 2, segment after segment, `fill` of them
    in each second of a segment's minute (the last second used may hold fewer): the tick's hand-off
    sends each (segment, second) as one pack of `fill` entries."""
    from jobsched.domain.timers import segment_of

    per_segment = 60 * fill
    if not 1 <= fill <= 100 or count > segments * per_segment:
        raise ValueError(f"{count} jobs at {fill} a pack do not fit {segments} segments' minute")
    used = -(-count // per_segment)  # the segments the jobs fill, the first ones
    ids: dict[int, list[str]] = {s: [] for s in range(used)}
    n = 0
    while sum(min(len(v), per_segment) for v in ids.values()) < count:
        job_id = _job_id(n)
        n += 1
        if segment_of(job_id, segments) < used:
            ids[segment_of(job_id, segments)].append(job_id)
    jobs = []
    for segment in range(used):
        for k, job_id in enumerate(ids[segment][:min(per_segment, count - len(jobs))]):
            due = (MINUTE + 2) * 60_000 + k // fill * 1000 + len(jobs) * 997 % 1000
            jobs.append((_job(job_id, len(jobs), due, recurring, queue), due))
    return jobs


def tick_messages(jobs: list, recurring: bool, alone: bool = False, segments: int = SEGMENTS) -> list[str]:
    """The lane message bodies the tick's hand-off sends for these fires: each a FIRE dispatch as
    HandOff makes a timer's (`alone`: as its writer sends it, on the per-execution path), through
    the real LaneQueues.send, which packs a (segment, due second)'s packable ones (domain/packs.py)
    and seals each message."""
    from jobsched.domain.clock import FakeClock
    from jobsched.domain.executions import Dispatch, DispatchKind, execution_id_for
    from jobsched.domain.jobs import Priority
    from jobsched.domain.packs import snapshot_of
    from jobsched.domain.timers import segment_of
    from jobsched.store.queues import LaneQueues, Outgoing

    class Captured:
        def __init__(self) -> None:
            self.bodies: list[str] = []

        def send_message_batch(self, QueueUrl, Entries):  # noqa: N803 - boto3's names
            self.bodies.extend(e["MessageBody"] for e in Entries)
            return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}

    sqs = Captured()
    lanes = LaneQueues(sqs, {p: QUEUE_URL.format(LANES[p.value]) for p in Priority}, FakeClock(MINUTE * 60_000),
                       lambda: bytes.fromhex(DISPATCH_KEY), parallelism=1)
    lanes.segment_of = lambda job_id: segment_of(job_id, segments)
    # Each packed fire carries its job's item as the tick read it (job snapshots), as the tick sends it.
    lanes.send([Outgoing(Priority.NORMAL, Dispatch(DispatchKind.FIRE, job.tenant_id, job.job_id,
                                                   execution_id_for(job.job_id, due), due, job.generation,
                                                   run=1 if recurring else None, solo=alone,
                                                   snapshot=None if alone else snapshot_of(job, job.to_item())), due)
                for job, due in jobs])
    return sqs.bodies


def instant_aws(jobs: list, with_timers: bool, segment: int = 0) -> InstantAws:
    from jobsched.domain.timers import Timer, TimerKind

    aws = InstantAws(TABLES)
    aws.put("Segments", _wire({"segment": -1, "dispatchKey": DISPATCH_KEY}))
    # Bucket MINUTE + 1 is done: the tick of MINUTE + 1 hands off bucket MINUTE + 2 (whatever the
    # look-ahead, the watermark makes it the one bucket to do).
    aws.put("Segments", _wire({"segment": segment, "claimedThrough": MINUTE + 1, "doneThrough": MINUTE + 1}))
    for job, due in jobs:
        aws.put("Jobs", _wire(job.to_item()))
        if with_timers:
            aws.put("Timers", _wire(Timer(due, TimerKind.FIRE, job.tenant_id, job.job_id, 1, segment).to_item()))
    aws.seal()
    return aws


class _Sink(io.StringIO):
    """stdout while measuring: EMF metric lines are printed, as in Lambda, and dropped."""

    def write(self, text: str) -> int:
        return len(text)


@contextlib.contextmanager
def lambda_logging() -> Iterator[None]:
    """The functions log at INFO, as deployed (one line per tick, and per attempt at the deployed
    attemptLogPercent: see env()), to stdout, as in Lambda; here the lines go nowhere (formatting
    them still counts)."""
    import jobsched.handlers.tick  # noqa: F401 - creates the loggers
    import jobsched.handlers.worker  # noqa: F401

    loggers = [logging.getLogger(name) for name in ("jobsched-tick", "jobsched-worker")]
    levels = [lg.level for lg in loggers]
    handlers = [h for lg in loggers for h in lg.handlers if isinstance(h, logging.StreamHandler)]
    streams = [h.stream for h in handlers]
    for handler in handlers:
        handler.stream = _Sink()  # (not setStream: it flushes the old one, which may be closed)
    for lg in loggers:
        lg.setLevel(logging.INFO)
    try:
        yield
    finally:
        for handler, stream in zip(handlers, streams):
            handler.stream = stream
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def measure(aws: InstantAws, run) -> tuple[float, float]:
    """(our CPU seconds, AWS-answer CPU seconds) of run(); stdout dropped meanwhile."""
    stdout, sys.stdout = sys.stdout, _Sink()
    try:
        aws.cpu_s = 0.0
        started = time.process_time()
        run()
        total = time.process_time() - started
    finally:
        sys.stdout = stdout
    return total - aws.cpu_s, aws.cpu_s


def _floor(aws: InstantAws, recorded: list[tuple[str, str, dict]], config=None) -> float:
    """CPU of the same requests through a bare low-level client (answers subtracted): boto3's
    defaults, or the configuration our functions use (store/aws.py)."""
    session = boto3.session.Session(region_name="us-east-1")
    aws.attach(session)
    clients = {s: session.client(s, config=config) for s in {s for s, _, _ in recorded}}
    calls = [(getattr(clients[s], xform_name(op)), params) for s, op, params in recorded]
    for call, params in calls[:20]:  # warm the clients (first use loads models)
        call(**params)

    def replay():
        for call, params in calls:
            call(**params)

    ours, _ = measure(aws, replay)
    return ours


def _lean_config():
    from jobsched.store.aws import _CONFIG

    return _CONFIG


def tick_cpu(timers: int, repeat: int) -> dict:
    from jobsched.domain.clock import FakeClock
    from jobsched.handlers import tick
    from jobsched.local.events import LambdaContext

    jobs = jobs_of_segment(timers)
    aws = instant_aws(jobs, with_timers=True)
    session = boto3.session.Session(region_name="us-east-1")
    aws.attach(session)
    clock = FakeClock((MINUTE + 1) * 60_000 + 5_000)
    handler = tick.make_handler(env(), clock, session)
    context = LambdaContext("jobsched-tick")
    result: dict = {}
    measure(aws, lambda: result.update(handler({"segment": 0}, context)))  # warm: clients, models, the key
    assert result["dispatched"] == timers, result
    best = None
    for _ in range(repeat):
        aws.calls.clear()
        aws.recording = []
        ours, answering = measure(aws, lambda: handler({"segment": 0}, context))
        if best is None or ours < best[0]:
            best = (ours, answering, dict(aws.calls), aws.recording)
        aws.recording = None
    ours, answering, calls, recorded = best
    floor, lean = _floor(aws, recorded), _floor(aws, recorded, _lean_config())
    return {"what": "tick: per handed-off timer", "count": timers, "ours_ms": 1000 * ours / timers,
            "floor_ms": 1000 * floor / timers, "lean_ms": 1000 * lean / timers,
            "answering_ms": 1000 * answering / timers, "calls": calls,
            "bound_ms": BOUND_TICK_MS}


def worker_cpu(count: int, recurring: bool, repeat: int, fill: int | None, target_calls: str | None = None) -> dict:
    """The worker's CPU per executed job on what the tick sends: packs of `fill` entries, or with
    `fill` None messages of one dispatch each (sent alone: the per-execution path). `target_calls`: the jobs
    send to one SQS queue of their tenant and the target calls are made and measured too, through
    the real AWS invoker, "batched" (SendMessageBatch of ten, as deployed) or "single" (one
    SendMessage each, as before batched target calls)."""
    from jobsched.domain.clock import FakeClock
    from jobsched.domain.executions import AttemptOutcome, ExecutionStatus
    from jobsched.handlers import worker
    from jobsched.local.events import LambdaContext, sqs_event

    class Succeeds:
        """The target call, excluded: it answers at once."""

        def invoke(self, job, dispatch, attempt, callback_token=None, progress=None):
            return AttemptOutcome(True, ExecutionStatus.SUCCEEDED)

    jobs = packed_jobs(count, fill, recurring, queue=target_calls is not None) if fill else \
        jobs_of_segment(count, recurring=recurring)
    aws = instant_aws(jobs, with_timers=False)
    session = boto3.session.Session(region_name="us-east-1")
    aws.attach(session)
    invoker = Succeeds() if target_calls is None else sqs_invoker(session, batched=target_calls == "batched")
    bodies = tick_messages(jobs, recurring, alone=not fill)
    messages = [{"MessageId": f"m{i}", "ReceiptHandle": f"r{i}", "Body": body,
                 "Attributes": {"ApproximateReceiveCount": "1"}} for i, body in enumerate(bodies)]
    arn = f"arn:aws:sqs:us-east-1:123456789012:{LANES['NORMAL']}"
    events = [sqs_event(messages[i:i + worker.BATCH_SIZE], arn) for i in range(0, len(messages), worker.BATCH_SIZE)]
    # Every job is due before now: no precision wait, no sleeping in the measurement.
    clock = FakeClock((MINUTE + 3) * 60_000)
    handler = worker.make_handler(env(), clock, session, invoker=invoker)
    context = LambdaContext("jobsched-worker")

    def run():
        for event in events:
            answer = handler(event, context)
            assert not answer["batchItemFailures"], answer

    measure(aws, run)  # warm
    best = None
    for _ in range(repeat):
        aws.calls.clear()
        aws.recording = []
        ours, answering = measure(aws, run)
        if best is None or ours < best[0]:
            best = (ours, answering, dict(aws.calls), aws.recording)
        aws.recording = None
    ours, answering, calls, recorded = best
    floor, lean = _floor(aws, recorded), _floor(aws, recorded, _lean_config())
    kind = "recurring" if recurring else "one-time"
    path = (f"packs of {len(jobs) / len(bodies):.1f}, as the tick sends them" if fill else
            "messages of one: fires sent alone, retries, triggers")
    if target_calls is not None:
        path += ("; their SQS target called, " +
                 ("SendMessageBatch of ten" if target_calls == "batched" else "one SendMessage each"))
    return {"what": f"worker: per executed job ({kind}, {path})", "count": count, "ours_ms": 1000 * ours / count,
            "floor_ms": 1000 * floor / count, "lean_ms": 1000 * lean / count,
            "answering_ms": 1000 * answering / count, "calls": calls,
            "bound_ms": BOUND_WORKER_MS, "messages": len(bodies)}


def sqs_invoker(session, batched: bool):
    """The deployed target router's AWS half, in the worker's own session (the tenant sessions'
    AssumeRole is not what is measured); `batched` False: its calls one by one."""
    from jobsched.adapters.targets import TargetRouter
    from jobsched.store.targets import AwsTargetInvoker

    class OneByOne(TargetRouter):
        def batch_key(self, job):
            return None

    return (TargetRouter if batched else OneByOne)(None, AwsTargetInvoker(session))


def deployed_fill(flags: list[str]) -> tuple[int, str]:
    """The worker's pack fill: `--fill=N`, or bench/pack_fill.py's for a deployment running 10,000
    recurring fires a second on the deployed template's segments."""
    given = int_option(flags, "fill", 0)
    if given:
        return given, "--fill"
    from bench.common import deployed_template
    from bench.cost_prices import template_segments
    from bench.pack_fill import steady_pack_fill

    segments = template_segments(deployed_template())
    fill = steady_pack_fill(10_000, segments)
    return max(1, round(fill)), (f"bench/pack_fill.py: {fill:.1f} at 10,000 a second, steady, on the deployed "
                                 f"template's {segments} segments")


def main(argv: list[str] | None = None) -> None:
    flags = argv if argv is not None else sys.argv[1:]
    use_local_aws()
    quick = "--quick" in flags
    timers = int_option(flags, "timers", 500 if quick else 5_000)
    count = int_option(flags, "jobs", 100 if quick else 2_000)
    repeat = int_option(flags, "repeat", 1 if quick else 3)
    from jobsched.settings import WORKER_BATCH_SIZE

    fill, source = deployed_fill(flags)
    print(f"cpu: our CPU per timer and per job, AWS answered in-process, on {machine()}")
    print(f"(best of {repeat}; {timers} timers in one bucket; {count} jobs in packs of {fill} ({source}), "
          f"and as messages of one; the worker's events of up to {WORKER_BATCH_SIZE} messages, as the lanes' "
          "mappings deliver them)")
    with one_core(flags) as where, lambda_logging():
        print(f"measured on {where}")
        results = [tick_cpu(timers, repeat)] + [worker_cpu(count, recurring, repeat, f)
                                                for f in (fill, None) for recurring in (True, False)]
        if "--target-calls" in flags:
            results += [worker_cpu(count, True, repeat, fill, how) for how in ("single", "batched")]
    print_table("Our CPU (ms), boto3 included, AWS's answers excluded", [
        (r["what"], r["count"], f"{r['ours_ms']:.3f}", f"{r['floor_ms']:.3f}", f"{r['lean_ms']:.3f}",
         f"{r['ours_ms'] - r['lean_ms']:.3f}", f"{r['ours_ms'] / r['lean_ms']:.2f}x", f"{r['bound_ms']:.2f}",
         "met" if r["ours_ms"] <= r["bound_ms"] else "MISSED", f"{r['answering_ms']:.3f}")
        for r in results], ("measure", "n", "ours ms", "floor ms (boto3 defaults)", "floor ms (our config)",
                            "ours above it", "ours / floor", "bound", "", "answers ms"))
    print("floor: the same requests (the pack path's, the per-execution path's) replayed through a bare\n"
          "low-level client; answers ms: CPU spent making AWS's answers in-process, already subtracted\n"
          "from every other column; ours / floor: against the floor with our config.")
    for r in results:
        per = ", ".join(f"{op} {n / r['count']:.3f}" for (_, op), n in sorted(r["calls"].items()))
        print(f"  {r['what']}: calls per item: {per}")


if __name__ == "__main__":
    main()
