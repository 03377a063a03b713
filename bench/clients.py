"""The worker's memory for target clients with many tenants (`python -m bench clients [--quick]`,
quick: 20 tenants).

A worker container calls AWS targets in each tenant's session of the targets role, with a boto3
client per (tenant session, service, region) (store/targets.py TargetClients). Before, a client
was also made per job timeout and kept as long as its tenant's session (up to 500 tenants): 500
tenants x 4 services x 3 timeouts is 6,000 clients. Each scenario runs in a fresh process, which
asks for the clients a worker would as jobs of every tenant run in turn (each tenant's jobs use
every service and timeout), and reports the process's resident memory before and after, and the
time a client takes to make (what an LRU miss costs). No call is made: a client is made without one."""
from __future__ import annotations

import gc
import json
import subprocess
import sys
import time

from bench.common import machine, print_table
from jobsched.sizing import QUIET_WORKER_MEMORY_MB as WORKER_MEMORY_MB  # the default template's worker

SERVICES = ("sqs", "sns", "events", "lambda")
TIMEOUTS = (30, 300, 900)


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def run(tenants: int, cap: int, per_call: bool) -> dict:
    """In this process: the clients of `tenants` tenants, as the worker asks for them."""
    import boto3

    from jobsched.store.targets import TargetClients

    session = boto3.session.Session(region_name="us-east-1")
    clients = TargetClients(session, cap=cap, per_call_timeout=per_call)
    # The models are loaded by the first client of each service: not counted as the clients' cost.
    for service in SERVICES:
        clients.get(service, "us-east-1", 30, {"aws_access_key_id": "warm", "aws_secret_access_key": "s",
                                                "aws_session_token": "t"})
    clients = TargetClients(session, cap=cap, per_call_timeout=per_call)
    gc.collect()
    before = rss_mb()
    started = time.perf_counter()
    asked = 0
    for tenant in range(tenants):
        credentials = {"aws_access_key_id": f"ASIA{tenant:06d}", "aws_secret_access_key": "s",
                       "aws_session_token": "t"}
        for service in SERVICES:
            for timeout in TIMEOUTS:
                clients.get(service, "us-east-1", timeout, credentials)
                asked += 1
    elapsed = time.perf_counter() - started
    gc.collect()
    after = rss_mb()
    return {"tenants": tenants, "asked": asked, "made": clients.created, "kept": len(clients),
            "before_mb": before, "after_mb": after, "ms_per_client": 1000 * elapsed / max(1, clients.created)}


def scenario(tenants: int, cap: int, per_call: bool) -> dict:
    code = (f"import json; from bench.clients import run; "
            f"print(json.dumps(run({tenants}, {cap}, {per_call})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    quick = "--quick" in (argv or sys.argv[1:])
    from jobsched.store.targets import MAX_TARGET_CLIENTS, PER_CALL_READ_TIMEOUT

    tenants = 20 if quick else 500
    rows, scenario_rows = [], []
    for name, cap, per_call in (("before: per timeout, unbounded", 10 ** 9, False),
                                ("now: one for every timeout, LRU", MAX_TARGET_CLIENTS, True),
                                ("now, botocore without per-call timeouts", MAX_TARGET_CLIENTS, False)):
        r = scenario(tenants, cap, per_call)
        scenario_rows.append(r)
        growth = r["after_mb"] - r["before_mb"]
        rows.append((name, r["tenants"], r["asked"], r["made"], r["kept"], f"{r['before_mb']:.0f}",
                     f"{r['after_mb']:.0f}", f"{growth:.0f}", f"{1024 * growth / max(1, r['kept']):.0f}",
                     f"{r['ms_per_client']:.1f}"))
    print(f"machine: {machine()}; {len(SERVICES)} services ({', '.join(SERVICES)}), timeouts {TIMEOUTS} s; "
          f"cap {MAX_TARGET_CLIENTS} clients; this botocore takes a per-call read timeout: {PER_CALL_READ_TIMEOUT}")
    print_table("Target clients of one worker process (resident memory, MB)", rows,
                ("scheme", "tenants", "clients asked", "made", "kept", "RSS before", "RSS after", "growth",
                 "KB per kept client", "ms per client made"))
    before = scenario_rows[0]
    per_client_kb = 1024 * (before["after_mb"] - before["before_mb"]) / max(1, before["kept"])
    every = 500 * len(SERVICES) * len(TIMEOUTS)
    print(f"\nAt {per_client_kb:.0f} KB a client: 500 tenants x {len(SERVICES)} services x {len(TIMEOUTS)} timeouts "
          f"({every:,} clients, the old scheme's bound) take {every * per_client_kb / 1024:,.0f} MB, past the "
          f"worker's {WORKER_MEMORY_MB} MB; the cap holds the clients at {MAX_TARGET_CLIENTS} x {per_client_kb:.0f} KB"
          f" = {MAX_TARGET_CLIENTS * per_client_kb / 1024:.0f} MB, whatever the tenants.")


if __name__ == "__main__":
    main()
