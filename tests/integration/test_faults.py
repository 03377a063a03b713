"""The fault suite: each scenario injects one fault and asserts the two numbers that matter,
executions lost = 0 and target side effects per execution = exactly 1, with a recording target
that dedupes nothing."""
import json
import threading

import boto3
import pytest
from botocore.exceptions import ClientError

from jobsched.domain.schedule import format_instant
from jobsched.domain.timers import minute_of
from jobsched.handlers import tick, worker
from jobsched.local.events import Function, sqs_event
from jobsched.service.handoff import HandOff
from jobsched.service.outcomes import Outcome, Outcomes
from jobsched.service.tick import Ticker
from jobsched.service.worker import Worker
from jobsched.store.aws import build_stores

from .harness import TIMEOUT

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


def one_shots(harness, count, delay=70, **extra):
    return [harness.create_job({"name": f"j{i}", "type": "DELAYED", "delaySeconds": delay + i, "target": HOOK, **extra})
            for i in range(count)]


def assert_exactly_once(harness, jobs):
    for job in jobs:
        executions = harness.executions_of(job["jobId"])
        assert [e["status"] for e in executions] == ["SUCCEEDED"], (job["jobId"], executions)  # none lost
        assert harness.target.effects_per_execution(job["jobId"]) == {executions[0]["executionId"]: 1}


def take_messages(harness):
    messages = []
    for url in harness.lane_urls:
        while True:
            batch = harness.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not batch:
                break
            for m in batch:
                harness.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            messages += batch
    return messages


def test_1_the_same_message_delivered_twice_concurrently_and_in_turn(harness):
    jobs = one_shots(harness, 3)
    harness.advance(60)
    harness.clock.set_ms(harness.clock.now_ms() + 20_000)  # all due now
    messages = take_messages(harness)
    assert len(messages) == 3
    # concurrently: two workers get the same batch at the same moment
    workers = [Function("worker", worker.make_handler(harness.envs["worker"], harness.clock, harness.session,
                                                      harness.target)) for _ in range(2)]
    threads = [threading.Thread(target=w.invoke, args=(sqs_event(messages, "arn:aws:sqs:us-east-1:1:q"),))
               for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # and in turn: the same messages once more, after both finished
    workers[0].invoke(sqs_event(messages, "arn:aws:sqs:us-east-1:1:q"))
    harness.advance(6000, step_ms=30_000)  # a delivery handed back for a live lease comes again: dropped
    assert_exactly_once(harness, jobs)


def test_1_an_occurrence_of_a_recurring_job_delivered_twice_in_turn_runs_once(harness):
    # (A one-time job's repeat is also stopped by its COMPLETED state; a recurring job's stays
    # ACTIVE, so only the claim's condition stops this one.)
    job = harness.create_job({"name": "every-minute", "type": "RATE", "schedule": "PT1M", "target": HOOK})
    harness.ticks_enabled = False
    harness.advance(1)
    harness.ticks_enabled = True
    harness.clock.set_ms((minute_of(harness.clock.now_ms()) + 1) * 60_000)
    harness.tick_all()
    harness.clock.set_ms(harness.clock.now_ms() + 120_000)  # what that tick handed off is due
    messages = take_messages(harness)
    assert messages
    fn = Function("worker", worker.make_handler(harness.envs["worker"], harness.clock, harness.session, harness.target))
    for _ in range(2):
        fn.invoke(sqs_event(messages, "arn:aws:sqs:us-east-1:1:q"))
    effects = harness.target.effects_per_execution(job["jobId"])
    assert effects and set(effects.values()) == {1}, effects


def test_2_two_ticks_of_one_segment_race_over_the_same_bucket(harness):
    jobs = one_shots(harness, 8, delay=210)  # due in the bucket the racing ticks hand off
    both_read = threading.Barrier(2, timeout=10)

    def racing_ticker():
        stores = build_stores(harness.settings, harness.session, harness.clock)
        read = stores.watermarks.get
        waited: list = []

        def read_then_wait(segment):
            watermark = read(segment)
            if not waited:  # a run's first read (a claim that lost its condition reads again)
                waited.append(True)
                both_read.wait()  # neither tick has marked anything done when the other reads
            return watermark

        stores.watermarks.get = read_then_wait
        return Ticker(stores, HandOff(stores, harness.clock, harness.settings.segments), harness.clock)

    harness.clock.set_ms((minute_of(harness.clock.now_ms()) + 1) * 60_000)
    for segment in range(harness.settings.segments):
        tickers = [racing_ticker(), racing_ticker()]
        threads = [threading.Thread(target=t.run, args=(segment,)) for t in tickers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    # Each bucket was handed off by both ticks (packs or messages of one: the executions they carry).
    assert harness.queued_executions() == 2 * len(jobs)
    harness.advance(180)
    assert_exactly_once(harness, jobs)


@pytest.mark.parametrize("policy,expected", [
    # 01:05 and 02:05 ran (the last tick before the outage looked two minutes ahead); 03:05 to
    # 10:05 were missed; ticks resume at 11:00; until 15:05
    ("RUN_ONCE", {"SUCCEEDED": 2 + 1 + 5}),      # one catch-up (03:05), then from 11:05 on schedule
    ("RUN_ALL", {"SUCCEEDED": 2 + 8 + 5}),       # each missed minute, then on schedule
    ("SKIP", {"SKIPPED": 7, "SUCCEEDED": 2 + 1 + 5}),  # more than a minute late: SKIPPED; 10:05 is
    #                                                    within the grace minute and runs
])
def test_3_ticks_missing_for_10_minutes_then_resuming(harness, policy, expected):
    recurring = harness.create_job({"name": "every-minute", "type": "RATE", "schedule": "PT1M", "target": HOOK,
                                    "misfirePolicy": policy})
    one_off = one_shots(harness, 2, delay=200)
    harness.ticks_enabled = False
    harness.advance(60)  # the last tick before the outage claimed one more minute
    harness.advance(540)
    assert harness.target.calls_for(one_off[0]["jobId"]) == []
    harness.ticks_enabled = True
    harness.advance(300)
    statuses = {}
    for execution in harness.executions_of(recurring["jobId"]):
        statuses[execution["status"]] = statuses.get(execution["status"], 0) + 1
    assert statuses == expected
    assert_exactly_once(harness, one_off)  # due during the outage: late, not lost
    counts = harness.target.effects_per_execution(recurring["jobId"])
    assert set(counts.values()) == {1}


def test_4_a_worker_dying_after_its_claim_and_before_its_result(harness):
    jobs = one_shots(harness, 1, timeoutSec=30)
    harness.target.crash_before_call = 1
    harness.advance(90)
    [execution] = harness.executions_of(jobs[0]["jobId"])
    assert execution["status"] == "RUNNING"  # claimed by the worker that died
    harness.advance(5400, step_ms=30_000)  # SQS redelivers after the visibility timeout; lease expired
    [execution] = harness.executions_of(jobs[0]["jobId"])
    assert [a["status"] for a in execution["attempts"]] == ["LOST", "SUCCEEDED"]
    assert_exactly_once(harness, jobs)


def test_5_a_stale_worker_finishing_after_its_lease_was_taken_over(harness):
    jobs = one_shots(harness, 1, timeoutSec=30)
    harness.advance(60)
    harness.clock.set_ms(harness.clock.now_ms() + 20_000)
    [message] = take_messages(harness)
    dispatch = harness.stores.lanes.open(message["Body"])
    stores = build_stores(harness.settings, harness.session, harness.clock)
    handoff = HandOff(stores, harness.clock, harness.settings.segments)
    stale = Worker(stores, Outcomes(stores, handoff, harness.clock), harness.target, harness.clock)
    fresh = Worker(stores, Outcomes(stores, handoff, harness.clock), harness.target, harness.clock)
    results = []

    def frozen_past_the_lease():
        # The first worker is frozen inside its call; its lease expires and a redelivery takes over.
        harness.clock.advance_ms(120_000)
        results.append(fresh.process(dispatch))

    harness.target.during_call = frozen_past_the_lease
    harness.target.script[jobs[0]["jobId"]] = [TIMEOUT]  # the frozen call never reached the target
    results.append(stale.process(dispatch))
    assert [r.outcome for r in results] == [Outcome.SUCCEEDED, Outcome.STALE_RESULT]
    [execution] = harness.executions_of(jobs[0]["jobId"])
    assert execution["attempt"] == 2 and execution["nextAttemptAt"] is None  # no retry from the stale one
    assert [a["status"] for a in execution["attempts"]] == ["LOST", "SUCCEEDED"]
    assert_exactly_once(harness, jobs)


@pytest.mark.parametrize("moment", ["after the claim, before the query", "after the query, before done"])
def test_6_the_api_writes_a_timer_into_a_bucket_a_tick_has_just_claimed(harness, moment):
    stores = build_stores(harness.settings, harness.session, harness.clock)
    ticker = Ticker(stores, HandOff(stores, harness.clock, harness.settings.segments), harness.clock)
    created = []

    def create_in(minute):
        if not created:
            due = format_instant(minute * 60_000 + 30_000)
            created.extend(harness.create_job({"name": f"race{i}", "type": "ONE_TIME", "runAt": due, "target": HOOK})
                           for i in range(6))

    hooked = "claim" if moment.startswith("after the claim") else "mark_done"
    original = getattr(stores.watermarks, hooked)

    def race(segment, minute, *at):
        if hooked == "claim":
            claimed_at = original(segment, minute, *at)
            create_in(minute)  # the tick's query will see these timers
            return claimed_at
        create_in(minute)  # the tick has read its bucket: only the writer's own check saves these
        return original(segment, minute, *at)

    setattr(stores.watermarks, hooked, race)
    harness.clock.set_ms((minute_of(harness.clock.now_ms()) + 1) * 60_000)
    for segment in range(harness.settings.segments):
        ticker.run(segment)
    harness.advance(150)
    assert len(created) == 6
    assert_exactly_once(harness, created)


def test_7_a_target_that_times_out_then_succeeds(harness):
    jobs = one_shots(harness, 1)
    harness.target.script[jobs[0]["jobId"]] = [TIMEOUT]
    harness.advance(120)
    [execution] = harness.executions_of(jobs[0]["jobId"])
    assert [a["status"] for a in execution["attempts"]] == ["TIMED_OUT", "SUCCEEDED"]
    assert_exactly_once(harness, jobs)


@pytest.mark.parametrize("service,operation,after_calls", [
    ("sqs", "SendMessageBatch", 1),
    ("dynamodb", "Query", 1),
    ("dynamodb", "BatchGetItem", 0),
    ("dynamodb", "UpdateItem", 1),
])
def test_8_throttling_in_the_middle_of_a_tick(harness, service, operation, after_calls):
    jobs = one_shots(harness, 12, delay=210)  # due in a bucket the next tick hands off
    session = boto3.session.Session(region_name="us-east-1")
    seen = {"calls": 0, "failed": 0}

    def throttle_once(**kwargs):
        seen["calls"] += 1
        if seen["calls"] > after_calls and not seen["failed"]:
            seen["failed"] += 1
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, operation)

    session.events.register(f"before-call.{service}.{operation}", throttle_once)
    faulty = Function("tick", tick.make_handler(harness.envs["tick"], harness.clock, session))
    harness.clock.set_ms((minute_of(harness.clock.now_ms()) + 1) * 60_000)
    failures = 0
    for segment in range(harness.settings.segments):
        try:
            faulty.invoke({"segment": segment})
        except ClientError:
            failures += 1
    assert failures == 1 and seen["failed"] == 1
    harness.advance(180)  # the next ticks finish what the failed one left
    assert_exactly_once(harness, jobs)


def test_a_poison_message_lands_in_the_lanes_dlq_after_five_receives(harness):
    lane = harness.lane_urls[1]
    poison = harness.stores.lanes.seal.seal_text('{"not": "a dispatch"}')  # sealed, yet no dispatch
    harness.sqs.send_message(QueueUrl=lane, MessageBody=poison)
    for _ in range(6):
        harness.deliver()
        harness.clock.advance_ms(5401_000)  # past the visibility timeout: SQS makes it visible again
    dlq_arn = json.loads(harness.sqs.get_queue_attributes(QueueUrl=lane, AttributeNames=["RedrivePolicy"])
                         ["Attributes"]["RedrivePolicy"])["deadLetterTargetArn"]
    dlq = harness.sqs.get_queue_url(QueueName=dlq_arn.rsplit(":", 1)[-1])["QueueUrl"]
    [message] = harness.sqs.receive_message(QueueUrl=dlq, AttributeNames=["All"])["Messages"]
    assert message["Body"] == poison
    assert message["Attributes"]["ApproximateReceiveCount"] in ("5", "6")
