"""bench cost prices what the template deploys: provisioned capacity only for a table the template
provisions, KMS only with the stack's key, the idle pollers its event source mappings have; and the
pack fill it prices the 10,000/s columns at is the one the tick's pages give at the template's
segments (bench/pack_fill.py), which reproduces what `bench e2e` measured; the ticks run the
template's segments at every rate."""
from collections import Counter

import pytest

from bench.cost_measure import Measured, Scenario, Tally
from bench.cost_prices import (WhatIf, bill, empty_polls_per_s, has_kms_key, idle_pollers, lane_pollers,
                               per_execution_counts, provisioned_tables, quiet_month)
from bench.pack_fill import PAGE_SIZE, SETTLE_MINUTES, minute_fills, pack_fill, steady_pack_fill
from jobsched.settings import Env


def _template(billing="PAY_PER_REQUEST", key=False, capped=True):
    worker = {"Type": "AWS::Lambda::Function", "Properties": {"MemorySize": 256, "Environment": {"Variables": {
        Env.SERVICE_NAME: "jobsched-worker", Env.SEGMENTS: "4"}}}}
    resources = {"FunctionsWorker": worker,
                 "StorageJobs4C7573CB": {"Type": "AWS::DynamoDB::Table", "Properties": {"BillingMode": billing}},
                 "StorageExecutions50E2CF2D": {"Type": "AWS::DynamoDB::Table",
                                               "Properties": {"BillingMode": "PAY_PER_REQUEST"}},
                 "Api": {"Type": "AWS::ApiGatewayV2::Api", "Properties": {}}}
    for lane in ("High", "Normal", "Low"):
        resources[f"Esm{lane}"] = {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {
            "BatchSize": 10, **({"ScalingConfig": {"MaximumConcurrency": 100}} if capped else {})}}
    if key:
        resources["StorageKey"] = {"Type": "AWS::KMS::Key", "Properties": {}}
    return {"Resources": resources}


def _measured(tpl):
    fire = Tally(units=Counter({("worker", "Jobs", "write"): 1000.0, ("worker", "Executions", "write"): 2000.0}),
                 invocations=Counter({"worker": 1000, "tick": 4}), sqs_chunks=Counter({"worker": 3000}))
    idle = Tally(invocations=Counter({"tick": 12}))
    return Measured(Scenario("s", "recurring", 10, 1000, 1), 1000, idle, 12, Tally(), fire, {}, set(), tpl, 1.0)


def test_provisioned_capacity_is_priced_only_for_a_table_the_template_provisions():
    on_demand, provisioned = _template(), _template("PROVISIONED")
    assert provisioned_tables(on_demand) == set() and provisioned_tables(provisioned) == {"Jobs"}
    a, b = bill(_measured(on_demand), 10_000.0), bill(_measured(provisioned), 10_000.0)
    assert a["DynamoDB writes Jobs"] == pytest.approx(0.625)  # 1 WU an execution, on demand
    assert b["DynamoDB writes Jobs"] < a["DynamoDB writes Jobs"]  # bought at 70 %, by the hour
    assert a["DynamoDB writes Executions"] == b["DynamoDB writes Executions"]  # on demand in both


def test_kms_is_priced_only_with_the_stacks_key():
    without, with_key = _template(), _template(key=True)
    assert not has_kms_key(without) and has_kms_key(with_key)
    assert bill(_measured(without), 1.0)["KMS requests"] == 0.0 < bill(_measured(with_key), 1.0)["KMS requests"]
    month = quiet_month(_measured(without))
    assert month["KMS key (+ a rotated version a year)"] == 0.0
    assert quiet_month(_measured(without), WhatIf(kms=True))["KMS key (+ a rotated version a year)"] == 2.0


def test_idle_pollers_follow_the_mappings_maximum_concurrency():
    """Lambda keeps 5 pollers on an idle standard queue, 2 when the mapping has no MaximumConcurrency
    (services-sqs-scaling.html)."""
    assert idle_pollers(_template()) == 15 and idle_pollers(_template(capped=False)) == 6
    # Idle lanes poll every 20 s each; the lane with a message a second finds one before its 20 s.
    assert empty_polls_per_s(lane_pollers(_template()), 0.0) == pytest.approx(15 * 3 / 60)
    assert empty_polls_per_s(lane_pollers(_template()), 1.0) == pytest.approx(10 * 3 / 60, rel=0.02)


def test_the_pack_fill_model_gives_what_bench_e2e_measured_and_reads_the_codes_page():
    from jobsched.store.timers import TimersStore

    assert TimersStore.__init__.__defaults__[0] == PAGE_SIZE
    # bench e2e on the default template's 4 segments, whole segments, from idle: 77.9 entries a
    # message at 10,000/s in its first minute (single timers), 5.1 with --quick (20/s, 1 minute);
    # 4.2 at 10,000/s sampled 1/50 before timer packs (every minute's timers single).
    assert pack_fill(10_000, 4) == pytest.approx(77.9, rel=0.05)
    assert pack_fill(20, 4) == pytest.approx(5.1, abs=0.5)
    assert pack_fill(10_000, 4, 1 / 50) == pytest.approx(4.2, abs=0.3)


def test_timer_packs_of_dense_seconds_keep_the_fill_minute_after_minute():
    """A slice of timer packs is read in order of each pack's earliest timer. Packs spanning their
    page's whole due range made each minute's pages wider than the last, until every page sampled
    its whole minute (9 entries a message at 10,000/s after hours, against 78 in the first minute:
    bench e2e measured 77.9, 70.9, 63.3 over its three minutes). A pack of one dense due second
    (sparse seconds joined: second_runs) keeps the pages in due order: the fill of the first
    minute holds, and from the widest start it comes back."""
    path = [e / p for e, p in minute_fills(10_000, 4, minutes=4)]
    assert max(path) / min(path) < 1.03
    steady = steady_pack_fill(10_000, 4)
    assert steady == pytest.approx(path[0], rel=0.03)
    limit = [e / p for e, p in minute_fills(10_000, 4, minutes=SETTLE_MINUTES, mixed=True)]
    assert limit[0] < limit[1] < limit[2] < limit[3]  # from pages that each sampled the minute
    assert limit[-1] == pytest.approx(limit[-2], rel=0.03) == pytest.approx(steady, rel=0.03)


def test_joining_sparse_seconds_keeps_the_fill_of_packs_of_one_second_at_every_rate(monkeypatch):
    """Runs of sparse seconds in one timer pack (what a quiet deployment's next timers are: one item
    a bucket slice instead of one a timer) cost the lane messages' fill nothing where seconds are
    dense, and at most a few percent where a page spans many sparse ones, over 20 minutes."""
    import jobsched.domain.timer_packs as timer_packs

    for rate in (1, 60, 300, 1_000, 3_000):
        joined = [e / p for e, p in minute_fills(rate, 4, minutes=20)]
        monkeypatch.setattr(timer_packs, "SPARSE_SECOND_TIMERS", 1)  # every second alone
        alone = [e / p for e, p in minute_fills(rate, 4, minutes=20)]
        monkeypatch.undo()
        assert min(joined[-5:]) >= 0.95 * max(alone[-5:]), rate
        assert joined[-1] == pytest.approx(joined[1], rel=0.03), rate  # no widening minute after minute


def test_the_ticks_are_priced_at_the_templates_segments_at_every_rate():
    """bench cost priced the 10,000/s column's ticks at the sizing rule's 18 segments while the
    default template deploys 4: the ticks' runs follow the template's SEGMENTS."""
    four, eight = _template(), _template()
    eight["Resources"]["FunctionsWorker"]["Properties"]["Environment"]["Variables"][Env.SEGMENTS] = "8"
    for rate in (10_000.0, 1.0):
        runs = [per_execution_counts(_measured(t), rate)["tick_runs"] for t in (four, eight)]
        assert runs == pytest.approx([4 / (rate * 60), 8 / (rate * 60)])


def test_a_one_time_fill_keeps_its_jobs_writes():
    """A one-time fire completes its job (Jobs writes per entry): a fill scales its pack's counts
    (Executions, SQS, invocations), not its Jobs writes."""
    m = _measured(_template())
    m.scenario.kind = "one-time"
    full, twice = bill(m, 10_000.0), bill(m, 10_000.0, fill=2.0)
    assert twice["DynamoDB writes Jobs"] == full["DynamoDB writes Jobs"]
    assert twice["DynamoDB writes Executions"] == pytest.approx(full["DynamoDB writes Executions"] / 2)


def test_a_fill_scales_the_per_pack_counts_only():
    m = _measured(_template())
    half = bill(m, 10_000.0, fill=2.0)  # twice the measured fill: per-pack counts halve
    full = bill(m, 10_000.0)
    assert half["DynamoDB writes Executions"] == pytest.approx(full["DynamoDB writes Executions"] / 2)
    assert half["SQS requests"] == pytest.approx(full["SQS requests"] / 2, rel=1e-3)  # beside the idle lanes' polls


def test_the_pack_fill_model_follows_the_real_tick_minute_by_minute(template, monkeypatch):
    """bench e2e's simulation (the real tick, timer store, lanes and worker on a simulated clock) on
    one whole segment, with the tick's page cut to 10 and the rate cut to match (pages spanning
    what 500 span at 10,000 a second on 4 segments): each minute's fill is the model's, the first
    of single timers, then the same of timer packs (one due second each)."""
    import bench.pack_fill
    from bench.e2e import run_scenario
    from bench.e2e_model import Scenario, Simulation
    from jobsched.service.packs import PackRunner

    page, segments = 10, 2  # the test template's segments
    rate = round(10_000 / 4 * page / bench.pack_fill.PAGE_SIZE * segments)
    by_minute: dict[int, list[int]] = {}
    setup, run = Simulation.__init__, PackRunner.run

    def with_page(self, *args, **kwargs):
        setup(self, *args, **kwargs)
        self.stores.timers.page_size = page

    def counted(self, pack, *args, **kwargs):
        counts = by_minute.setdefault(pack.due_ms // 60_000, [0, 0])
        counts[0], counts[1] = counts[0] + len(pack.entries), counts[1] + 1
        return run(self, pack, *args, **kwargs)

    monkeypatch.setattr(Simulation, "__init__", with_page)
    monkeypatch.setattr(PackRunner, "run", counted)
    run_scenario(template, Scenario("fill", rate, 3, 20, sample=1 / segments))
    measured = [e / p for _, (e, p) in sorted(by_minute.items())]
    monkeypatch.setattr(bench.pack_fill, "PAGE_SIZE", page)
    modelled = [e / p for e, p in minute_fills(rate, segments, minutes=3)]
    assert measured == pytest.approx(modelled, rel=0.1)
    # the pages of timer packs no longer widen minute after minute (they did: 12 % a minute here)
    assert measured[2] == pytest.approx(measured[1], rel=0.05)


def test_joined_sparse_seconds_are_counted_and_priced_back_as_packs_of_one_second_would_write():
    """bench cost's built cut 'a run of sparse due seconds in one timer pack' is priced by putting
    back the write units that packs of one due second each would have written for the same
    hand-offs: the meter counts them (pack_timers again with every second alone), the bill adds
    them to the Timers writes."""
    import jobsched.store.timers as timers_store
    from bench.cost_measure import Meter, count_joined_seconds
    from jobsched.domain.timers import Timer, TimerKind

    # A quiet page's next timers: one segment's fires of a minute, one every 4 seconds
    page = [Timer(29_000_000 * 60_000 + i * 4_000, TimerKind.FIRE, "acme", f"job_{i:032x}", 1, 3) for i in range(15)]
    meter = Meter()
    meter.phase = "fire"
    with count_joined_seconds(meter):
        timers_store.pack_timers(page)
    assert timers_store.pack_timers.__name__ == "pack_timers"  # put back
    joined = meter.phases["fire"].timers_wu_joined
    assert 5 <= joined < 15  # 15 single items (1 WU each) against one item a bucket slice
    m = _measured(_template())
    m.fire.timers_wu_joined = 500.0  # over the 1,000 executions measured
    deployed, apart = quiet_month(m)["total"], quiet_month(m, WhatIf(timer_packs_of_one_second=True))["total"]
    assert apart - deployed == pytest.approx(0.5 * 730 * 3600 * 0.625 / 1e6, rel=1e-6)


def test_the_lanes_kms_requests_are_priced_at_the_templates_reuse_period():
    """SQS asks for a lane's data key once per sender role and reuse period: bench cost reads the
    period from the lanes (SQS's default 300 s when none is set), DynamoDB's table-key cache stays
    300 s."""
    from bench.cost_prices import lane_key_reuse_s

    tpl = _template(key=True)
    lanes = [{"Type": "AWS::SQS::Queue", "Properties": {"RedrivePolicy": {}, "KmsDataKeyReusePeriodSeconds": 3600}},
             {"Type": "AWS::SQS::Queue", "Properties": {"KmsDataKeyReusePeriodSeconds": 300}}]  # a dead-letter queue
    unset = _template(key=True)
    unset["Resources"]["Lane"] = {"Type": "AWS::SQS::Queue", "Properties": {"RedrivePolicy": {}}}
    tpl["Resources"].update({"Lane": lanes[0], "Dlq": lanes[1]})
    assert lane_key_reuse_s(tpl) == 3600 and lane_key_reuse_s(unset) == 300
    hour, five = (bill(_measured(t), 1.0)["KMS requests"] for t in (tpl, unset))
    # 3 lanes x 7 requests a reuse period, 15 of DynamoDB's a 300 s period (one container at 1/s)
    assert hour / five == pytest.approx((21 / 3600 + 15 / 300) / (21 / 300 + 15 / 300))
    assert bill(_measured(tpl), 1.0, WhatIf(lane_key_reuse_s=300))["KMS requests"] == pytest.approx(five)


def test_aligned_sends_are_priced_from_the_waits_measured_and_the_cut_by_the_model_it_replaced():
    """Aligned sends (built): a timed scenario's measured waits are priced, the worker's for each of
    its invocations and the tick's for each run at its memory; the cut's saving puts back the
    model's 0.5 s of the worker (UNALIGNED_WAIT_S) and no tick wait."""
    from dataclasses import replace

    from bench.cost_prices import TICK_GB, UNALIGNED_WAIT_S, price

    plain = _measured(_template())
    m = replace(plain, worker_wait_s=0.1, tick_wait_s=0.45)
    deployed, unaligned = bill(m, 1.0), bill(m, 1.0, WhatIf(unaligned_sends=True))
    assert unaligned == bill(plain, 1.0)  # as it was priced before
    gb_s = price("lambda_arm_gb_s") * 1e6
    runs = per_execution_counts(m, 1.0)["tick_runs"]
    assert deployed["Lambda GB-s tick"] - unaligned["Lambda GB-s tick"] == pytest.approx(runs * 0.45 * TICK_GB * gb_s)
    invocations = per_execution_counts(m, 1.0)["inv_worker"]
    assert unaligned["Lambda GB-s worker"] - deployed["Lambda GB-s worker"] == \
        pytest.approx(invocations * (UNALIGNED_WAIT_S - 0.1) * m.worker_gb * gb_s)


def test_a_metric_cut_is_priced_back_by_the_metrics_it_removed():
    """The Dispatched metric (built): the quiet month's metrics are the ones measured sent every hour;
    the cut's saving puts one back."""
    m = _measured(_template())
    m.fire.metrics = {("FireLatenessMs", (("service", "jobsched-worker"),))}
    line = next(k for k in quiet_month(m) if k.startswith("custom metrics"))
    assert quiet_month(m)[line] == pytest.approx(0.30)
    assert quiet_month(m, WhatIf(hourly_metrics_added=1))[line] == pytest.approx(0.60)
