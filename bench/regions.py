"""`python -m bench regions [--quick]`: the scheduler in several regions through a region's loss,
a partition from the lease table, and the heal (issue 25).

Runs the real API, tick and worker of every region on moto under one fake clock
(`jobsched.local.regions.RegionsSim`: each region its own tables and queues, the data tables
replicated with a lag and last-writer-wins conflicts as DynamoDB global tables do, one strongly
consistent ownership table). Recurring jobs (every minute), one-time jobs and a two-step workflow
(every two minutes) are made in every region; then one region is killed (its writes not yet replicated are lost), a second is cut off
from the ownership table while it keeps running, and it is healed. Printed: fires lost (an
occurrence due before the end that no region ran: goal 0), runs twice under one epoch (goal 0),
repeated target calls across epochs (the documented LOST or unreplicated re-runs, with the same
execution id), how long the failed regions' jobs waited for a successor, and the lateness before,
during and after."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

from bench.common import percentile, print_table, template as bench_template
from jobsched.domain.clock import FakeClock
from jobsched.domain.executions import job_id_of, scheduled_ms_of
from jobsched.domain.ownership import home_index
from jobsched.domain.schedule import format_instant, parse_instant

TENANT, KEY = "bench", "bench-key"
HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
MINUTE = 60_000


@dataclass
class Plan:
    regions: tuple[str, ...]
    recurring: int  # per region, every minute
    one_time: int  # per region, one due every `one_time_every_s`
    one_time_every_s: int
    steady_s: int
    killed_s: int
    partitioned_s: int
    healed_s: int
    lag_ms: int = 1_000
    # The ownership table's replicas (an MRSC table: a witness in us-east-2 besides), as the stacks' plan has them.
    ownership_replicas: tuple[str, ...] = ("us-east-1", "us-west-2")
    lease_ms: int = 90_000
    clock_bound_ms: int = 2_000


QUICK = Plan(("us-east-1", "us-west-2", "eu-west-1"), recurring=1, one_time=10, one_time_every_s=60,
             steady_s=60, killed_s=200, partitioned_s=200, healed_s=210)
FULL = Plan(("us-east-1", "eu-west-1", "ap-northeast-1", "us-west-2", "eu-central-1"), recurring=4,
            one_time=40, one_time_every_s=20, steady_s=180, killed_s=300, partitioned_s=300, healed_s=240)


@dataclass
class Outcome:
    plan: Plan
    expected: int = 0  # occurrences due before the cut-off
    lost: list[str] = field(default_factory=list)  # execution ids due, never run
    twice_in_an_epoch: list[str] = field(default_factory=list)  # two calls with one epoch and attempt
    after_a_newer_epoch: list[str] = field(default_factory=list)  # a call under an epoch older than an earlier call's
    repeated_across_epochs: int = 0
    failover_s: dict[str, float] = field(default_factory=dict)  # event -> first fire of its region's jobs elsewhere
    lateness: dict[str, list[int]] = field(default_factory=dict)  # phase -> ms
    events: dict[str, int] = field(default_factory=dict)  # event -> ms
    lost_writes: int = 0
    fires: int = 0
    segments: int = 0  # per region, from the template


def run(plan: Plan, template: dict | None = None) -> Outcome:
    from bench.common import emulator
    from jobsched.local.regions import RegionsSim

    clock = FakeClock(1_893_456_000_000 + 5_000)  # 2030-01-01T00:00:05Z
    template = template or bench_template()
    outcome = Outcome(plan)
    with emulator(clock):
        sim = RegionsSim(template, list(plan.regions), clock, lag_ms=plan.lag_ms, keys={TENANT: KEY},
                         lease_ms=plan.lease_ms, clock_bound_ms=plan.clock_bound_ms,
                         ownership_replicas=plan.ownership_replicas)
        try:
            sim.replicator.flush()
            outcome.segments = sim.stack(plan.regions[0]).settings.segments
            sim.advance(70)  # the first ticks: every home takes its block
            jobs = _create(sim, plan, clock)
            end_of_creates = clock.now_ms()
            sim.advance(plan.steady_s)
            killed, cut = plan.regions[1], plan.regions[2]
            outcome.events["kill"] = clock.now_ms()
            outcome.lost_writes = sim.kill(killed)
            sim.advance(plan.killed_s)
            outcome.events["partition"] = clock.now_ms()
            sim.partition(cut, ownership=True)
            sim.advance(plan.partitioned_s)
            outcome.events["heal"] = clock.now_ms()
            sim.heal(cut)
            sim.advance(plan.healed_s)
            outcome.events["end"] = clock.now_ms()
            _measure(sim, plan, jobs, end_of_creates, outcome)
        finally:
            sim.close()
    return outcome


def _create(sim, plan: Plan, clock) -> dict[str, dict]:
    """Every region's API makes its jobs: {job id: {"region", "first", "recurring", "due"}}."""
    jobs: dict[str, dict] = {}
    start = clock.now_ms()
    horizon_s = plan.steady_s + plan.killed_s + plan.partitioned_s + plan.healed_s
    for region in plan.regions:
        for i in range(plan.recurring):
            # RUN_ALL: every occurrence a failover made late must still run (the default, RUN_ONCE,
            # runs late occurrences of one job once: a failover may coalesce them, as a late tick does).
            status, body = sim.request(region, "POST", "/v1/jobs", {
                "name": f"{region}-every-minute-{i}", "type": "RATE", "schedule": "PT1M", "target": HOOK,
                "misfirePolicy": "RUN_ALL"}, key=KEY)
            assert status == 201, body
            jobs[body["jobId"]] = {"region": region, "recurring": True,
                                   "first": parse_instant(body["nextFireAt"], "nextFireAt")}
        # A workflow every two minutes: its run starts step A, whose end starts step B.
        status, body = sim.request(region, "POST", "/v1/jobs", {
            "name": f"{region}-workflow", "type": "RATE", "schedule": "PT2M", "misfirePolicy": "RUN_ALL",
            "steps": [{"name": "A", "target": HOOK}, {"name": "B", "target": HOOK, "dependsOn": ["A"]}]}, key=KEY)
        assert status == 201, body
        jobs[body["jobId"]] = {"region": region, "recurring": True, "every": 2 * MINUTE, "steps": ("A", "B"),
                               "first": parse_instant(body["nextFireAt"], "nextFireAt")}
        for i in range(plan.one_time):
            due = start + 150_000 + i * plan.one_time_every_s * 1000 + 137 * (i % 7)
            if due > start + (horizon_s - 150) * 1000:
                break
            status, body = sim.request(region, "POST", "/v1/jobs", {
                "name": f"{region}-once-{i}", "type": "ONE_TIME", "runAt": format_instant(due), "target": HOOK}, key=KEY)
            assert status == 201, body
            jobs[body["jobId"]] = {"region": region, "recurring": False, "first": due}
    return jobs


def _measure(sim, plan: Plan, jobs: dict[str, dict], end_of_creates: int, outcome: Outcome) -> None:
    fires = sim.fires()
    outcome.fires = len(fires)
    # Occurrences due up to 150 s before the end must have run somewhere (the last failover's
    # successor needs a lease and a tick; later ones may still be on their way).
    cutoff = outcome.events["end"] - 150_000
    ran: dict[str, list] = {}
    for fire in fires:
        ran.setdefault(fire.execution_id, []).append(fire)
    expected: list[str] = []
    for job_id, job in jobs.items():
        dues = []
        if job["recurring"]:
            due = job["first"]
            while due <= cutoff:
                dues.append(due)
                due += job.get("every", MINUTE)
        elif job["first"] <= cutoff:
            dues.append(job["first"])
        for due in dues:  # a workflow's run calls no target: its steps do
            run_id = f"{job_id}.{due:013d}"
            expected.extend([f"{run_id}.step.{s}" for s in job["steps"]] if job.get("steps") else [run_id])
    outcome.expected = len(expected)
    outcome.lost = [e for e in expected if e not in ran]
    for execution_id, calls in ran.items():
        # One execution's calls are all of one segment: under one epoch only its holder acts, and
        # a region whose lease was taken acts no more (its older epoch is refused).
        keys = [(f.epoch, f.attempt) for f in calls]
        if len(set(keys)) < len(keys):
            outcome.twice_in_an_epoch.append(execution_id)
        newest = -1
        for f in sorted(calls, key=lambda f: f.at_ms):
            if f.epoch < newest:
                outcome.after_a_newer_epoch.append(execution_id)
                break
            newest = max(newest, f.epoch)
        outcome.repeated_across_epochs += len({f.epoch for f in calls}) - 1
    # Failover: the first fire, by another region, of a job homed in the failed region, due after the event.
    index = {r: i for i, r in enumerate(plan.regions)}
    for event, region in (("kill", plan.regions[1]), ("partition", plan.regions[2])):
        at = outcome.events[event]
        elsewhere = [f.at_ms for f in fires if f.region != region and f.at_ms >= at
                     and home_index(f.job_id) == index[region]]
        outcome.failover_s[event] = (min(elsewhere) - at) / 1000 if elsewhere else float("nan")
    phases = {"before": (end_of_creates, outcome.events["kill"]),
              "kill to partition": (outcome.events["kill"], outcome.events["partition"]),
              "partition to heal": (outcome.events["partition"], outcome.events["heal"]),
              "after heal": (outcome.events["heal"], cutoff)}
    first_run = {e: min(f.at_ms for f in calls) for e, calls in ran.items()}
    for phase, (start, end) in phases.items():
        outcome.lateness[phase] = [first_run[e] - scheduled_ms_of(e) for e in expected if ".step.B" not in e
                                   if e in first_run and start <= scheduled_ms_of(e) < end]


def main(argv: list[str] | None = None) -> None:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    plan = QUICK if quick else FULL
    outcome = run(plan)
    print(f"{len(plan.regions)} regions ({', '.join(plan.regions)}), {outcome.segments} segments each; replication "
          f"lag {plan.lag_ms} ms, last writer wins; lease {plan.lease_ms} ms, clock bound {plan.clock_bound_ms} ms")
    print(f"killed {plan.regions[1]} after {plan.steady_s} s ({outcome.lost_writes} writes not yet replicated, "
          f"lost); cut {plan.regions[2]} off the ownership table {plan.killed_s} s later; healed it "
          f"{plan.partitioned_s} s after that; ran {plan.healed_s} s more")
    rows = [("occurrences due (before the end minus 150 s)", outcome.expected),
            ("fires lost (goal 0)", len(outcome.lost)),
            ("runs twice under one epoch and attempt, in any regions (goal 0)", len(outcome.twice_in_an_epoch)),
            ("calls under an older epoch after a newer one's (goal 0)", len(outcome.after_a_newer_epoch)),
            ("repeated target calls across epochs (same execution id)", outcome.repeated_across_epochs),
            ("target calls in all", outcome.fires),
            (f"{plan.regions[1]} killed: its jobs first fired elsewhere after (s)", f"{outcome.failover_s['kill']:.1f}"),
            (f"{plan.regions[2]} cut off: its jobs first fired elsewhere after (s)",
             f"{outcome.failover_s['partition']:.1f}"),
            ("goal: under one minute plus the lease (s)", f"{(MINUTE + plan.lease_ms) / 1000:.0f}")]
    print_table("Regions: a region killed, one partitioned, healed", rows, ("figure", "value"))
    late = [(phase, len(v), f"{percentile(v, 50):.0f}", f"{percentile(v, 99):.0f}", f"{max(v) if v else 0:.0f}")
            for phase, v in outcome.lateness.items()]
    print_table("Lateness of the first call after the due instant", late, ("phase", "fires", "p50 ms", "p99 ms", "max ms"))


if __name__ == "__main__":
    main()
