"""Aligned sends (docs/architecture.md, "Aligned sends"): the tick run a bucket is due in, handing it
off whole in one page, sends its messages just before whole seconds ahead of their instants, so SQS
makes each visible ALIGN_EARLY_MS before it; a bucket of several pages (a herd) goes out as before,
at once. Through the real tick function, on the strict layer."""
from jobsched.domain.schedule import format_instant
from jobsched.local.events import ACCOUNT
from jobsched.domain.timers import minute_of
from jobsched.service.handoff import HandOff
from jobsched.service.tick import Ticker
from jobsched.store.aws import build_stores
from jobsched.store.queues import ALIGN_EARLY_MS

MINUTE = 60_000
HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
PHASE_MS = 370  # the tick's rule runs at any instant of its minute, here 370 ms into a second


def quiet_bucket(harness, jobs: int = 30) -> tuple[int, dict[int, list[str]]]:
    """One-time jobs due at whole seconds of the bucket three minutes ahead, created with the ticks
    off; the clock is then moved to PHASE_MS into the minute whose tick hands that bucket off.
    Returns the bucket and the jobs by segment, the fullest segment first."""
    harness.ticks_enabled = False
    bucket = minute_of(harness.clock.now_ms()) + 3
    status, answer = harness.request("POST", "/v1/jobs/batch", {"jobs": [
        {"name": f"q{k}", "type": "ONE_TIME", "runAt": format_instant(bucket * MINUTE + k * 1000), "target": HOOK}
        for k in range(jobs)]})
    assert status == 200 and {r["status"] for r in answer["results"]} == {201}, answer
    by_segment: dict[int, list[str]] = {}
    for result in answer["results"]:
        by_segment.setdefault(harness.stores.lanes.segment_of(result["job"]["jobId"]), []).append(result["job"]["jobId"])
    harness.advance(((bucket - 2) * MINUTE + PHASE_MS - harness.clock.now_ms()) / 1000)
    return bucket, dict(sorted(by_segment.items(), key=lambda kv: -len(kv[1])))


def lane_messages(harness) -> list[tuple[int, int]]:
    """(due instant, visible instant) of each message the lanes hold: SQS makes a message visible
    its DelaySeconds after the send."""
    from moto.sqs.models import sqs_backends

    queues = sqs_backends[ACCOUNT][harness.region].queues
    return [(harness.stores.lanes.seal.open_pack(m.body).due_ms, int(m.delayed_until))
            for url in harness.lane_urls for m in queues[url.rsplit("/", 1)[-1]]._messages]


def test_the_tick_sends_a_quiet_bucket_just_before_each_whole_second_and_every_job_runs_once_on_time(harness):
    bucket, by_segment = quiet_bucket(harness)
    assert len(next(iter(by_segment.values()))) >= 10  # worth a wait (ALIGN_COST), within ALIGN_MAX_MESSAGES
    started = harness.clock.now_ms()
    for segment in by_segment:  # the fullest first: it waits for its second; the others find it come
        harness.tick_fn.invoke({"segment": segment})
    # Each message surfaces ALIGN_EARLY_MS before its instant (sent as they came, 630 ms before it)
    sends = lane_messages(harness)
    assert len(sends) == 30 and {due - visible for due, visible in sends} == {ALIGN_EARLY_MS}
    # and the runs waited once, less than a second
    assert harness.clock.now_ms() - started == 1000 - PHASE_MS - ALIGN_EARLY_MS
    harness.ticks_enabled = True
    harness.advance((bucket + 1) * MINUTE / 1000 - harness.clock.now_ms() / 1000, step_ms=50)
    for jobs in by_segment.values():
        for job_id in jobs:
            calls = harness.target.calls_for(job_id)
            due = int(calls[0].execution_id.rsplit(".", 1)[1]) if calls else None
            assert len(calls) == 1 and 0 <= calls[0].at_ms - due < 50, (job_id, calls)


def test_a_bucket_of_several_pages_is_sent_at_once_as_before(harness):
    bucket, by_segment = quiet_bucket(harness)
    segment, jobs = next(iter(by_segment.items()))
    stores = build_stores(harness.settings, harness.session, harness.clock)
    assert len(jobs) > 10
    stores.timers.page_size = 10  # a herd's bucket: more than a page (each page worth aligning alone)
    ticker = Ticker(stores, HandOff(stores, harness.clock, harness.settings.segments), harness.clock)
    started = harness.clock.now_ms()
    report = ticker.run(segment)
    assert report.buckets == [bucket] and report.handoff.dispatched == len(jobs)
    assert harness.clock.now_ms() == started  # no wait
    assert {due - visible for due, visible in lane_messages(harness)} == {1000 - PHASE_MS}


def test_a_run_near_its_time_limit_sends_at_once(harness):
    from jobsched.service.tick import TIME_RESERVE_MS

    bucket, by_segment = quiet_bucket(harness)
    segment, jobs = next(iter(by_segment.items()))
    stores = build_stores(harness.settings, harness.session, harness.clock)
    ticker = Ticker(stores, HandOff(stores, harness.clock, harness.settings.segments), harness.clock)
    started = harness.clock.now_ms()
    # Time for its page, not for a second's wait besides: the run must not wait into its reserve
    report = ticker.run(segment, remaining_ms=lambda: TIME_RESERVE_MS + 500)
    assert report.buckets == [bucket] and report.handoff.dispatched == len(jobs) and not report.out_of_time
    assert harness.clock.now_ms() == started
    assert {due - visible for due, visible in lane_messages(harness)} == {1000 - PHASE_MS}


def test_a_run_catching_up_sends_a_bucket_before_its_due_one_at_once(harness):
    bucket, by_segment = quiet_bucket(harness)
    harness.advance(60)  # the ticks of the bucket's minute missed: the next run catches it up
    segment, jobs = next(iter(by_segment.items()))
    stores = build_stores(harness.settings, harness.session, harness.clock)
    ticker = Ticker(stores, HandOff(stores, harness.clock, harness.settings.segments), harness.clock)
    started = harness.clock.now_ms()
    report = ticker.run(segment)
    assert report.buckets[-2:] == [bucket, bucket + 1] and report.handoff.dispatched == len(jobs)
    assert harness.clock.now_ms() == started
    assert {due - visible for due, visible in lane_messages(harness)} == {1000 - PHASE_MS}
