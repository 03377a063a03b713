"""Lane shares (issue 26, item 4): tenant A's jobs aimed at a partner that answers after 60 s, all
triggered in the same instant as one job of tenant B aimed elsewhere. Printed: B's lateness (its
call minus its trigger) with the lane shares off and on, when A's last job ends, and what the bound
cost in writes and at its hottest key.

The lane is modelled on a fake clock over the real handlers (moto under the strict layer): a
poller hands each batch to a free worker container of the lane, up to `--containers` at once (the
local stack's 8; on AWS, the event source mapping's maximum concurrency), and a container runs one
invocation at a time. A batch holds one record, as triggers sent one by one arrive. The slow
partner holds its call (so its container) until the model has moved the clock `--slow` seconds
past it; nothing sleeps.

`python -m bench lanes [--containers=8] [--slow-jobs=12] [--slow=60] [--percent=50] [--quick]`"""
from __future__ import annotations

import contextlib
import io
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from bench.common import emulator, int_option, machine, print_table, template, use_local_aws

SLOW_URL = "http://slow.partner.test/hook"
FAST_URL = "http://fast.other.test/hook"
# The clock moves in steps of 100 ms for the first seconds after the trigger (B's lateness is
# measured in them), then of a second (A's waves of slow calls and their held-back records).
FINE_STEP_MS = 100
FINE_FOR_MS = 3_000
STEP_MS = 1_000
LANE_ARN = "arn:aws:sqs:us-east-1:123456789012:lane-normal"


@dataclass
class SlowPartner:
    """The target: every call is recorded; a call to the slow partner answers once the model has
    moved the clock `slow_ms` past it."""

    clock: object
    slow_ms: int
    calls: list[tuple[str, str, int]] = field(default_factory=list)  # (tenant, execution id, at ms)
    waiting: dict[object, int] = field(default_factory=dict)  # a call held → when it answers
    changed: threading.Condition = field(default_factory=threading.Condition)

    def invoke(self, job, dispatch, attempt, callback_token=None, progress=None):
        from jobsched.domain.executions import AttemptOutcome, ExecutionStatus

        now = self.clock.now_ms()
        with self.changed:
            self.calls.append((job.tenant_id, dispatch.execution_id, now))
            if job.spec.target.config.get("url") == SLOW_URL:
                call = object()
                self.waiting[call] = now + self.slow_ms
                self.changed.notify_all()
                self.changed.wait_for(lambda: call not in self.waiting)
        return AttemptOutcome(True, ExecutionStatus.SUCCEEDED)

    def answer_due(self) -> None:
        with self.changed:
            for call, at in list(self.waiting.items()):
                if at <= self.clock.now_ms():
                    del self.waiting[call]
            self.changed.notify_all()


@dataclass
class Figures:
    b_late_ms: int | None  # B's call minus its trigger; None: not called within the horizon
    a_done_s: float | None  # when A's last execution ended, after the trigger; None: not all ended
    a_succeeded: int
    a_attempts: int  # attempts recorded over A's executions (a record held back uses none)
    a_held: int  # A's executions that were held back at least once (they show throttledMs)
    lane_wcu: float  # write units billed on the lane-share slot items
    lane_peak_wcu: float  # the most write units one lane-share key took in one second


def run(stack, key_a: str, key_b: str, *, containers: int, slow_jobs: int, slow_s: int, percent: int,
        horizon_s: int) -> Figures:
    """A's jobs and B's job created, then triggered at one instant (B's last, behind A's in the
    lane), then the lane model run for up to `horizon_s` seconds of the fake clock."""
    from jobsched.domain.lane_shares import format_caps
    from jobsched.handlers import worker
    from jobsched.local.events import Function, sqs_event
    from jobsched.settings import Env

    clock = stack.clock
    target = SlowPartner(clock, slow_s * 1000)
    env = {**stack.envs["worker"], Env.LANE_CAPS: format_caps({lane: containers for lane in ("HIGH", "NORMAL", "LOW")}),
           Env.LANE_TENANT_PERCENT: str(percent), Env.LANE_HOST_PERCENT: str(percent)}
    idle = [Function("worker", worker.make_handler(env, clock, stack.session, target)) for _ in range(containers)]
    jobs = [(key_a, _create(stack, key_a, f"a{n}", SLOW_URL, slow_s + 30)) for n in range(slow_jobs)]
    jobs.append((key_b, _create(stack, key_b, "b", FAST_URL, 30)))
    triggered_ms = clock.now_ms()
    tenant_of = {}
    for key, job_id in jobs:
        status, body = stack.request("POST", f"/v1/jobs/{job_id}/trigger", key=key)
        assert status == 202, body
        tenant_of[body["executionId"]] = "A" if key == key_a else "B"
    lane_before = _lane_use(stack)
    url = stack.envs["worker"][Env.LANE_URL[_normal()]]
    running: dict[Future, tuple] = {}  # an invocation under way → (its container, its messages)
    pool = ThreadPoolExecutor(max_workers=containers, thread_name_prefix="container")

    def finished(_future) -> None:
        with target.changed:
            target.changed.notify_all()

    def settle() -> None:
        """Wait (not sleep) until every invocation still running waits on the slow partner."""
        with target.changed:
            settled = target.changed.wait_for(
                lambda: sum(1 for f in running if not f.done()) == len(target.waiting), timeout=60)
        assert settled, "the lane model did not settle"
        for future in [f for f in running if f.done()]:
            answer = future.result()  # an invocation that raised fails the run
            fn, messages = running.pop(future)
            idle.append(fn)
            # What the event source mapping does: the records not reported failed are deleted.
            failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
            for message in messages:
                if message["MessageId"] not in failed:
                    stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    def ended(execution_id: str):
        record = stack.stores.executions.get(execution_id.split(".")[0], execution_id)
        return record if record is not None and record.status.value in ("SUCCEEDED", "DEAD") else None

    try:
        while clock.now_ms() <= triggered_ms + horizon_s * 1000:
            target.answer_due()
            settle()
            while idle:
                messages = stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1).get("Messages", [])
                if not messages:
                    break
                fn = idle.pop()
                future = pool.submit(fn.invoke, sqs_event(messages, LANE_ARN))
                future.add_done_callback(finished)
                running[future] = (fn, messages)
                settle()
            if not running and all(ended(e) for e in tenant_of):
                break
            fine = clock.now_ms() < triggered_ms + FINE_FOR_MS
            clock.set_ms(clock.now_ms() + (FINE_STEP_MS if fine else STEP_MS))
    finally:
        with target.changed:  # whatever still waits answers now, so no thread outlives the model
            target.waiting.clear()
            target.changed.notify_all()
        pool.shutdown(wait=True)
    b_calls = [at for tenant, execution, at in target.calls if tenant_of.get(execution) == "B"]
    a_ended = [r for r in (ended(e) for e, t in tenant_of.items() if t == "A") if r is not None]
    a_all = [stack.stores.executions.get(e.split(".")[0], e) for e, t in tenant_of.items() if t == "A"]
    wcu, peak = _lane_use(stack)
    return Figures(
        b_late_ms=b_calls[0] - triggered_ms if b_calls else None,
        a_done_s=(max(r.finished_ms for r in a_ended) - triggered_ms) / 1000 if len(a_ended) == slow_jobs else None,
        a_succeeded=sum(1 for r in a_ended if r.status.value == "SUCCEEDED"),
        a_attempts=sum(r.attempt for r in a_all if r is not None),
        a_held=sum(1 for r in a_all if r is not None and r.throttled_ms),
        lane_wcu=wcu - lane_before[0], lane_peak_wcu=peak)


def _normal():
    from jobsched.domain.jobs import Priority

    return Priority.NORMAL


def _create(stack, key: str, name: str, url: str, timeout_s: int) -> str:
    status, body = stack.request("POST", "/v1/jobs", {
        "name": name, "type": "DELAYED", "delaySeconds": 86_400, "timeoutSec": timeout_s,
        "target": {"type": "HTTP", "url": url}}, key=key)
    assert status == 201, body
    return body["jobId"]


def _lane_use(stack) -> tuple[float, float]:
    """(write units, the peak in one second on one key) over the lane-share slot items so far."""
    lane = [use for key, use in stack.strict.report().hottest if "lanetenant#" in key or "lanehost#" in key]
    return sum(u.write_units for u in lane), max((u.peak_wcu for u in lane), default=0.0)


def main(argv: list[str] | None = None) -> None:
    use_local_aws()
    flags = argv or []
    quick = "--quick" in flags
    containers = int_option(flags, "containers", 8)
    slow_jobs = int_option(flags, "slow-jobs", 12)
    slow_s = int_option(flags, "slow", 10 if quick else 60)
    percent = int_option(flags, "percent", 50)
    from jobsched.domain.clock import FakeClock
    from jobsched.domain.lane_shares import share_of
    from jobsched.domain.schedule import parse_instant
    from jobsched.local.inprocess import InProcessStack

    print(f"lanes: tenant A's {slow_jobs} jobs on a partner answering after {slow_s} s and tenant B's one job, "
          f"triggered together; a lane of {containers} containers, batches of 1; on {machine()}")
    rows = []
    for label, share in (("lane shares off", 0), (f"lane shares {percent}% ({share_of(containers, percent)} "
                                                  f"of {containers} per tenant and per host)", percent)):
        clock = FakeClock(parse_instant("2030-01-01T00:00:05Z", "start"))
        with emulator(clock), contextlib.redirect_stdout(io.StringIO()):  # the EMF lines: not ours to print
            stack = InProcessStack(template(), clock, keys={"tenant-a": "key-a", "tenant-b": "key-b"})
            figures = run(stack, "key-a", "key-b", containers=containers, slow_jobs=slow_jobs, slow_s=slow_s,
                          percent=share, horizon_s=10 * slow_s)
        rows.append((label, "-" if figures.b_late_ms is None else f"{figures.b_late_ms:,}",
                     "-" if figures.a_done_s is None else f"{figures.a_done_s:.1f}",
                     f"{figures.a_succeeded}/{slow_jobs}", figures.a_attempts, figures.a_held,
                     f"{figures.lane_wcu:g}", f"{figures.lane_peak_wcu:g}"))
    print_table("B's lateness beside a slow partner of A (modelled lane, real handlers, fake clock)", rows,
                ("run", "B late ms", "A's last end s", "A succeeded", "A attempts", "A held back",
                 "lane-share WCU", "peak WCU/key/s"))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
