"""One test per safeguard that the rest of the suite did not guard: each of these fails when its
safeguard alone is removed (checked by removing each, one at a time; see the reliability doc).

The fenced writes are driven at the data-access layer, where the condition lives, with the
interleaving that the condition exists for; the rest through the API and the handlers."""
import hashlib

import pytest

from jobsched.domain.errors import ConditionLost
from jobsched.domain.executions import Dispatch, DispatchKind, ExecutionStatus, execution_id_for
from jobsched.domain.schedule import format_instant
from jobsched.domain.timers import TIMER_SLICES, segment_of
from jobsched.service.handoff import LOOK_AHEAD_MINUTES
from jobsched.store import timers as timers_store

from .harness import KEY_A, KEY_B, TENANT_A

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
JOB_ID = "job_" + "0" * 32
DUE = 1_900_000_000_000


def dispatch(attempt: int = 1) -> Dispatch:
    return Dispatch(DispatchKind.FIRE, TENANT_A, JOB_ID, execution_id_for(JOB_ID, DUE), DUE, 1, attempt)


def claim(harness, attempt: int, now: int, lease: int):
    return harness.stores.executions.claim(dispatch(attempt), now, lease, "token-hash")


def status_of(harness) -> tuple[str, int]:
    execution = harness.stores.executions.get(JOB_ID, execution_id_for(JOB_ID, DUE))
    return execution.status.value, execution.attempt


# --- the attempt fence on an attempt's result write ---------------------------------------
def test_a_taken_over_attempt_cannot_write_its_result(harness):
    """Guards `attempt = :mine`: attempt 1's worker stalls past its lease, attempt 2 takes over and
    is RUNNING; attempt 1's late result must not land on attempt 2's execution."""
    claim(harness, 1, DUE, lease=DUE + 1000)
    assert claim(harness, 2, DUE + 5000, lease=DUE + 60_000).attempt == 2
    with pytest.raises(ConditionLost):
        harness.stores.executions.finish_attempt(dispatch(1), 1, ExecutionStatus.SUCCEEDED, [], DUE + 6000, None)
    assert status_of(harness) == ("RUNNING", 2)


def test_an_ended_attempt_cannot_write_a_second_result(harness):
    """Guards `#st = :running`: attempt 1 completed through its callback; the worker's own late
    result of the same attempt (a timeout, say) must not overwrite SUCCEEDED."""
    claim(harness, 1, DUE, lease=DUE + 60_000)
    harness.stores.executions.finish_attempt(dispatch(1), 1, ExecutionStatus.SUCCEEDED, [], DUE + 1000, None)
    with pytest.raises(ConditionLost):
        harness.stores.executions.finish_attempt(dispatch(1), 1, ExecutionStatus.DEAD, [], DUE + 2000, "timed out")
    assert status_of(harness) == ("SUCCEEDED", 1)


# --- the fenced heartbeat / progress write --------------------------------------------------
def test_a_heartbeat_of_a_replaced_or_ended_attempt_changes_nothing(harness):
    claim(harness, 1, DUE, lease=DUE + 1000)
    claim(harness, 2, DUE + 5000, lease=DUE + 60_000)
    with pytest.raises(ConditionLost):  # attempt 1 after the takeover
        harness.stores.executions.heartbeat(JOB_ID, execution_id_for(JOB_ID, DUE), 1, {"step": "old"},
                                            DUE + 999_000, DUE + 6000)
    harness.stores.executions.finish_attempt(dispatch(2), 2, ExecutionStatus.SUCCEEDED, [], DUE + 7000, None)
    with pytest.raises(ConditionLost):  # attempt 2 after it ended
        harness.stores.executions.heartbeat(JOB_ID, execution_id_for(JOB_ID, DUE), 2, {"step": "late"},
                                            DUE + 999_000, DUE + 8000)
    execution = harness.stores.executions.get(JOB_ID, execution_id_for(JOB_ID, DUE))
    assert execution.status is ExecutionStatus.SUCCEEDED and execution.progress is None


# --- the lease-expiry condition of a LOST verdict ---------------------------------------------
def test_a_heartbeat_between_the_lease_check_and_the_lost_verdict_wins(harness):
    """The LEASE timer read the execution with an expired lease; a heartbeat then extended it.
    The LOST verdict (written with lease_expired_by) must not stand over the heartbeat."""
    claim(harness, 1, DUE, lease=DUE + 1000)
    harness.stores.executions.heartbeat(JOB_ID, execution_id_for(JOB_ID, DUE), 1, None, DUE + 120_000, DUE + 1500)
    with pytest.raises(ConditionLost):
        harness.stores.executions.finish_attempt(dispatch(1), 1, ExecutionStatus.FAILED, [], DUE + 2000,
                                                 "missed its heartbeat deadline", retry_at_ms=DUE + 3000,
                                                 lease_expired_by=DUE + 2000)
    assert status_of(harness) == ("RUNNING", 1)


# --- the cancel-requested condition of a retry ------------------------------------------------
def test_a_failed_attempt_of_a_cancelled_execution_schedules_no_retry(harness):
    claim(harness, 1, DUE, lease=DUE + 60_000)
    harness.stores.executions.request_cancel(JOB_ID, execution_id_for(JOB_ID, DUE), 1)
    with pytest.raises(ConditionLost):
        harness.stores.executions.finish_attempt(dispatch(1), 1, ExecutionStatus.FAILED, [], DUE + 1000,
                                                 "HTTP 503", retry_at_ms=DUE + 2000)
    assert status_of(harness) == ("RUNNING", 1)


# --- the tick's claim before its query --------------------------------------------------------
def test_a_job_placed_while_the_tick_reads_its_bucket_still_fires(harness, monkeypatch):
    """Forces the API-versus-tick race in the order that needs the claim first: the tick has read
    its bucket's (empty) pages when the API places a timer in that very bucket of that segment.
    Only a tick that claimed the bucket before reading it makes the API dispatch that timer."""
    real_pages = timers_store.TimersStore.pages
    created: list[dict] = []
    forced = []

    def pages_then_create(self, bucket, after_sk=None):
        yield from real_pages(self, bucket, after_sk)
        minute, segment, *slice_ = (int(part) for part in bucket.split("#"))
        # After the bucket's last slice: the new timer lands in a slice the tick has already read.
        if forced or minute != harness.clock.now_ms() // 60_000 + LOOK_AHEAD_MINUTES \
                or slice_ != [TIMER_SLICES - 1]:
            return
        due = minute * 60_000 + 20_000  # in the bucket being read
        for _ in range(60):  # until one job lands in the segment whose bucket was just read
            job = harness.create_job({"name": "race", "type": "ONE_TIME", "runAt": format_instant(due),
                                      "target": HOOK})
            created.append(job)
            if segment_of(job["jobId"], harness.settings.segments) == segment:
                forced.append(job)
                return

    monkeypatch.setattr(timers_store.TimersStore, "pages", pages_then_create)
    harness.advance(60 - (harness.clock.now_ms() // 1000) % 60)  # to the next minute boundary: the tick runs
    assert forced, "the race was not forced"
    harness.advance(60 * LOOK_AHEAD_MINUTES + 30)
    for job in created:
        assert len(harness.target.calls_for(job["jobId"])) == 1, job["jobId"]


# --- one-time jobs and misfirePolicy SKIP -----------------------------------------------------
def test_a_late_one_time_job_runs_even_with_misfire_skip(harness):
    # due in a bucket no tick has claimed yet (the look-ahead covers the next two minutes only)
    job = harness.create_job({"name": "once", "type": "DELAYED", "delaySeconds": 210, "target": HOOK,
                              "misfirePolicy": "SKIP"})
    harness.ticks_enabled = False  # an outage of the rules: the occurrence becomes minutes late
    harness.advance(6 * 60)
    assert harness.target.calls_for(job["jobId"]) == []
    harness.ticks_enabled = True
    harness.advance(120)
    assert len(harness.target.calls_for(job["jobId"])) == 1
    [execution] = harness.executions_of(job["jobId"])
    assert execution["status"] == "SUCCEEDED"


# --- the tenant check before cancelling an execution ------------------------------------------
def test_another_tenant_cannot_cancel_an_execution_by_its_id(harness):
    job = harness.create_job({"name": "t", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    _, execution = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")
    status, _ = harness.request("POST", f"/v1/executions/{execution['executionId']}/cancel", key=KEY_B)
    assert status == 404
    assert harness.execution(execution["executionId"])["status"] == "PENDING"
    harness.advance(2)
    assert harness.execution(execution["executionId"])["status"] == "SUCCEEDED"


# --- the Idempotency-Key on trigger ----------------------------------------------------------
def test_a_repeated_trigger_with_its_key_a_second_later_runs_once(harness):
    job = harness.create_job({"name": "t", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    _, first = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger", headers={"Idempotency-Key": "once"})
    harness.clock.advance_ms(1500)  # a client retry after its timeout: another instant, another manual id
    _, again = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger", headers={"Idempotency-Key": "once"})
    assert again["executionId"] == first["executionId"]
    harness.advance(5)
    assert [c.execution_id for c in harness.target.calls_for(job["jobId"])] == [first["executionId"]]
    _, other = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger", headers={"Idempotency-Key": "twice"})
    assert other["executionId"] != first["executionId"]


# --- API keys stored hashed -------------------------------------------------------------------
def test_api_keys_are_stored_only_as_hashes(harness):
    table = harness.session.resource("dynamodb").Table(harness.settings.api_keys_table)
    items = table.scan()["Items"]
    assert items
    stored = repr(items)
    for key in (KEY_A, KEY_B):
        assert f"'{key}'" not in stored
    assert any(hashlib.sha256(KEY_A.encode()).hexdigest() in repr(item) for item in items)
    assert harness.request("GET", "/v1/jobs", key=KEY_A)[0] == 200
