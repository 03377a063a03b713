"""The bill per million executions, line by line, from the calls the real code makes.

The stack runs in-process on moto under the strict AWS layer (IAM of each role, sizes, capacity
billed per partition key as DynamoDB bills it, index writes included). Every AWS call is counted by
function and operation, every DynamoDB capacity unit by function and table, every byte the
functions log by function, every invocation. Four scenarios: recurring and one-time jobs, each at
full batches (what 10,000 executions a second look like to the worker: ten records a batch) and
one record a second (a quiet deployment). Ticks with nothing due are measured on their own, so the
ticks' fixed cost is amortized at the stated rate instead of over the bench's few jobs, run by the
deployed template's segments at every rate. At 10,000 a second the per-pack counts are priced at
the pack fill bench/pack_fill.py gives at those segments (checked against what `bench e2e`
measured), not at the bench's own few jobs' fill.

The counts are priced from one dated price table (PRICES). What is not counted is modelled, each
assumption named beside its figure: Lambda durations (from `bench cpu` and `bench herd`),
X-Ray sampling, the Lambda platform's log lines, the event source mapping's empty polls, KMS data
keys, storage at the stated retention."""
from __future__ import annotations

import sys
from collections import Counter

from bench.common import machine, print_table, use_local_aws
from bench.cost_measure import AHEAD_S, IDLE_MINUTES, Measured, Scenario, deployed_log_bytes, measure
from bench.cost_prices import (ACCESS_LOG_BYTES, API_GB, API_OWN_S, CALL_S, EVENT_OVERHEAD_BYTES, IDLE_POLLS_PER_MINUTE,
                               KMS_REUSE_S, LOG_RETENTION_DAYS, PER_PACK, PLATFORM_LOG_BYTES, PRICE_DATE, PRICES,
                               PROVISIONED_UTILIZATION, RECURRING_RUNS_PER_JOB, RETENTION_DAYS, TARGET_S, TICK_GB,
                               TICK_S_PER_TIMER, WORKER_CPU_PER_RECORD_S, XRAY_RATE, XRAY_RESERVOIR_PER_S, WhatIf, bill,
                               has_kms_key, idle_pollers, lane_key_reuse_s, provisioned_tables, template_segments)
from bench.cost_quiet import print_quiet_month
from bench.pack_fill import SETTLE_MINUTES, minute_fills, pack_fill, steady_pack_fill

FULL_RATE = 10_000.0
# What `bench e2e` measured on the default template (docs/performance.md, current figures), each run
# from idle on whole segments: (rate, segments, minutes, entries a message, run). bench/pack_fill.py
# gives the same runs; bench cost prints both and flags a gap over E2E_TOLERANCE.
E2E_MEASURED = ((10_000.0, 4, 3, 67.5, "bench e2e --scenario=sustained (10,000 a second, 3 minutes)"),
                (20.0, 4, 1, 5.1, "bench e2e --quick (20 a second, 1 minute)"))
E2E_TOLERANCE = 0.05
# What `bench e2e --scenario=one-time` measured for one-time jobs on the default template: one
# tenant's, 10,000 a second for a minute, each timer at its job's instant (entries a message).
E2E_ONE_TIME = (69.7, "bench e2e --scenario=one-time (one tenant's one-time jobs, 10,000 a second)")
# The share of fires `bench e2e --scenario=sustained` saw sent alone (messages of one, claimed per
# execution) at 10,000 a second on the default template: 0 of the 449,673 run, since the tick's next
# timers of fires it sends in packs are sole (docs/architecture.md, "Two senders of one occurrence";
# the run of 8ba0071 with the bench of 46bb0ca, which prints it). Before: 11.4 % (47,143 of 412,013
# FIRE dispatches at c2d23f0), 11.5 % by the bench's own count at 24dd65b (51,585 of 449,673).
E2E_SENT_ALONE = 0 / 449_673
SENT_ALONE_LINE = "fires sent alone (bench e2e)"

# Packs: 400 jobs created within one second (4 batch creates), so that their fires share a due
# second in each of the template's segments: the pack path measured at a fill of tens of entries,
# its per-pack counts then priced at the fill the tick's pages give a deployment running 10,000 a
# second for hours at the template's segments (bench/pack_fill.py steady_pack_fill, the model that
# gives what `bench e2e` measured over its minutes from idle).
PACKED = "recurring, packs filled as at 10,000/s"
# The quiet deployment: one job firing each second of the minute, measured once its jobs are over
# 5 minutes old (a month's fires are almost all of such jobs: a job's first fires, sent by its
# writer, are claimed per execution). Timed (cost_measure.advance_timed): each segment's tick at its
# own instant of the minute, so the worker's wait for each fire's instant and the tick's wait before
# its sends (aligned sends) are measured, not modelled (over 3 minutes with --quick: 12 tick runs). Its jobs fire on whole seconds (created a
# second apart on whole seconds), as cron jobs do; RATE jobs created at any millisecond fire at it.
QUIET = "recurring, 1 a second"
# One-time jobs are created AHEAD_S ahead (Scenario.lead_s): the minutes before their buckets' hand-off
# are settled, not counted (AHEAD_SETTLE: nothing but idle ticks, priced on their own). SHORT: created
# 20 s ahead, their writer sends them itself (claimed per execution): the short-lead case, priced apart.
AHEAD_SETTLE = 6
SHORT = "one-time, created 20 s ahead"
SCENARIOS_FULL = [Scenario(PACKED, "recurring", 400, 1, 4, create_batch=100, settle_minutes=5),
                  Scenario("recurring, full batches", "recurring", 100, 20, 10),
                  Scenario("one-time, full batches", "one-time", 400, 20, 6, settle_minutes=AHEAD_SETTLE),
                  Scenario(QUIET, "recurring", 60, 1000, 5, settle_minutes=5, timed=True),
                  Scenario("one-time, 1 a second", "one-time", 120, 1000, 6, settle_minutes=AHEAD_SETTLE),
                  Scenario("one-time, created in batches of 100", "one-time", 400, 20, 6, create_batch=100,
                           settle_minutes=AHEAD_SETTLE),
                  Scenario(SHORT, "one-time", 400, 20, 2, lead_s=20)]
SCENARIOS_QUICK = [Scenario(PACKED, "recurring", 400, 1, 1, create_batch=100, settle_minutes=5),
                   Scenario("recurring, full batches", "recurring", 20, 20, 2),
                   Scenario("one-time, full batches", "one-time", 20, 20, 5, settle_minutes=AHEAD_SETTLE),
                   Scenario(QUIET, "recurring", 60, 1000, 3, settle_minutes=5, timed=True),
                   Scenario("one-time, 1 a second", "one-time", 5, 1000, 5, settle_minutes=AHEAD_SETTLE),
                   Scenario("one-time, created in batches of 100", "one-time", 100, 20, 5, create_batch=100,
                            settle_minutes=AHEAD_SETTLE),
                   Scenario(SHORT, "one-time", 20, 20, 2, lead_s=20)]


def main(argv: list[str] | None = None) -> None:
    use_local_aws()
    quick = "--quick" in (argv or sys.argv[1:])
    print(f"cost: the real code's calls, counted in-process on moto under the strict AWS layer, on {machine()}")
    measured = {s.name: measure(s, 1 if quick else IDLE_MINUTES) for s in (SCENARIOS_QUICK if quick else SCENARIOS_FULL)}
    first = next(iter(measured.values()))
    print_table(f"Price table (us-east-1, read {PRICE_DATE})",
                [(k, f"{v[0]:g}", v[1], v[2], v[3]) for k, v in PRICES.items()],
                ("line", "USD", "unit", "page", "seen in"))
    rows = []
    for name, m in measured.items():
        n = max(m.executions, 1)
        calls = Counter()
        for (f, s, o), v in m.fire.calls.items():
            calls[f] += v
        units = Counter()
        for (f, t, k), v in m.fire.units.items():
            units[(t, k)] += v
        rows.append((name, m.executions, f"{m.pack_fill:.1f}", f"{n / max(m.fire.invocations['worker'], 1):.1f}",
                     f"{calls['worker'] / n:.2f}", f"{calls['tick'] / n:.2f}", f"{calls['esm'] / n:.2f}",
                     f"{sum(v for (t, k), v in units.items() if k == 'write') / n:.2f}",
                     f"{sum(v for (t, k), v in units.items() if k == 'read') / n:.2f}",
                     f"{deployed_log_bytes(m.fire, m.attempt_log_percent) / n:.0f}",
                     f"{sum(v for (f, s, o), v in m.create.calls.items() if f == 'api') / m.scenario.jobs:.2f}",
                     f"{sum(v for (f, t, k), v in m.create.units.items() if k == 'write') / m.scenario.jobs:.2f}",
                     f"{m.create.log_bytes['api'] / m.scenario.jobs:.0f}",
                     " ".join(f"{t}:{b:.0f}" for t, b in m.stored_bytes.items())))
    print_table("Measured per execution (fire: ticks and worker; create: per created job)", rows,
                ("scenario", "executions", "pack fill", "executions/invocation", "worker calls", "tick calls", "ESM calls",
                 "fire WU", "fire RU", "worker log B (as deployed)", "create calls", "create WU", "create log B",
                 "stored B per execution"))
    idle = first.idle
    print(f"\nA tick run with nothing due: {sum(v for (f, s, o), v in idle.calls.items() if f == 'tick') / max(first.idle_tick_runs, 1):.1f} "
          f"calls, {sum(v for (f, t, k), v in idle.units.items() if k == 'write') / max(first.idle_tick_runs, 1):.1f} WU, "
          f"{sum(v for (f, t, k), v in idle.units.items() if k == 'read') / max(first.idle_tick_runs, 1):.1f} RU, "
          f"{idle.log_bytes['tick'] / max(first.idle_tick_runs, 1):.0f} log bytes")
    tpl = first.template
    fill, one_time_fill = deployed_fills(tpl, measured)
    provisioned = provisioned_tables(tpl)
    print("DynamoDB billed as the template deploys it: " + (
        f"provisioned at {PROVISIONED_UTILIZATION:.0%} utilization: {', '.join(sorted(provisioned))}; the rest on demand"
        if provisioned else "every table on demand"))
    columns = []
    for kind, full, quiet, full_fill in (("recurring", PACKED, QUIET, fill),
                                         ("one-time", "one-time, full batches", "one-time, 1 a second", one_time_fill)):
        columns += [(f"{kind} 10,000/s", bill(measured[full], FULL_RATE, fill=full_fill)),
                    (f"{kind} 1/s", bill(measured[quiet], 1.0))]
    columns.append(("one-time in batches of 100, 10,000/s", bill(measured["one-time, created in batches of 100"],
                                                                 FULL_RATE, fill=one_time_fill)))
    columns.append(("one-time created 20 s ahead, 10,000/s", bill(measured[SHORT], FULL_RATE)))
    bills = dict(columns)
    # Recurring at 10,000/s on the deployed segments: the share of fires bench e2e sees sent alone
    # (none since sole timers: a run behind claims the buckets it has just written next timers into,
    # but those are its own, sent by its query alone), each priced at what a fire sent alone costs over one in a pack (the one-time columns' difference).
    alone = E2E_SENT_ALONE * (bills["one-time created 20 s ahead, 10,000/s"]["total"]
                              - bills["one-time 10,000/s"]["total"])
    recurring = bills["recurring 10,000/s"]
    recurring[SENT_ALONE_LINE] = alone
    recurring["total"] += alone
    print(f"\nSent alone: bench e2e at 10,000/s on the default template's {template_segments(tpl)} segments sends "
          f"{E2E_SENT_ALONE:.1%} of the recurring fires alone (the two-senders rule; the tick's own next "
          f"timers are sole): the line '{SENT_ALONE_LINE}' of the recurring 10,000/s column, "
          f"{alone:.3f} USD a million.")
    names = list(dict.fromkeys(k for _, b in columns for k in b if k != "total")) + ["total"]
    print_table("Modelled cost per million executions (USD), by line, as deployed",
                [(line, *(f"{b.get(line, 0.0):.3f}" for _, b in columns)) for line in names],
                ("line", *(c for c, _ in columns)))
    goals = {"recurring 10,000/s": 1.00, "one-time 10,000/s": 2.50, "one-time in batches of 100, 10,000/s": 1.00}
    print("\nGoals: " + "; ".join(
        f"{c}: {b['total']:.2f} against {goals[c]:.2f} ({'met' if b['total'] <= goals[c] else 'missed'})"
        for c, b in columns if c in goals))
    levers = [("as deployed", WhatIf(), ""),
              ("REST API (-c api=rest; the HTTP API gives up X-Ray on the API hop, WAF, execution logs)",
               WhatIf(api="rest"), "nothing: $2.50 more per million creates"),
              ("execution retention 7 days (not 30)", WhatIf(retention_days=7), "history readable 7 days"),
              ("PITR off", WhatIf(pitr=False), "restore to a point in the last 35 days"),
              ("no wait for the due second", WhatIf(wait=False), "sub-second precision: calls up to 1 s early"),
              ("every attempt logged (-c attemptLogPercent=100; 1 as deployed)", WhatIf(attempt_log_percent=100),
               "nothing: the line of each succeeded attempt"),
              ("no INFO log lines (metrics kept)", WhatIf(info_lines=False), "the per-attempt and per-create lines"),
              ("X-Ray tracing on (-c tracing=on; off as deployed)", WhatIf(tracing=True),
               "nothing: the functions' X-Ray traces and service map, at this price"),
              ("AWS-owned keys (-c encryption=aws-owned, a new deployment; the stack's own key as deployed)",
               WhatIf(kms=False), "the key's policy, CloudTrail of each use, crypto-shredding, KMS-sealed signing secrets")
              if has_kms_key(first.template) else
              ("the stack's own KMS key (-c encryption=kms; AWS-owned keys as deployed)", WhatIf(kms=True),
               "nothing: its key policy, CloudTrail of each use, crypto-shredding, at this price")]
    rows = []
    for label, what_if, gives in levers:
        figures = [bill(measured[PACKED], FULL_RATE, what_if, fill)["total"] + alone,
                   bill(measured["one-time, full batches"], FULL_RATE, what_if, one_time_fill)["total"]]
        rows.append((label, *(f"{f:.3f}" for f in figures), gives))
    print_table("Levers at 10,000/s, priced on the same counts (USD per million executions)", rows,
                ("lever", "recurring", "one-time", "gives up"))
    print_quiet_month(measured[QUIET])
    print(f"\nAssumptions: a call {CALL_S * 1000:g} ms; API {API_GB} GB, {API_OWN_S * 1000:g} ms of our CPU + its calls; worker "
          f"{first.worker_gb:g} GB (the template's), a batch = the wait for its latest record's instant + target {TARGET_S} s + a record's calls "
          f"+ {WORKER_CPU_PER_RECORD_S / first.worker_vcpu * 1000:.1f} ms CPU per record; tick {TICK_GB:.2f} GB, a run's fixed calls + "
          f"{TICK_S_PER_TIMER * 1000:.2f} ms per timer; the template's segments at every rate "
          f"({template_segments(tpl)}); logs at INFO as deployed (measured) + "
          f"{PLATFORM_LOG_BYTES} B of platform lines per invocation + {EVENT_OVERHEAD_BYTES} B per event, "
          f"{ACCESS_LOG_BYTES} B per API access-log line, kept {LOG_RETENTION_DAYS} days; X-Ray's fixed Lambda "
          f"sampling ({XRAY_RESERVOIR_PER_S:g}/s + {XRAY_RATE:.0%}) per function; stored items (measured sizes + 100 B) "
          f"kept {RETENTION_DAYS} days, PITR on; {idle_pollers(tpl)} idle pollers on the lanes (the template's mappings) "
          f"x {IDLE_POLLS_PER_MINUTE} long polls a minute; KMS data keys (with -c encryption=kms) reused {lane_key_reuse_s(tpl)} s by SQS on the lanes (the template's), {KMS_REUSE_S} s by DynamoDB; "
          f"a recurring job's create over {RECURRING_RUNS_PER_JOB} runs; one-time jobs created {AHEAD_S // 60} "
          f"minutes ahead (the '{SHORT}' column: 20 s ahead, sent by their writer); free tiers not subtracted.")
    if not quick or "--expect" in (argv or sys.argv[1:]):  # `--quick --expect`: with the quick plans
        expectation_overhead(measured["recurring, full batches"], quick)
    if not quick or "--tenants" in (argv or sys.argv[1:]):
        tenants_overhead(measured["recurring, full batches"], quick)


def deployed_fills(tpl: dict, measured: dict[str, Measured]) -> tuple[float, float]:
    """The pack fills the 10,000/s columns are priced at (recurring, one-time), from bench/pack_fill.py
    at the deployed template's segments, each printed with where it came from, and the model held
    to what `bench e2e` measured."""
    segments = template_segments(tpl)
    print(f"\nSegments: {segments}, read from the deployed template (its functions' SEGMENTS: `-c segments`); the "
          f"ticks are priced at {segments} runs a minute at every rate.")
    recurring = steady_pack_fill(FULL_RATE, segments)
    one_time = pack_fill(FULL_RATE, segments)
    path = [e / max(p, 1) for e, p in minute_fills(FULL_RATE, segments, minutes=3)]
    print(f"Pack fill at 10,000/s, bench/pack_fill.py at {segments} segments: recurring {recurring:.1f} entries a "
          f"pack, a deployment that has run for hours (timer packs of one dense due second keep its pages in due "
          f"order: from idle {path[0]:.1f} in the first minute, {path[1]:.1f} in the second, {path[2]:.1f} in "
          f"the third; from pages that each sampled their minute, the {SETTLE_MINUTES}th minute's); one-time "
          f"{one_time:.1f} (single timers, read in due order).")
    # Each entry carries its job (job snapshots): a lane message holds as many as its bytes allow.
    caps = (measured[PACKED].pack_capacity, measured["one-time, full batches"].pack_capacity)
    print(f"Entries a lane message holds at these jobs' size (each carries its job's snapshot; "
          f"MAX_PACK_BYTES of sealed body): recurring {caps[0]}, one-time {caps[1]}: the fills priced are "
          f"{min(recurring, caps[0] or recurring):.1f} and {min(one_time, caps[1] or one_time):.1f}.")
    recurring, one_time = min(recurring, caps[0] or recurring), min(one_time, caps[1] or one_time)
    # The recurring column at the fill bench e2e measured at this rate when it is lower than the model's
    # (never an assumed fill: the model caps a message by entry count, e2e's entries carry larger jobs).
    e2e_full = next((seen for rate, _, _, seen, _ in E2E_MEASURED if rate == FULL_RATE), None)
    if e2e_full is not None and e2e_full < recurring:
        print(f"The recurring 10,000/s column is priced at bench e2e's {e2e_full:.1f} entries a message (below the "
              f"model's {recurring:.1f}).")
        recurring = e2e_full
    if E2E_ONE_TIME[0] < one_time:  # the same rule for the one-time columns
        print(f"The one-time 10,000/s columns are priced at {E2E_ONE_TIME[1]}'s {E2E_ONE_TIME[0]:.1f} entries a "
              f"message (below the model's {one_time:.1f}).")
        one_time = E2E_ONE_TIME[0]
    checks = []
    for rate, e2e_segments, minutes, seen, label in E2E_MEASURED:
        model = pack_fill(rate, e2e_segments, minutes=minutes)
        gap = model / seen - 1
        checks.append(f"{label} on {e2e_segments} segments: {seen:.1f} measured, {model:.1f} by the model "
                      f"({gap:+.1%}{'' if abs(gap) <= E2E_TOLERANCE else ': OVER ' + format(E2E_TOLERANCE, '.0%')})")
    print("Model against bench e2e: " + "; ".join(checks) + ".")
    print(f"Priced: the scenario \"{PACKED}\" measured {measured[PACKED].pack_fill:.1f}, its per-pack counts "
          f"({', '.join(PER_PACK)}) priced at {recurring:.1f}; the one-time columns' at {one_time:.1f} "
          f"(their Jobs writes as measured: a fire completes its job; measured {measured['one-time, full batches'].pack_fill:.1f} and "
          f"{measured['one-time, created in batches of 100'].pack_fill:.1f}), but '{SHORT}' (sent alone by their "
          f"writer: packs of one, as measured); the 1/s columns as measured ({measured[QUIET].pack_fill:.1f} and "
          f"{measured['one-time, 1 a second'].pack_fill:.1f}: one fire a second; the model gives "
          f"{steady_pack_fill(1.0, segments):.2f} for fires at random instants).")
    return recurring, one_time


def tenants_overhead(plain: Measured, quick: bool, tenants: int = 10) -> None:
    """Lane shares with many tenants: the scenarios above have one tenant, whose batch of ten records
    costs one slot take and give-back per bound. The same recurring jobs created by `tenants`
    tenants put records of several tenants in a batch, each with its own slot."""
    base = plain.scenario
    many = measure(Scenario(f"{base.name}, {tenants} tenants", base.kind, base.jobs, base.create_gap_ms,
                            base.fire_minutes, tenants=tenants), 1 if quick else IDLE_MINUTES)
    rows = []
    for m in (plain, many):
        n = max(m.executions, 1)
        jobs_wu = sum(v for (f, t, k), v in m.fire.units.items() if k == "write" and t == "Jobs") / n
        all_wu = sum(v for (f, t, k), v in m.fire.units.items() if k == "write") / n
        rows.append((m.scenario.name, m.scenario.tenants, f"{n / max(m.fire.invocations['worker'], 1):.1f}",
                     f"{jobs_wu:.2f}", f"{all_wu:.2f}", f"{bill(m, FULL_RATE)['total']:.3f}"))
    print_table("Lane shares and tenants: the same recurring jobs, one tenant or several (per execution)", rows,
                ("scenario", "tenants", "records/batch", "fire WU on Jobs (lane slots)", "fire WU",
                 "USD/million as deployed"))


def expectation_overhead(plain: Measured, quick: bool) -> None:
    """Absence alerts: what `expect` adds per execution (the expectation met, as in a healthy job):
    the same recurring jobs with and without it, the difference in counted things and in the bill."""
    base = plain.scenario
    expecting = measure(Scenario(base.name + ", expect", base.kind, base.jobs, base.create_gap_ms,
                                 base.fire_minutes, expect=True), 1 if quick else IDLE_MINUTES)
    million = 1_000_000
    rows = []
    for label, get in (("worker calls", lambda m: sum(v for (f, s, o), v in m.fire.calls.items() if f == "worker")),
                       ("tick calls", lambda m: sum(v for (f, s, o), v in m.fire.calls.items() if f == "tick")),
                       ("fire write units", lambda m: sum(v for (f, t, k), v in m.fire.units.items() if k == "write")),
                       ("fire read units", lambda m: sum(v for (f, t, k), v in m.fire.units.items() if k == "read")),
                       ("worker invocations", lambda m: m.fire.invocations["worker"])):
        a, b = (get(m) / max(m.executions, 1) * million for m in (plain, expecting))
        rows.append((label, f"{a:,.0f}", f"{b:,.0f}", f"{b - a:+,.0f}"))
    print_table("Absence alerts (expect met): per million executions", rows,
                ("counted", "recurring", "with expect", "added"))
    before, after = (bill(m, FULL_RATE)["total"] for m in (plain, expecting))
    print(f"modelled cost per million executions at 10,000/s (as deployed): {before:.3f} -> {after:.3f} USD "
          f"({after - before:+.3f})")


if __name__ == "__main__":
    main()
