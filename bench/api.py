"""API: create-job latency p50/p99 and creates/s, in-process (handler + moto)."""
from __future__ import annotations

import sys
import time

import boto3

from bench.common import NO_QUOTAS, CallCounter, emulator, machine, percentile, print_table, template, use_local_aws


def run(count: int, job_type: str) -> dict:
    from jobsched.domain.clock import SystemClock
    from jobsched.local.inprocess import InProcessStack

    clock = SystemClock()
    counter = CallCounter()
    with emulator(clock, counter):
        session = boto3.session.Session(region_name="us-east-1")
        counter.attach(session)
        stack = InProcessStack(template(), clock, session=session, keys={"bench": "bench-key"},
                               env_overrides=NO_QUOTAS)
        body = {"name": "api", "target": {"type": "HTTP", "url": "https://example.com/x"}, "payload": {"k": "v"}}
        body.update({"type": "CRON", "schedule": "0 3 * * *", "timezone": "Europe/Paris"} if job_type == "CRON"
                    else {"type": "DELAYED", "delaySeconds": 30})
        stack.request("POST", "/v1/jobs", body)  # warm: the first call builds the resolver
        counter.calls.clear()
        latencies = []
        counter.timing = True
        started = time.perf_counter()
        for _ in range(count):
            t = time.perf_counter()
            status, _ = stack.request("POST", "/v1/jobs", body)
            latencies.append((time.perf_counter() - t) * 1000)
            assert status == 201
        wall = time.perf_counter() - started
        counter.timing = False
    return {"type": job_type, "count": count, "p50": percentile(latencies, 50), "p99": percentile(latencies, 99),
            "rate": count / wall, "emulator_share": counter.emulator_seconds / wall,
            "calls": {f"{s}:{op}": n / count for (s, op), n in counter.calls.items()}}


def main(argv: list[str] | None = None) -> None:
    use_local_aws()
    quick = "--quick" in (argv or sys.argv[1:])
    count = 20 if quick else 500
    print(f"api: POST /v1/jobs through the handler, in-process on moto, on {machine()}")
    results = [run(count, t) for t in ("DELAYED", "CRON")]
    print_table("Create job", [(r["type"], r["count"], f"{r['p50']:.1f}", f"{r['p99']:.1f}", f"{r['rate']:.0f}",
                                f"{100 * r['emulator_share']:.0f}%",
                                ", ".join(f"{k} {v:.1f}" for k, v in sorted(r["calls"].items())))
                               for r in results],
                ("type", "creates", "p50 ms", "p99 ms", "creates/s", "in emulator", "calls per create"))
    print("\nA DELAYED job due within three minutes also reads the segment's watermark (direct dispatch "
          "check) and may send its dispatch; a CRON job due tomorrow writes its job and timer only. Both "
          "take a place in the tenant's quota counter (one item counts creates this second and jobs not ended).")


if __name__ == "__main__":
    main()
