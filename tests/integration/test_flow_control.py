"""Flow control: a tenant's executions sharing a key never run more than maxConcurrency at once
nor start more than ratePerSecond in a second; the excess waits without using an attempt; a slot
held by a dead worker comes back after its lease."""
import threading
import time

import pytest

from jobsched.domain.schedule import format_instant, parse_instant
from jobsched.handlers import worker
from jobsched.local.events import Function, sqs_event

from .harness import QuietHandler, loopback
from .test_faults import take_messages

ARN = "arn:aws:sqs:us-east-1:123456789012:lane"


class Counting(QuietHandler):
    """A partner API that counts the calls in flight at once."""
    lock = threading.Lock()
    in_flight = 0
    most = 0
    calls = 0

    def on_post(self, body: bytes) -> None:
        with Counting.lock:
            Counting.in_flight += 1
            Counting.calls += 1
            Counting.most = max(Counting.most, Counting.in_flight)
        time.sleep(0.3)
        with Counting.lock:
            Counting.in_flight -= 1


@pytest.fixture
def partner():
    Counting.in_flight = Counting.most = Counting.calls = 0
    with loopback(Counting, "/api") as url:
        yield url


def trigger_all(harness, jobs):
    for job in jobs:
        assert harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")[0] == 202


def deliver_concurrently(harness, rounds=40):
    """Each visible message to a worker of its own, all at once; then a second passes."""
    for _ in range(rounds):
        messages = take_messages(harness)
        if not messages and harness.queue_depth() == 0:
            return
        workers = [Function("worker", worker.make_handler(harness.envs["worker"], harness.clock, harness.session))
                   for _ in messages]
        threads = [threading.Thread(target=w.invoke, args=(sqs_event([m], ARN),)) for w, m in zip(workers, messages)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        harness.clock.set_ms(harness.clock.now_ms() + 1000)


def executions(harness, jobs):
    return [e for job in jobs for e in harness.executions_of(job["jobId"])]


def test_max_concurrency_holds_at_the_target_and_the_excess_waits_without_an_attempt(harness, partner):
    jobs = [harness.create_job({"name": f"p{i}", "type": "CRON", "schedule": "0 3 * * *",
                                "target": {"type": "HTTP", "url": partner},
                                "flowControl": {"key": "partner-api", "maxConcurrency": 2}}) for i in range(6)]
    assert jobs[0]["flowControl"] == {"key": "partner-api", "maxConcurrency": 2}
    trigger_all(harness, jobs)
    deliver_concurrently(harness)
    ran = executions(harness, jobs)
    assert [e["status"] for e in ran] == ["SUCCEEDED"] * 6 and {e["attempt"] for e in ran} == {1}
    assert Counting.calls == 6 and Counting.most <= 2  # never more than 2 in flight
    waited = [e["throttledMs"] for e in ran if e["throttledMs"] is not None]
    assert len(waited) >= 4 and min(waited) >= 1000  # the excess waited, and shows for how long
    held = harness.stores.flow.held("tenant-a", "partner-api", 0)
    assert held == {}  # every slot was given back


def test_rate_per_second_holds_in_every_second(harness):
    jobs = [harness.create_job({"name": f"r{i}", "type": "CRON", "schedule": "0 3 * * *",
                                "target": {"type": "HTTP", "url": "http://127.0.0.1:9/r"},
                                "flowControl": {"key": "slow-api", "ratePerSecond": 2}}) for i in range(7)]
    trigger_all(harness, jobs)
    for _ in range(20):
        harness.deliver()
        harness.clock.set_ms(harness.clock.now_ms() + 500)
    ran = executions(harness, jobs)
    assert [e["status"] for e in ran] == ["SUCCEEDED"] * 7 and {e["attempt"] for e in ran} == {1}
    per_second = {}
    for e in ran:
        second = parse_instant(e["attempts"][0]["startedAt"], "startedAt") // 1000
        per_second[second] = per_second.get(second, 0) + 1
    assert max(per_second.values()) <= 2 and len(per_second) >= 4, per_second


def test_a_slot_held_by_a_dead_worker_comes_back_after_its_lease(harness):
    body = {"type": "CRON", "schedule": "0 3 * * *", "target": {"type": "HTTP", "url": "http://127.0.0.1:9/x"},
            "timeoutSec": 5, "flowControl": {"key": "one-at-a-time", "maxConcurrency": 1}}
    first = harness.create_job({"name": "first", **body})
    second = harness.create_job({"name": "second", **body})
    harness.target.crash_before_call = 1  # the first attempt's worker dies holding the slot
    trigger_all(harness, [first])
    harness.deliver()
    assert list(harness.stores.flow.held("tenant-a", "one-at-a-time", 0)) == \
        [harness.executions_of(first["jobId"])[0]["executionId"]]
    # Its job is cancelled meanwhile: the dead attempt's message, when it comes back, is stale and
    # never reaches the attempt's end, so only the slot's lease can free the slot.
    assert harness.request("DELETE", f"/v1/jobs/{first['jobId']}")[0] == 200
    trigger_all(harness, [second])
    harness.advance(30)  # the slot is held: the second waits
    assert harness.executions_of(second["jobId"])[0]["status"] == "PENDING"
    harness.advance(120, step_ms=5000)  # the dead attempt's lease (5 s + 60 s) has passed
    [done] = harness.executions_of(second["jobId"])
    assert (done["status"], done["attempt"]) == ("SUCCEEDED", 1) and done["throttledMs"] > 60_000
    assert harness.stores.flow.held("tenant-a", "one-at-a-time", 0) == {}  # the dead attempt's slot was reclaimed


def test_a_backfill_of_a_flow_controlled_job_is_sent_at_the_pace_its_key_admits(harness):
    job = harness.create_job({"name": "minutely", "type": "RATE", "schedule": "PT1M",
                              "target": {"type": "HTTP", "url": "http://127.0.0.1:9/b"},
                              "flowControl": {"key": "backfilled", "ratePerSecond": 2}})
    created = parse_instant(job["createdAt"], "createdAt")
    harness.request("POST", f"/v1/jobs/{job['jobId']}/pause", {"reason": "catch up later"})
    harness.advance(20 * 60 + 30, step_ms=60_000)
    window = {"from": format_instant(created), "to": format_instant(harness.clock.now_ms())}
    status, filled = harness.request("POST", f"/v1/jobs/{job['jobId']}/backfill", window)
    assert status == 202 and filled["count"] == 20, filled
    # Not all twenty at once, to be held back together: two a second, as the key admits them
    assert len(take_messages(harness)) <= 2
    assert harness.queue_depth() >= 18
