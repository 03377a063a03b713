"""End to end on a simulated clock: the real tick and the real worker, under AWS's documented
scaling rules, at rates moto cannot reach (issue 27, item 2).

What runs for real: service/tick.py's Ticker.run (its pages, the hand-off of service/handoff.py,
the next FIRE timers of recurring jobs, the watermark protocol) and service/worker.py's
Worker.process with service/outcomes.py behind it (claim, target call, fenced end, a one-time
job's completion and quota give-back), over the real stores of store/timers.py, store/jobs.py,
store/executions.py and store/queues.py (LaneQueues: real seals, whole-second DelaySeconds).
The worker invocation repeats the handler's order (handlers/worker.py): open the batch, read its
jobs in one consistent BatchGetItem (not the ones that wait for their second), then each record.

What is modelled (`BilledDynamo` in bench/e2e_aws.py, and the event loop in bench/e2e_model.py):
- DynamoDB: a low-level client double in memory. Every read and write is billed to its partition
  key and second by the strict AWS layer's own rules (local/strict_aws.py: item sizes, 1 KB write
  and 4 KB read units, a write billed on the larger of before and after, index writes, a
  projection billed on the whole item), and refused over 1,000 WCU / 3,000 RCU a key a second as
  the strict layer refuses it (a write also when an index key it would write is over: GSI back
  pressure; `--unthrottled` refuses nothing, so that each key's peak is what it was asked): batch calls leave the keys unprocessed (the stores back off and
  retry), single calls are retried as botocore's standard mode does (5 attempts), then fail.
  Conditions are not evaluated: each execution is delivered once here (no duplicates modelled).
- SQS: a message becomes visible DelaySeconds (whole seconds, as the real LaneQueues computes
  them) after its send; the worker's wait for its due second is the real Worker's, on this clock.
- Lambda's SQS polling: standard mode starts with 5 concurrent invocations and adds up to 300 a
  minute while messages wait, up to 1,250 per event source and the mapping's MaximumConcurrency
  (AWS: services-sqs-scaling.html; docs/AWS-LIMITS.md); provisioned mode (ProvisionedPollerConfig
  in the template) 10 invocations per poller, MinimumPollers at the start, 1,000 more a minute up
  to MaximumPollers. Unreserved account concurrency: 1,000. Batches of up to 10 (the template's
  BatchSize), no batching window. Scaling down is not modelled (once scaled, it stays).
- EventBridge: each segment's tick at a random second of each minute (seeded; "within the minute");
  a tick still running delays the segment's next one. The tick's own pace is bench herd's measured
  0.36 ms of the tick's time per timer handed off, calls included (30,000 in 10.9 s).
- Lane shares (service/lane_shares.py) are modelled as a cap on one tenant's concurrency in a lane
  (share_of(cap, LANE_TENANT_PERCENT)); their slot writes are not billed.
- Sampling: whole segments run for real (their ticks, their timers, every tenant's jobs in them)
  and stand for the rest: a pack gathers one segment's second of one lane across tenants, so the
  packs, the Timers keys and the ticks' pace are as at full scale. Units on keys the sample shares
  with the rest (a tenant's Jobs key) and table totals are billed times 1/sample, and each lane's
  concurrency is scaled by the sample (the queue then behaves as the whole would). (Scenario
  sample_by="tenant" or "job" samples whole tenants or jobs instead: each segment's second then
  holds 1/sample of its fires, and the packs are that much emptier than at full scale.)

`python -m bench e2e [--quick] [--sample=N] [--profile=NAME] [--state-index=JobsByStateShard]
[--scenario=sustained|herd|tenant|one-time] [--unthrottled]`"""
from __future__ import annotations

import math
from dataclasses import replace

from bench.common import machine, percentile, print_table
from bench.e2e_aws import (ACCOUNT_CONCURRENCY, COLD_START_MS, DYNAMODB_MS, PAYLOAD_BYTES, POLL_TO_INVOKE_MS,
                           PROVISIONED_PER_POLLER, PROVISIONED_RAMP_PER_MINUTE, STANDARD_MAX,
                           STANDARD_RAMP_PER_MINUTE, STANDARD_START, TARGET_MEDIAN_MS, TARGET_SIGMA,
                           TICK_MS_PER_TIMER, Lane)
from bench.e2e_model import Scenario, Simulation, deployment_of, profile_template

GOAL_P99_MS = 1_000


SCENARIOS = [
    # Whole segments run (one of the default template's 4): a pack gathers what it gathers at full
    # scale. Three minutes: lateness from idle is decided in the first.
    Scenario("10,000 a second for 3 minutes (1,000 tenants)", 10_000, 3, 1_000, sample=1 / 4),
    Scenario("a herd of 1,000,000 timers at :00 (1,000 tenants)", 1_000_000, 1, 1_000, herd=True, sample=1 / 4),
    Scenario("one tenant at 10,000 a second (3 minutes)", 10_000, 3, 1, sample=1 / 4),
    # Each job completes once: a job write and its state index entries moved, one tenant's keys.
    Scenario("one tenant's one-time jobs, 10,000 a second (1 minute)", 10_000, 1, 1, sample=1 / 4, one_time=True),
]
QUICK = [
    Scenario("quick: 20 a second for 1 minute (10 tenants)", 20, 1, 10),
    Scenario("quick: a herd of 200 at :00 (10 tenants)", 200, 1, 10, herd=True),
    Scenario("quick: one tenant at 20 a second (1 minute)", 20, 1, 1),
]



REFUSE = True  # --unthrottled: no key refuses (each key's peak is then the rate it was asked)


def run_scenario(template: dict, scenario: Scenario) -> dict:
    sim = Simulation(template, scenario)
    sim.billing.refuse = REFUSE
    timing = sim.run()
    late = sim.late_ms
    lane = max(sim.lanes.values(), key=lambda lane: lane.peak)
    peaks = sim.billing.peaks()
    throttled = dict(sim.billing.throttled)
    p99 = percentile(late, 99)
    return {"sim": sim, "timing": timing, "late": late, "p50": percentile(late, 50), "p99": p99,
            "max": max(late) if late else float("nan"), "lane": lane, "peaks": peaks, "throttled": throttled,
            "tables": sim.billing.table_peaks(), "verdict": verdict(sim, lane, peaks, throttled, p99)}


def verdict(sim: Simulation, lane: Lane, peaks, throttled: dict, p99: float) -> str:
    """Which limit bound the lateness, and what it would take."""
    if p99 <= GOAL_P99_MS:
        return "met: p99 within one second"
    reasons = []
    s = sim.scenario
    hot = [k for k, n in sorted(throttled.items(), key=lambda kv: -kv[1]) if n]
    if hot:
        key = hot[0]
        rcu, wcu = next(((r, w) for k, r, w in peaks if k == key), (0.0, 0.0))
        spread = max(math.ceil(rcu / 3000), math.ceil(wcu / 1000), 2)
        refusals = f"(limit 3,000 / 1,000; {sum(throttled.values()):,} refusals on {len(hot)} keys)"
        if key.startswith("timers"):
            reach = next_minute_slices(sim)
            reasons.append(f"partition throughput: {key} asked {wcu:,.0f} WCU a second {refusals}. The jobs of one "
                           f"Timers slice land in {reach} slice(s) of the next minute; the tick writes each "
                           "slice's next timers at its full pace: more slices (TIMER_SLICES) or segments")
        elif key.startswith("executions[pack#"):
            reasons.append(f"partition throughput: {key} asked {wcu:,.0f} WCU a second {refusals}: one segment's "
                           "packs of one second share a pack partition (their claims and checkpoints); split it by a "
                           "shard of the job id, or more segments")
        else:
            reasons.append(f"partition throughput: {key} asked {rcu:,.0f} RCU / {wcu:,.0f} WCU a second {refusals}: "
                           f"spread that key over {spread}+ keys (a shard suffix on a busy tenant's Jobs key: "
                           "the tick's and the worker's consistent reads of its jobs all land on it)")
    rate = s.rate if not s.herd else s.rate / 60
    if s.herd and sim.invocations:
        records = sum(n for n, _ in sim.invocations)
        held_s = sum(ms for _, ms in sim.invocations) / 1000
        need = math.ceil(s.rate * held_s / records)
        beyond = f" (beyond the account's {ACCOUNT_CONCURRENCY:,} and a mapping's reach)" if need > ACCOUNT_CONCURRENCY else ""
        reasons.append(f"a herd of {s.rate:,} due in one second: within one second it would hold about "
                       f"{need:,} concurrent invocations{beyond}; spread over its minute (jitterSec 59) it is the "
                       "rate below")
    if lane.ramping_s:
        reasons.append(f"Lambda's SQS polling ramp: {lane.ramping_s} s with messages waiting while the "
                       f"{lane.name} mapping was still adding pollers (+{STANDARD_RAMP_PER_MINUTE}/min from "
                       f"{STANDARD_START}): provisioned mode with MinimumPollers near the peak")
    if lane.capped_s:
        share = s.tenants == 1 and sim.deployment.tenant_percent
        what = (f"the tenant's lane share ({sim.deployment.tenant_percent}% of {lane.cap})" if share
                else f"the {lane.name} lane cap ({lane.ceiling()} concurrent)")
        records = sum(n for n, _ in sim.invocations) or 1
        held_s = sum(ms for _, ms in sim.invocations) / 1000
        need = math.ceil(rate * held_s / records)
        reasons.append(f"{what}: {lane.capped_s} s with messages waiting at the cap; at the invocations' measured "
                       f"{held_s / len(sim.invocations) * 1000:,.0f} ms for {records / len(sim.invocations):.1f} "
                       f"records, {rate:,.0f} a second holds about {need:,} concurrent invocations")
    late_ticks = [t for t in sim.tick_late if t > 0]
    if late_ticks:
        reasons.append(f"the tick's hand-off: {len(late_ticks)} bucket(s) handed off after their first second "
                       f"(up to {max(late_ticks) / 1000:,.0f} s): more segments")
    return "; ".join(reasons) or "not attributed"


def next_minute_slices(sim: Simulation) -> int:
    """How many Timers slices of the next minute the jobs of one slice of this minute fall into
    (the real slice_of, over the run's own job ids)."""
    from jobsched.domain.timers import slice_of

    minute = sim.due_window[0] // 60_000
    jobs = [key[1] for key in list(sim.dynamo.items["jobs"])[:2_000]]
    first = [j for j in jobs if slice_of(j, minute) == 0]
    return len({slice_of(j, minute + 1) for j in first})


def main(flags: list[str], template: dict | None = None) -> None:
    from bench.common import int_option

    profile = next((f.split("=", 1)[1] for f in flags if f.startswith("--profile=")), None)
    only = next((f.split("=", 1)[1] for f in flags if f.startswith("--scenario=")), None)
    state_index = next((f.split("=", 1)[1] for f in flags if f.startswith("--state-index=")), None)
    global REFUSE
    REFUSE = "--unthrottled" not in flags
    template = template or profile_template(profile, state_index=state_index)
    deployment = deployment_of(template)
    scenarios = QUICK if "--quick" in flags else SCENARIOS
    sample_n = int_option(flags, "sample", 0)
    print(f"machine: {machine()}")
    print(f"deployment ({profile or 'default template'}): {deployment.segments} segments; lanes "
          + ", ".join(f"{n} cap {c}" + (f" provisioned {p[0]}-{p[1]} pollers" if p else " standard mode")
                      for n, (c, p) in deployment.lanes.items())
          + f"; worker reserved concurrency {deployment.reserved_worker or 'none'} (account {ACCOUNT_CONCURRENCY:,})"
          + f"; lane share of one tenant {deployment.tenant_percent}%; batch {deployment.batch_size}")
    print("tables: " + "; ".join(f"{k} {v}" for k, v in deployment.tables.items()))
    print("assumptions: target latency log-normal, median "
          f"{TARGET_MEDIAN_MS} ms, sigma {TARGET_SIGMA}; DynamoDB call {DYNAMODB_MS} ms; poll to invoke "
          f"{POLL_TO_INVOKE_MS} ms; cold start {COLD_START_MS} ms per new environment; tick {TICK_MS_PER_TIMER:.2f} ms "
          f"a timer (bench herd); SQS polling {STANDARD_START} at first, +{STANDARD_RAMP_PER_MINUTE}/min to "
          f"{STANDARD_MAX:,} (provisioned: {PROVISIONED_PER_POLLER} per poller, +{PROVISIONED_RAMP_PER_MINUTE:,}/min); "
          "no scale-down; the deployment starts idle; partition refusals at 1,000 WCU / 3,000 RCU a key a "
          "second (strict layer); table quotas and warm throughput reported, not enforced; lane shares as a "
          f"concurrency cap; payload {PAYLOAD_BYTES} B; every target call succeeds; a sample's concurrency is whole "
          "invocations (a lane below 1/sample concurrent runs as 1/sample); lateness is of the sample's executions")
    rows, details = _run_all(template, scenarios, only, sample_n)
    _print(rows, details)


def _run_all(template: dict, scenarios: list[Scenario], only: str | None, sample_n: int) -> tuple[list, list]:
    rows, details = [], []
    for scenario in scenarios:
        if only and only != scenario.kind:
            continue
        if sample_n:
            scenario = replace(scenario, sample=1 / sample_n)
        r = run_scenario(template, scenario)
        lane = r["lane"]
        rows.append((scenario.name, f"{r['sim'].ticking} of {r['sim'].deployment.segments} segments"
                     if scenario.sample_by == "segment" else f"1/{round(1 / scenario.sample)}", f"{len(r['late']):,}",
                     f"{r['p50']:,.0f}", f"{r['p99']:,.0f}", f"{r['max']:,.0f}",
                     "met" if r["p99"] <= GOAL_P99_MS else "MISSED", f"{lane.name} {lane.peak:,.0f}",
                     f"{r['timing']['seconds']:,.0f}"))
        details.append((scenario, r))
    return rows, details


def _print(rows: list, details: list) -> None:
    print_table("End to end lateness (scheduled second -> target call), real tick and worker on a simulated clock",
                rows, ("scenario", "sample", "executions run", "p50 ms", "p99 ms", "max ms", "goal p99 <= 1 s",
                       "peak concurrency", "run s"))
    for scenario, r in details:
        sim = r["sim"]
        print(f"\n{scenario.name}")
        print("  hottest partition keys (peak units a second; limits 3,000 RCU / 1,000 WCU):")
        for key, rcu, wcu in r["peaks"][:5]:
            refused = r["throttled"].get(key, 0)
            print(f"    {key}: {rcu:,.0f} RCU/s, {wcu:,.0f} WCU/s" + (f", refused {refused:,}" if refused else ""))
        tables_of = sorted({k.split("[", 1)[0] for k, _, _ in r["peaks"]})
        print("  hottest key of each table and index (by write units, then read units): " + "; ".join(
            "{} {:,.0f} RCU/s, {:,.0f} WCU/s".format(*max(((k, rc, wc) for k, rc, wc in r["peaks"] if k.startswith(f"{t}[")),
                                                        key=lambda x: (x[2], x[1])))
            for t in tables_of))
        for kind, of_kind in (("table", lambda k: "/" not in k.split("[", 1)[0]), ("index", lambda k: "/" in k.split("[", 1)[0])):
            key, _, wcu = max(((k, r, w) for k, r, w in r["peaks"] if of_kind(k)), key=lambda x: x[2], default=("-", 0, 0))
            print(f"  peak write units on one {kind} key: {wcu:,.0f} WCU/s ({key}; limit 1,000)")
        print("  tables (peak units a second; quota 40,000 each; a new on-demand table is warm for 12,000 RU / 4,000 WU):")
        for table, (rcu, wcu) in sorted(r["tables"].items()):
            print(f"    {table}: {rcu:,.0f} RCU/s, {wcu:,.0f} WCU/s")
        print("  lanes: " + ", ".join(f"{lane.name} peak {lane.peak:,.0f} (reached {lane.limit:,.0f} of "
                                      f"{lane.ceiling():,})" for lane in sim.lanes.values() if lane.peak))
        sizes = sim.pack_sizes
        print(f"  pack fill: {sum(sizes) / max(len(sizes), 1):.1f} entries a message received "
              f"({len(sizes):,} messages, largest {max(sizes, default=0)}); peak in flight: "
              + ", ".join(f"{lane.name} {lane.in_flight_peak:,.0f}" for lane in sim.lanes.values() if lane.peak))
        print(f"  fires sent alone (the two-senders rule: a message of one, claimed per execution): "
              f"{sim.sent_alone:,} of the {len(sim.late_ms):,} run ({sim.sent_alone / max(len(sim.late_ms), 1):.1%})")
        collapsed = sim.expected - len(sim.late_ms)
        print(f"  due in the window: {sim.expected:,}; ran: {len(sim.late_ms):,}"
              + (f"; {collapsed:,} never ran: handed off over a minute late, a recurring job's missed fires "
                 "are one (misfirePolicy RUN_ONCE, the default)" if collapsed > 0 else ""))
        if not scenario.herd:
            half = sim.late_second_half
            print(f"  due in the second half of the window: p50 {percentile(half, 50):,.0f} ms, p99 "
                  f"{percentile(half, 99):,.0f} ms, max {max(half, default=0):,.0f} ms")
        latest = max(sim.tick_late, default=0) / 1000
        print(f"  record errors handed back: {sim.record_errors:,}; failed ticks: {sim.tick_errors}; the latest "
              f"bucket's hand-off ended {abs(latest):,.1f} s {'after' if latest > 0 else 'before'} its first second")
        print(f"  verdict: {r['verdict']}")
