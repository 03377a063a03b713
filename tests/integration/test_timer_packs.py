"""Timer packs through the strict AWS layer: a herd of recurring jobs fires every minute from next
timers written packed (one Timers item per bucket slice instead of one per job), and a tick that
runs out of time inside a bucket of packs and single timers resumes after the last ITEM it handed
off: nothing lost, nothing sent twice."""
from collections import Counter


from jobsched.domain.schedule import format_instant
from jobsched.domain.timer_packs import PACK_KIND
from jobsched.domain.timers import Timer, bucket_key, minute_of
from jobsched.store.aws import build_stores
from .aws_doubles import tick_each_minute_out_of_time
from .test_faults import HOOK, assert_exactly_once



def create_batch(harness, bodies, per_second=50):
    """Batches at the tenant's create rate (maxCreatesPerSecond, 50 by default), a second apart."""
    jobs = []
    for first in range(0, len(bodies), per_second):
        status, answer = harness.request("POST", "/v1/jobs/batch", {"jobs": bodies[first:first + per_second]})
        assert status == 200 and {r["status"] for r in answer["results"]} == {201}, answer
        jobs += [r["job"]["jobId"] for r in answer["results"]]
        if harness.ticks_enabled:
            harness.advance(1)
        else:
            harness.clock.advance_ms(1_000)
    return jobs


def timer_items(harness):
    table = harness.session.resource("dynamodb").Table(harness.settings.timers_table)
    items, start = [], None
    while True:
        page = table.scan(**({"ExclusiveStartKey": start} if start else {}))
        items += page["Items"]
        start = page.get("LastEvaluatedKey")
        if not start:
            return items


def test_a_herd_of_recurring_jobs_fires_every_minute_from_packed_next_timers(harness):
    # Given a herd of jobs due at the top of every minute
    herd = 8 * harness.settings.segments * 8
    ids = create_batch(harness, [{"name": f"herd{i}", "type": "CRON", "schedule": "* * * * *", "target": HOOK}
                                 for i in range(herd)])
    first = minute_of(harness.clock.now_ms()) + 1
    # When five minutes pass
    harness.advance(5 * 60 + 30)
    # Then every job ran once a minute, each occurrence exactly once
    minutes = range(first, first + 5)
    for job_id in ids:
        assert harness.target.effects_per_execution(job_id) == {f"{job_id}.{m * 60_000}": 1 for m in minutes}
    # and the next timers written since are packs: each minute's herd is in a few items a bucket slice
    items = timer_items(harness)
    by_minute = {}
    for item in items:
        by_minute.setdefault(int(item["bucket"].split("#")[0]), []).append(item)
    # (The creates write the first timer of each job, and, their buckets claimed already, hand
    # each off at once with the next one: single timers, one job at a time, as before.)
    for placed in sorted(by_minute)[:2]:
        assert all(i.get("kind") != PACK_KIND for i in by_minute.pop(placed))
    assert len(by_minute) >= 3
    for minute, of_minute in by_minute.items():
        packed = sum(int(i["count"]) for i in of_minute if i.get("kind") == PACK_KIND)
        assert packed + sum(1 for i in of_minute if i.get("kind") != PACK_KIND) == herd, minute
        assert packed >= 0.9 * herd, minute
        assert len(of_minute) <= herd / 4, minute


def test_a_tick_out_of_time_inside_a_bucket_of_packs_resumes_after_the_last_item_none_lost_none_resent(harness):
    # Given one-time jobs due across one minute, whose timers are rewritten as packs of every
    # other job and single timers of the rest: single timers sort between a pack's timers
    harness.ticks_enabled = False
    due_minute = minute_of(harness.clock.now_ms()) + 4
    count = 6 * harness.settings.segments * 8
    ids = create_batch(harness, [{"name": f"o{i}", "type": "ONE_TIME", "target": HOOK,
                                  # a few due seconds: a pack holds the timers of one second
                                  "runAt": format_instant(due_minute * 60_000 + (i * 7_919) % 2_000)}
                                 for i in range(count)])
    table = harness.session.resource("dynamodb").Table(harness.settings.timers_table)
    written = [Timer.from_item(i) for i in timer_items(harness) if i["bucket"].split("#")[0] == str(due_minute)]
    assert sorted(t.job_id for t in written) == sorted(ids)
    with table.batch_writer() as batch:
        for timer in written:
            batch.delete_item(Key={"bucket": timer.bucket, "sk": timer.sort_key})
    written.sort(key=lambda t: t.sort_key)
    stores = build_stores(harness.settings, harness.session, harness.clock)
    stores.timers.put_many(written[::2], pack=True)
    stores.timers.put_many(written[1::2])
    assert any(i.get("kind") == PACK_KIND for i in timer_items(harness))
    # And a tick whose pages of two timers (a pack is one page) take 8 s each in a 60 s function
    out_of_time = tick_each_minute_out_of_time(harness, stores, 2, 8_000,
                                               range(minute_of(harness.clock.now_ms()) + 1, due_minute + 12))
    # Then the bucket took several runs, every timer was sent once, and each job ran exactly once
    assert out_of_time >= 3
    assert all(bucket_key(due_minute, s) for s in range(harness.settings.segments))
    assert harness.queued_executions() == len(ids)
    harness.ticks_enabled = True
    harness.advance(180)
    assert_exactly_once(harness, [{"jobId": j} for j in ids])
    assert Counter(len(harness.target.calls_for(j)) for j in ids) == {1: len(ids)}
