"""What moto hides: a time limit, eventually consistent reads, unprocessed batch items. Each test
drives the real code through a fault-injecting double (aws_doubles.py) and fails without the
safeguard it names."""
import math
from collections import Counter

import pytest

from jobsched.domain.schedule import format_instant
from jobsched.domain.timers import TIMER_SLICES, Timer, TimerKind, minute_of, segment_of, slice_of
from jobsched.service.handoff import HandOff
from jobsched.service.tick import Ticker
from jobsched.store import dynamo
from jobsched.store.aws import build_stores
from jobsched.store.dynamo import BATCH_RETRIES, BatchIncomplete
from jobsched.store.jobs import JobsStore
from jobsched.store.timers import TimersStore
from .aws_doubles import MortalContext, SlowPages, StaleReads, Unprocessed, tick_each_minute_out_of_time
from .harness import TENANT_A
from .test_faults import HOOK, assert_exactly_once

TICK_TIMEOUT_MS = 60_000


def jobs_due_in_minute(harness, minute, count):
    return [harness.create_job({"name": f"herd{i}", "type": "ONE_TIME", "target": HOOK,
                                "runAt": format_instant(minute * 60_000 + 30_000 + i)}) for i in range(count)]


def test_a_bucket_larger_than_one_run_completes_over_several_runs_none_lost_none_resent(harness):
    # Given 14 jobs due in one bucket, and a tick whose every page of 4 timers takes 20 s: a run
    # killed at Lambda's 60 s limit would restart the bucket every minute and never finish it.
    harness.ticks_enabled = False
    due_minute = minute_of(harness.clock.now_ms()) + 4
    jobs = jobs_due_in_minute(harness, due_minute, 14)
    stores = build_stores(harness.settings, harness.session, harness.clock)
    # When the tick runs each minute with the function's remaining time as its budget
    out_of_time = tick_each_minute_out_of_time(harness, stores, 4, 20_000,
                                               range(minute_of(harness.clock.now_ms()) + 1, due_minute + 8))
    # Then the bucket took several runs, each timer was sent once (no prefix resent), and each
    # job ran exactly once.
    assert out_of_time >= 2
    assert harness.queued_executions() == len(jobs)
    harness.ticks_enabled = True
    harness.advance(120)
    assert_exactly_once(harness, jobs)


def test_a_run_out_of_time_reports_the_minutes_it_is_behind(harness):
    harness.ticks_enabled = False
    due_minute = minute_of(harness.clock.now_ms()) + 3
    jobs_due_in_minute(harness, due_minute, 9)
    stores = build_stores(harness.settings, harness.session, harness.clock)
    stores.timers = SlowPages(TimersStore(harness.session.resource("dynamodb"), harness.settings.timers_table,
                                          page_size=2), harness.clock, 25_000, lambda: context)
    ticker = Ticker(stores, HandOff(stores, harness.clock, harness.settings.segments), harness.clock)
    harness.clock.set_ms((due_minute - 1) * 60_000 + 1_000)
    reports = []
    for segment in range(harness.settings.segments):
        context = MortalContext(harness.clock, TICK_TIMEOUT_MS)
        reports.append(ticker.run(segment, context.get_remaining_time_in_millis))
    assert any(r.out_of_time and r.behind_minutes >= 1 for r in reports)


def test_a_job_replaced_just_before_the_tick_fires_although_a_replica_still_has_the_old_version(harness):
    # Given a job, and a replica that has seen it only as created (generation 1)
    harness.ticks_enabled = False
    job = harness.create_job({"name": "moved", "type": "ONE_TIME", "target": HOOK,
                              "runAt": format_instant((minute_of(harness.clock.now_ms()) + 10) * 60_000)})
    stale = StaleReads(harness.session.client("dynamodb"))
    stale.snapshot(harness.settings.jobs_table, ("tenantId", "jobId"))
    # When it is replaced (generation 2, due sooner) and the tick reads it through that replica
    due = (minute_of(harness.clock.now_ms()) + 4) * 60_000
    status, replaced = harness.request("PUT", f"/v1/jobs/{job['jobId']}", {
        "name": "moved", "type": "ONE_TIME", "target": HOOK, "runAt": format_instant(due)})
    assert status == 200
    stores = build_stores(harness.settings, harness.session, harness.clock)
    stores.jobs = JobsStore(harness.session.resource("dynamodb"), harness.settings.jobs_table, client=stale)
    ticker = Ticker(stores, HandOff(stores, harness.clock, harness.settings.segments), harness.clock)
    harness.clock.set_ms(due - 60_000 + 1_000)
    for segment in range(harness.settings.segments):
        ticker.run(segment)
    harness.ticks_enabled = True
    harness.advance(120)
    # Then its new timer was not dropped as stale: it fired at its new instant
    assert [c.at_ms for c in harness.target.calls_for(job["jobId"])] == [due]


def test_unprocessed_keys_and_items_are_retried_with_growing_bounded_backoff(harness, monkeypatch):
    monkeypatch.setattr(dynamo.random, "random", lambda: 1.0)  # the full backoff, no jitter
    jobs = [harness.create_job({"name": f"u{i}", "type": "RATE", "schedule": "PT1H", "target": HOOK})
            for i in range(4)]
    slept = []
    flaky = Unprocessed(harness.session.client("dynamodb"), times=3)
    store = JobsStore(harness.session.resource("dynamodb"), harness.settings.jobs_table, sleep=slept.append,
                      client=flaky)
    found = store.get_many([(harness_tenant(harness), j["jobId"]) for j in jobs])
    assert set(j for _, j in found) == {j["jobId"] for j in jobs}
    assert slept == sorted(slept) and len(slept) == 3 and slept[0] > 0

    slept.clear()
    timers = TimersStore(harness.session.resource("dynamodb"), harness.settings.timers_table, sleep=slept.append,
                         client=Unprocessed(harness.session.client("dynamodb"), times=2))
    due = (minute_of(harness.clock.now_ms()) + 30) * 60_000
    written = [Timer(due + i, TimerKind.FIRE, TENANT_A, j["jobId"], 1, 0) for i, j in enumerate(jobs)]
    timers.put_many(written)
    assert len(slept) == 2 and slept[0] < slept[1]
    stored = [t for bucket in {t.bucket for t in written} for page in timers.pages(bucket) for t in page]
    assert set(written) <= set(stored)


def test_a_batch_that_stays_unprocessed_fails_after_bounded_retries(harness):
    jobs = [harness.create_job({"name": "t", "type": "RATE", "schedule": "PT1H", "target": HOOK})]
    slept = []
    throttled = Unprocessed(harness.session.client("dynamodb"), times=10_000, process_none=True)
    store = JobsStore(harness.session.resource("dynamodb"), harness.settings.jobs_table, sleep=slept.append,
                      client=throttled)
    with pytest.raises(BatchIncomplete):
        store.get_many([(harness_tenant(harness), jobs[0]["jobId"])])
    assert throttled.calls == BATCH_RETRIES + 1
    assert sum(slept) <= BATCH_RETRIES * dynamo.BATCH_BACKOFF_CAP_S


def harness_tenant(harness):
    return TENANT_A


def test_a_bucket_of_one_page_costs_two_watermark_writes_and_one_of_several_pages_saves_each_but_the_last(harness):
    import boto3

    harness.ticks_enabled = False
    due_minute = minute_of(harness.clock.now_ms()) + 4
    # More jobs in the second bucket than its slices hold in one page of two each (pigeonhole):
    # some slice has several pages.
    several = 2 * harness.settings.segments * TIMER_SLICES + 1
    jobs = jobs_due_in_minute(harness, due_minute, 9) + jobs_due_in_minute(harness, due_minute + 1, several)
    session = boto3.session.Session(region_name="us-east-1")
    writes = []
    session.events.register("provide-client-params.dynamodb.UpdateItem",
                            lambda params, **_: writes.append(params["UpdateExpression"])
                            if params["TableName"] == harness.settings.segments_table else None)
    stores = build_stores(harness.settings, session, harness.clock)
    positions = {}
    for bucket, page_size in ((due_minute, 500), (due_minute + 1, 2)):
        stores.timers = TimersStore(session.resource("dynamodb"), harness.settings.timers_table, page_size=page_size)
        ticker = Ticker(stores, HandOff(stores, harness.clock, harness.settings.segments), harness.clock)
        harness.clock.set_ms((bucket - 2) * 60_000 + 1_000)  # the tick that hands off `bucket`
        writes.clear()
        for segment in range(harness.settings.segments):
            assert bucket in ticker.run(segment).buckets
        positions[page_size] = sum("positionSk" in w for w in writes)
    assert positions[500] == 0  # each slice of each segment's bucket was one page: no position
    # Pages of two: a position after every page but the last of its slice.
    per_slice = Counter((segment_of(j["jobId"], harness.settings.segments), slice_of(j["jobId"], due_minute + 1))
                        for j in jobs[9:])
    assert positions[2] == sum(math.ceil(n / 2) - 1 for n in per_slice.values()) > 0
    harness.ticks_enabled = True
    harness.advance(240)
    assert_exactly_once(harness, jobs)
