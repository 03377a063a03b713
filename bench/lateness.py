"""Lateness in the local stack, on the wall clock: jobs due at second-precise instants, a local
HTTP endpoint that records arrival, and the figures that matter: count, missed, duplicated,
lateness p50/p95/p99/max. By default: 50 jobs/s for two minutes created as a client would (at the
tenant's create quota, `--client` alone), then on a stack without quotas 50 jobs/s for two
minutes, the same for 30 s without the worker's sub-second wait, then 75, 100 and 150 jobs/s for
30 s while p99 <= 1 s. `--client --clients=N`: N connections creating (16)."""
from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
import sys
import threading
import time
import urllib.error
import urllib.request

from bench.common import NO_QUOTAS, machine, percentile, print_table, use_local_aws

P99_LIMIT_MS = 1000
GOAL_RATE = 50  # one-time jobs a second the local stack must sustain for two minutes (issue 10; 100 is the aim)
CREATE_THREADS = 4
CLIENT_THREADS = 16  # `--client`: enough connections for the tenant's 50 creates a second


def print_emulator_time(stats: dict) -> None:
    """The emulator process's time: its lock held, per AWS operation, and the state snapshots'."""
    requests = sum(stats["requestsByOperation"].values())
    print(f"emulator lock held {stats['busySeconds']:.0f} s of the run (in its own process), {requests} requests "
          f"over {stats.get('connectionsOpened', '?')} connections")
    spent, counts = stats["busyByOperation"], stats["requestsByOperation"]
    top = sorted(spent.items(), key=lambda item: -item[1])[:8]
    print("  by operation: " + ", ".join(f"{op} {seconds:.1f} s ({counts[op]} requests)" for op, seconds in top))
    print(f"state snapshots: {stats['snapshots']}, {stats['snapshotLockedSeconds']:.1f} s with the lock held, "
          f"{stats['snapshotSeconds']:.1f} s in all")


def create(api_url: str, key: str, body: dict, idempotency_key: str | None = None) -> dict:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    if idempotency_key:
        headers["Idempotency-Key"] = idempotency_key
    request = urllib.request.Request(api_url + "/v1/jobs", data=json.dumps(body).encode(), method="POST",
                                     headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def create_rate(runtime, key: str, echo_url: str, samples: int = 20) -> float:
    """Creates per second the local stack sustains (jobs far in the future, not measured)."""
    far = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 86_400))
    body = {"name": "warm-up", "type": "ONE_TIME", "runAt": far, "target": {"type": "HTTP", "url": echo_url}}
    started = time.time()
    with ThreadPoolExecutor(max_workers=CREATE_THREADS) as pool:
        list(pool.map(lambda _: create(runtime.api_url, key, body), range(samples)))
    return samples / (time.time() - started)


def run_load(runtime, echo, key: str, rate: int, seconds: int, creates_per_s: float) -> dict:
    """`rate` jobs due in each second for `seconds` seconds. All are created before the first is
    due (the lead comes from the measured create rate), so lateness is the scheduler's alone."""
    count = rate * seconds
    lead_s = 10 + 1.5 * count / creates_per_s
    first_due_s = math.ceil(time.time() + lead_s)
    due_ms = [(first_due_s + i // rate) * 1000 for i in range(count)]

    def create_one(i: int) -> tuple[str, int] | None:
        try:
            job = create(runtime.api_url, key, {
                "name": f"late-{i}", "type": "ONE_TIME",
                "runAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(due_ms[i] / 1000)),
                "target": {"type": "HTTP", "url": f"{echo.url}/late"}, "payload": {"i": i}})
        except urllib.error.HTTPError as error:
            if error.code == 422 and time.time() * 1000 >= due_ms[i]:
                return None  # its instant passed before its turn to be created: the run is not valid
            raise
        return job["jobId"], due_ms[i]

    with ThreadPoolExecutor(max_workers=CREATE_THREADS) as pool:
        created = list(pool.map(create_one, range(count)))
    due_by_job = dict(c for c in created if c is not None)
    created_late = time.time() * 1000 > first_due_s * 1000 or len(due_by_job) < count
    return _measure(echo, due_by_job, count, rate, first_due_s, seconds, created_late, runtime)


def run_client_load(runtime, echo, key: str, rate: int, seconds: int, creates_per_s: int,
                    lead_s: float = 5.0, clients: int = CREATE_THREADS) -> dict:
    """As a client would: every job created ahead through the API, paced at the tenant's create
    quota (`creates_per_s` a second; a 429 waits its Retry-After and tries again), in the order they
    are due; then `rate` jobs due in each second for `seconds` seconds, the first `lead_s` after the
    last create. At 50 a second for two minutes, each job is created about two minutes before it is
    due, so the look-ahead's buckets fill while they are claimed: most jobs are handed to SQS by the
    API's direct dispatch, one by one, rather than by the tick."""
    count = rate * seconds
    started_s = math.ceil(time.time()) + 1
    first_due_s = math.ceil(started_s + count / creates_per_s + lead_s)
    due_ms = [(first_due_s + i // rate) * 1000 for i in range(count)]
    turn = iter(range(count))
    turn_lock = threading.Lock()
    refused, timeouts = [0], [0]
    run_id = f"client-{started_s}"

    def next_turn() -> int | None:
        with turn_lock:
            return next(turn, None)

    def create_in_turn() -> list[tuple[str, int] | None]:
        made = []
        while (i := next_turn()) is not None:
            time.sleep(max(0.0, started_s + i / creates_per_s - time.time()))
            body = {"name": f"client-{i}", "type": "ONE_TIME",
                    "runAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(due_ms[i] / 1000)),
                    "target": {"type": "HTTP", "url": f"{echo.url}/late"}, "payload": {"i": i}}
            while True:
                try:
                    made.append((create(runtime.api_url, key, body, f"{run_id}-{i}")["jobId"], due_ms[i]))
                    break
                except TimeoutError:
                    # No answer in 30 s (a loaded machine): as a client, the same create again with
                    # its Idempotency-Key, which answers the first job if it was made.
                    with turn_lock:
                        timeouts[0] += 1
                    continue
                except urllib.error.HTTPError as error:
                    if error.code in (429, 503):  # over the quota this second: as a client, wait and retry
                        with turn_lock:
                            refused[0] += 1
                        time.sleep(float(error.headers.get("Retry-After") or 1))
                        continue
                    if error.code == 422 and time.time() * 1000 >= due_ms[i]:
                        made.append(None)  # its instant passed before its turn: the run is not valid
                        break
                    raise
        return made

    # `clients` connections at once, each create in turn: a create is a few emulator round trips
    # (about 0.4 s here), so 4 clients made about 9 a second, short of the quota's 50.
    with ThreadPoolExecutor(max_workers=clients) as pool:
        created = [c for made in pool.map(lambda _: create_in_turn(), range(clients)) for c in made]
    finished_s = time.time()
    print(f"created {count} jobs in {finished_s - started_s:.0f} s ({count / (finished_s - started_s):.1f}/s, "
          f"{refused[0]} creates refused by the quota and {timeouts[0]} unanswered in 30 s, each retried); the first is due "
          f"{first_due_s - finished_s:.1f} s after the last create", flush=True)
    due_by_job = dict(c for c in created if c is not None)
    return _measure(echo, due_by_job, count, rate, first_due_s, seconds,
                    finished_s > first_due_s or len(due_by_job) < count, runtime)


def process_cpu_seconds(pid: int) -> float | None:
    """User and system CPU of a process and of its children it has waited for (the emulator's
    snapshot copies), from /proc; None where /proc has no such process."""
    import os

    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def cpu_now(runtime) -> dict:
    """Both processes' CPU so far and the emulator's requests (bench lateness prints the difference
    over the seconds the jobs fire: what each job costs the machine, which its lateness hides)."""
    import os

    return {"stack": process_cpu_seconds(os.getpid()), "emulator": process_cpu_seconds(runtime.emulator.pid),
            "requests": sum(runtime.emulator.stats()["requestsByOperation"].values())}


def print_fire_cpu(before: dict, after: dict, jobs: int) -> None:
    if None in (before["stack"], before["emulator"], after["stack"], after["emulator"]) or not jobs:
        return
    per_job = {k: (after[k] - before[k]) / jobs for k in ("stack", "emulator", "requests")}
    print(f"CPU while they fired, a job: the stack's process {per_job['stack'] * 1000:.1f} ms (its functions, the "
          f"API, the pollers, this bench's endpoint), the emulator's {per_job['emulator'] * 1000:.1f} ms "
          f"({per_job['requests']:.1f} requests)", flush=True)


def _measure(echo, due_by_job: dict[str, int], count: int, rate: int, first_due_s: int, seconds: int,
             created_late: bool, runtime=None) -> dict:
    """Wait until every job has called the echo endpoint (or a minute past the last due second),
    then lateness (first call minus due instant), missed and duplicated; with `runtime`, the CPU
    both processes spent from the first due second until the last arrival, per job."""
    deadline = first_due_s + seconds + 60
    time.sleep(max(0.0, first_due_s - time.time()))
    before = cpu_now(runtime) if runtime is not None else None
    while time.time() < deadline:
        arrived = {(c["executionId"] or "").split(".")[0] for c in list(echo.received)}
        if all(job in arrived for job in due_by_job):
            break
        time.sleep(0.5)
    if before is not None:
        print_fire_cpu(before, cpu_now(runtime), len(due_by_job))
    time.sleep(2)  # a duplicate would arrive now
    arrivals: dict[str, list[int]] = {}
    for call in list(echo.received):
        job_id = (call["executionId"] or "").split(".")[0]
        if job_id in due_by_job:
            arrivals.setdefault(job_id, []).append(call["receivedMs"])
    lateness = [min(times) - due_by_job[job] for job, times in arrivals.items()]
    print_by_phase([(due_by_job[job], min(times) - due_by_job[job]) for job, times in arrivals.items()],
                   first_due_s, seconds, len(due_by_job) - len(arrivals))
    return {"rate": rate, "count": count, "missed": count - len(arrivals),
            "duplicated": sum(len(t) - 1 for t in arrivals.values()),
            "p50": percentile(lateness, 50), "p95": percentile(lateness, 95), "p99": percentile(lateness, 99),
            "max": max(lateness) if lateness else float("nan"), "min": min(lateness) if lateness else float("nan"),
            "created_late": created_late}


PHASE_SECONDS = 20  # lateness by due time, in windows this long (runs of at least two windows)


def by_phase(late_by_due: list[tuple[int, int]], first_due_s: int, seconds: int) -> list[tuple]:
    """(from s, to s, jobs, p50, p99, max) per PHASE_SECONDS of due time from the first due
    second: whether lateness grows over the run (a backlog) or comes in one burst."""
    windows = []
    for start in range(0, seconds, PHASE_SECONDS):
        lo, hi = (first_due_s + start) * 1000, (first_due_s + min(seconds, start + PHASE_SECONDS)) * 1000
        late = [ms for due, ms in late_by_due if lo <= due < hi]
        if late:
            windows.append((start, min(seconds, start + PHASE_SECONDS), len(late), percentile(late, 50),
                            percentile(late, 99), max(late)))
    return windows


def print_by_phase(late_by_due: list[tuple[int, int]], first_due_s: int, seconds: int, missed: int) -> None:
    windows = by_phase(late_by_due, first_due_s, seconds)
    if len(windows) < 2:
        return
    print(f"lateness by due time ({missed} not arrived):")
    for start, end, jobs, p50, p99, most in windows:
        print(f"  due {start:>3}-{end:<3} s: {jobs:>5} jobs, p50 {p50:>8.0f} ms, p99 {p99:>8.0f} ms, max {most:>8.0f} ms")


def row(label: str, r: dict) -> tuple:
    if r["created_late"]:
        label += " (creation overran the lead: not valid)"
    return (label, r["rate"], r["count"], r["missed"], r["duplicated"], f"{r['min']:.0f}", f"{r['p50']:.0f}",
            f"{r['p95']:.0f}", f"{r['p99']:.0f}", f"{r['max']:.0f}")


HEADERS = ("run", "jobs/s", "jobs", "missed", "duplicated", "min ms", "p50 ms", "p95 ms", "p99 ms", "max ms")


def start_stack(quotas: dict):
    """The local stack as `make run` runs it (state kept, saved as it changes), from an empty state,
    with `quotas` as the API's settings, and the echo endpoint the jobs call."""
    from pathlib import Path

    from jobsched.domain.clock import SystemClock
    from jobsched.local.echo import EchoServer
    from jobsched.local.runtime import LocalRuntime, Options
    from jobsched.service.auth import ApiKeys
    from jobsched.store.aws import build_stores

    runtime = LocalRuntime(Options(port=0, segments=4, workdir=Path(".build/bench/local"), reset=True,
                                   keep_state=KEEP_STATE[0], env_overrides=quotas)).start(
        announce_ready=False, progress=lambda _: None)
    echo = EchoServer(out=open("/dev/null", "w"))
    ApiKeys(build_stores(runtime.settings).api_keys, SystemClock()).register("bench", "bench-key")
    runtime.mark_ready()
    return runtime, echo


KEEP_STATE = [True]  # --keep-state=0: measure without saving state


def client_rows(rate: int, seconds: int, lead_s: float = 5.0, clients: int = CREATE_THREADS) -> list[tuple]:
    """One run as a client makes it: the tenant's quotas as deployed, every job created ahead at
    the create quota."""
    runtime, echo = start_stack({})
    try:
        quota = runtime.settings.max_creates_per_second
        result = run_client_load(runtime, echo, "bench-key", rate, seconds, quota, lead_s, clients)
        print_emulator_time(runtime.emulator.stats())
    finally:
        runtime.stop()
        echo.stop()
    return [row(f"client: {rate} jobs/s for {seconds} s, created ahead at {quota}/s", result)]


def main(argv: list[str] | None = None) -> None:
    use_local_aws()
    flags = argv or sys.argv[1:]
    quick = "--quick" in flags
    # `--rate=50 --seconds=120`: one run at that rate instead of the whole series; with `--client`,
    # that run as a client makes it (created ahead at the tenant's create quota).
    options = dict(f[2:].split("=", 1) for f in flags if f.startswith("--") and "=" in f)
    given_rate, given_seconds = int(options.get("rate", 0)), int(options.get("seconds", 120))
    client = "--client" in flags
    KEEP_STATE[0] = options.get("keep-state", "1") != "0"
    from jobsched.service import worker as worker_module

    print(f"lateness: the local stack on the wall clock (moto server, serialized), on {machine()}")
    rows = []
    if quick:
        rows += client_rows(5, 1)
    elif client or not given_rate:
        # `--lead=S`: the first job due S seconds after the last create (a loaded machine creates slower)
        # `--clients=N`: connections creating at once (16 by default in this mode)
        rows += client_rows(given_rate or GOAL_RATE, given_seconds, float(options.get("lead", 5)),
                            int(options.get("clients", CLIENT_THREADS)))
    if client or quick:
        print_table("Lateness of the target call after the due instant (negative: early)", rows, HEADERS)
        return
    runtime, echo = start_stack(NO_QUOTAS)
    try:
        rate_of_creates = create_rate(runtime, "bench-key", f"{echo.url}/warm")
        print(f"the local stack creates {rate_of_creates:.0f} jobs/s through its API (4 clients)")
        if given_rate:
            rows.append(row(f"{given_rate} jobs/s for {given_seconds} s",
                            run_load(runtime, echo, "bench-key", given_rate, given_seconds, rate_of_creates)))
        else:
            main_run = run_load(runtime, echo, "bench-key", GOAL_RATE, 120, rate_of_creates)
            rows.append(row(f"{GOAL_RATE} jobs/s for 2 min", main_run))
            saved = worker_module.MAX_PRECISION_WAIT_MS
            worker_module.MAX_PRECISION_WAIT_MS = 0
            try:
                rows.append(row("same for 30 s, no sub-second wait",
                                run_load(runtime, echo, "bench-key", GOAL_RATE, 30, rate_of_creates)))
            finally:
                worker_module.MAX_PRECISION_WAIT_MS = saved
            best = GOAL_RATE if main_run["missed"] == 0 and main_run["p99"] <= P99_LIMIT_MS else None
            for rate in (75, 100, 150) if best else ():
                result = run_load(runtime, echo, "bench-key", rate, 30, rate_of_creates)
                rows.append(row(f"{rate} jobs/s for 30 s", result))
                if result["missed"] == 0 and result["p99"] <= P99_LIMIT_MS and not result["created_late"]:
                    best = rate
                else:
                    break
            print(f"\nhighest rate tried with p99 <= {P99_LIMIT_MS} ms and none missed: {best} jobs/s")
        print_emulator_time(runtime.emulator.stats())
    finally:
        runtime.stop()
        echo.stop()
    print_table("Lateness of the target call after the due instant (negative: early)", rows, HEADERS)


if __name__ == "__main__":
    main()
