"""The end-to-end sizing model (functions/jobsched/sizing.py) for the deployment profiles, or for a
workload given on the command line: what each deploys, the peaks per table and per partition key
against DynamoDB's limits, the account quotas to raise, and the model's findings.

`python -m bench sizing [--quick] [--rate=N --herd=N --tenants=N --latency-ms=N --payload=N
--one-tenant --one-time=PERCENT]`: the profiles (`-c profile=NAME` deploys each); with `--rate=`,
that workload instead. `--quick`: the 1k profile alone (the test suite's tiny input). It computes,
it does not run anything: `bench e2e` runs the code against a template the model drives."""
from __future__ import annotations

from bench.common import int_option, print_table


def workloads(flags: list[str]) -> dict:
    from jobsched import sizing

    rate = int_option(flags, "rate", 0)
    if rate:
        workload = sizing.Workload(jobs_per_second=rate, herd=int_option(flags, "herd", rate * 60),
                                   target_latency_ms=int_option(flags, "latency-ms", 100),
                                   payload_bytes=int_option(flags, "payload", 1024),
                                   tenants=int_option(flags, "tenants", 100),
                                   one_tenant_whole_rate="--one-tenant" in flags,
                                   one_time_share=int_option(flags, "one-time", 0) / 100)
        return {f"{rate:,}/s": workload}
    names = ["1k"] if "--quick" in flags else list(sizing.PROFILES)
    return {name: sizing.PROFILES[name] for name in names}


def main(flags: list[str]) -> None:
    from jobsched import sizing

    chosen = {name: sizing.size(workload) for name, workload in workloads(flags).items()}
    print_table("Workloads", [
        (name, f"{s.workload.jobs_per_second:,}", f"{s.workload.herd:,} over {s.workload.herd_spread_s} s",
         s.workload.tenants, "yes" if s.workload.one_tenant_whole_rate else "no",
         f"{s.workload.target_latency_ms} ms", f"{s.workload.payload_bytes:,} B",
         f"{s.workload.one_time_share:.0%}") for name, s in chosen.items()],
        ("profile", "jobs/s", "busiest minute", "tenants", "one tenant all", "target", "payload", "one-time"))
    print_table("What it deploys", [
        (name, s.segments, "; ".join(sizing._lane_text(lane) for lane in s.lanes), f"{s.lane_tenant_percent}%",
         f"worker {s.worker_reserved_concurrency:,}, API {s.api_reserved_concurrency}, tick "
         f"{s.tick_reserved_concurrency}", f"{s.api_rate_limit:,}/{s.api_burst_limit:,}",
         f"{s.drain_per_second:,}/s", f"{s.tick_timers_per_second:,}/s")
        for name, s in chosen.items()],
        ("profile", "segments", "lanes (max concurrency)", "tenant share", "reserved concurrency",
         "API rate/burst", "lanes drain", "tick hand-off"))
    print_table("Tables at the peak (units a second; a table's quota 40,000 each way)", [
        (name, t.table, f"{t.peak_read:,}", f"{t.peak_write:,}", f"{t.average_read:,}", f"{t.average_write:,}",
         sizing._table_text(t), f"{t.hourly_on_demand:.2f} / {t.hourly_provisioned:.2f}")
        for name, s in chosen.items() for t in s.tables],
        ("profile", "table", "peak RCU", "peak WCU", "average RCU", "average WCU", "capacity",
         "USD an hour on demand / provisioned"))
    print_table("Partition keys at the peak (limit 3,000 RCU / 1,000 WCU a key)", [
        (name, k.table, k.key, f"{k.peak_read:,}", f"{k.peak_write:,}", k.spread_needed, k.spread_in_code,
         "within" if k.within_limits else "OVER")
        for name, s in chosen.items() for k in s.keys],
        ("profile", "table", "key", "peak RCU", "peak WCU", "keys needed", "keys in code", "verdict"))
    print_table("Account quotas to raise before", [
        (name, q.service, q.name, f"{q.default:,}", f"{q.needed:,}", f"{q.raise_to:,}" if q.raise_to else "-")
        for name, s in chosen.items() for q in s.quotas],
        ("profile", "service", "quota", "default", "needed", "ask for"))
    for name, s in chosen.items():
        print(f"\nFindings ({name}):" + ("".join(f"\n  - {f}" for f in s.findings) or " none"))
