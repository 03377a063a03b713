"""Job safeguards that a mutation pass found held by no test: who may pause, when a quota place is
given back, what a cancelled job refuses, an execution's tenant, when a job completes and when it
pauses itself. Service rules are driven on the harness's stores with its fake clock; store rules
call the store's conditional write directly."""
from dataclasses import replace

import pytest

from jobsched.domain.errors import NotFound
from jobsched.domain.executions import Dispatch, DispatchKind, ExecutionStatus, execution_id_for
from jobsched.domain.jobs import JobState
from jobsched.domain.schedule import parse_instant
from jobsched.service.handoff import HandOff
from jobsched.service.jobs import JobsService
from jobsched.service.outcomes import Outcomes

from .harness import FAIL, TENANT_A, TENANT_B
from .test_quotas_and_logs import quota_items

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
ONCE = {"maxAttempts": 1, "backoff": "FIXED", "initialDelayMs": 1000, "maxDelayMs": 1000}
HOURLY = {"name": "hourly", "type": "RATE", "schedule": "PT1H", "target": HOOK}


def service_of(harness):
    handoff = HandOff(harness.stores, harness.clock, harness.settings.segments)
    return JobsService(harness.stores, handoff, harness.clock), Outcomes(harness.stores, handoff, harness.clock)


def job_of(harness, job_id, tenant=TENANT_A):
    return harness.stores.jobs.get(tenant, job_id, consistent=True)


def active_places(harness, tenant=TENANT_A):
    return sum(used for counter, used in quota_items(harness, tenant).items() if "active" in counter)


def fire_of(job, run=1):
    due = job.created_ms + 3600_000
    return Dispatch(DispatchKind.FIRE, job.tenant_id, job.job_id, execution_id_for(job.job_id, due), due,
                    job.generation, run=run)


# --- pause ---------------------------------------------------------------------------------
def test_a_cancelled_job_is_not_paused(harness):
    job = harness.create_job(HOURLY)
    assert harness.request("DELETE", f"/v1/jobs/{job['jobId']}")[0] == 200
    status, answer = harness.request("POST", f"/v1/jobs/{job['jobId']}/pause", {"reason": "x"})
    assert status == 409, answer
    assert job_of(harness, job["jobId"]).state is JobState.CANCELLED


# --- quota places given back ---------------------------------------------------------------
def test_cancelling_a_completed_job_gives_no_place_back(harness):
    # Given two jobs holding places, one of them a one-off that ran and completed
    harness.create_job(HOURLY)
    one_off = harness.create_job({"name": "once", "type": "DELAYED", "delaySeconds": 5, "target": HOOK})
    assert active_places(harness) == 2
    harness.advance(30)
    assert job_of(harness, one_off["jobId"]).state is JobState.COMPLETED
    assert active_places(harness) == 1
    # When the completed job is cancelled
    assert harness.request("DELETE", f"/v1/jobs/{one_off['jobId']}")[0] == 200
    # Then the other job's place is still counted
    assert active_places(harness) == 1


def test_resuming_a_job_with_no_run_left_gives_its_place_back(harness):
    # Given a paused job whose endAt passed while it was paused
    job = harness.create_job({**HOURLY, "endAt": "2030-01-01T02:00:00Z"})
    end = parse_instant("2030-01-01T02:00:00Z", "endAt")
    harness.request("POST", f"/v1/jobs/{job['jobId']}/pause", {"reason": "x"})
    assert active_places(harness) == 1
    harness.clock.set_ms(end + 60_000)
    # When it is resumed
    status, resumed = harness.request("POST", f"/v1/jobs/{job['jobId']}/resume")
    # Then it is COMPLETED and its place is given back
    assert status == 200 and resumed["state"] == "COMPLETED", resumed
    assert active_places(harness) == 0


def test_a_create_that_lost_to_its_own_repeat_gives_its_place_back(harness, monkeypatch):
    # Given a create with an Idempotency-Key that wrote its job
    service, _ = service_of(harness)
    spec = job_of(harness, harness.create_job(HOURLY)["jobId"]).spec
    first, created = service.create(TENANT_A, spec, "h", "key-1")
    assert created and active_places(harness) == 2
    # When its repeat reads no job yet (the first one's write not seen) and so writes it too
    jobs, get, reads = harness.stores.jobs, harness.stores.jobs.get, []

    def not_seen_yet(tenant_id, job_id, consistent=False):
        reads.append(job_id)
        return None if len(reads) == 1 else get(tenant_id, job_id, consistent=consistent)

    monkeypatch.setattr(jobs, "get", not_seen_yet)
    job, _ = service.create(TENANT_A, spec, "h", "key-1")
    # Then its write loses to the job there, and the place it took is given back
    assert job.job_id == first.job_id
    assert active_places(harness) == 2


def test_a_job_end_handled_twice_gives_its_place_back_once(harness):
    # Given two jobs holding places, and a one-off job's last run ended, its end handled twice by
    # deliveries that both read the job ACTIVE
    harness.create_job(HOURLY)
    one_off = harness.create_job({"name": "once", "type": "DELAYED", "delaySeconds": 3600, "target": HOOK})
    _, outcomes = service_of(harness)
    job = job_of(harness, one_off["jobId"])
    dispatch = Dispatch(DispatchKind.FIRE, TENANT_A, job.job_id, execution_id_for(job.job_id, job.created_ms),
                        job.created_ms + 3600_000, job.generation)
    harness.clock.advance_ms(3601_000)
    outcomes.after_end(job, dispatch, ExecutionStatus.SUCCEEDED, harness.clock.now_ms())
    outcomes.after_end(job, dispatch, ExecutionStatus.SUCCEEDED, harness.clock.now_ms())
    # Then the job completed once and the other job's place is still counted
    assert job_of(harness, job.job_id).state is JobState.COMPLETED
    assert active_places(harness) == 1


# --- a cancelled job never runs --------------------------------------------------------------
def test_a_cancelled_job_is_not_triggered(harness):
    job = harness.create_job(HOURLY)
    harness.request("DELETE", f"/v1/jobs/{job['jobId']}")
    status, answer = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")
    assert status == 409, answer
    harness.advance(10)
    assert harness.target.calls_for(job["jobId"]) == []


def test_a_cancelled_job_is_not_backfilled(harness):
    job = harness.create_job(HOURLY)
    created = parse_instant(job["createdAt"], "createdAt")
    harness.request("DELETE", f"/v1/jobs/{job['jobId']}")
    harness.clock.set_ms(created + 3 * 3600_000)
    window = {"from": job["createdAt"], "to": "2030-01-01T02:30:00Z"}
    status, answer = harness.request("POST", f"/v1/jobs/{job['jobId']}/backfill", window)
    assert status == 409, answer


def test_a_cancelled_jobs_dead_execution_is_not_redriven(harness):
    job = harness.create_job({**HOURLY, "retryPolicy": ONCE})
    harness.target.script[job["jobId"]] = [FAIL]
    status, execution = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")
    harness.advance(10)
    assert harness.execution(execution["executionId"])["status"] == "DEAD"
    harness.request("DELETE", f"/v1/jobs/{job['jobId']}")
    status, answer = harness.request("POST", f"/v1/executions/{execution['executionId']}/redrive")
    assert status == 409, answer
    harness.advance(10)
    assert len(harness.target.calls_for(job["jobId"])) == 1


# --- an execution is read only by its tenant ------------------------------------------------
def test_an_execution_of_another_tenant_is_not_found_even_under_a_job_of_the_same_id(harness):
    # Given tenant A's triggered execution, and (by a collision of ids) a job of tenant B with the
    # same id as A's job
    job = harness.create_job(HOURLY)
    _, execution = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")
    a_job = job_of(harness, job["jobId"])
    harness.stores.jobs.put_new(replace(a_job, tenant_id=TENANT_B))
    service, _ = service_of(harness)
    # When tenant B reads A's execution
    with pytest.raises(NotFound):
        service.execution(TENANT_B, execution["executionId"])
    # (its own tenant reads it)
    assert service.execution(TENANT_A, execution["executionId"]).tenant_id == TENANT_A


# --- completion -----------------------------------------------------------------------------
def test_mark_completed_refuses_a_job_of_an_older_generation(harness):
    job = harness.create_job(HOURLY)
    read = job_of(harness, job["jobId"])
    harness.request("PUT", f"/v1/jobs/{job['jobId']}", {**HOURLY, "schedule": "PT2H"})
    assert job_of(harness, job["jobId"]).generation > read.generation
    assert harness.stores.jobs.mark_completed(read, harness.clock.now_ms()) is False
    assert job_of(harness, job["jobId"]).state is JobState.ACTIVE


def test_mark_completed_completes_a_job_once(harness):
    job = harness.create_job(HOURLY)
    read = job_of(harness, job["jobId"])
    assert harness.stores.jobs.mark_completed(read, harness.clock.now_ms()) is True
    assert harness.stores.jobs.mark_completed(read, harness.clock.now_ms()) is False


def test_a_manual_run_of_a_one_off_job_waiting_for_its_retry_does_not_complete_it(harness):
    # Given a one-off job whose fire failed and waits for its retry
    job = harness.create_job({"name": "once", "type": "DELAYED", "delaySeconds": 5, "target": HOOK,
                              "retryPolicy": {"maxAttempts": 2, "backoff": "FIXED", "initialDelayMs": 600_000,
                                              "maxDelayMs": 600_000}})
    harness.target.script[job["jobId"]] = [FAIL]
    harness.advance(20)
    assert len(harness.target.calls_for(job["jobId"])) == 1
    # When it is triggered by hand and that run succeeds
    assert harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")[0] == 202
    harness.advance(10)
    assert len(harness.target.calls_for(job["jobId"])) == 2
    # Then the job is still ACTIVE: its own fire has not ended
    assert job_of(harness, job["jobId"]).state is JobState.ACTIVE


# --- pausing itself -------------------------------------------------------------------------
def self_pausing_job(harness, threshold):
    job = harness.create_job({**HOURLY, "retryPolicy": ONCE, "pauseAfterFailures": threshold})
    return job_of(harness, job["jobId"])


def test_a_manual_run_ending_dead_does_not_count_toward_pausing(harness):
    job = harness.create_job({**HOURLY, "retryPolicy": ONCE, "pauseAfterFailures": 1})
    harness.target.script[job["jobId"]] = [FAIL]
    harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")
    harness.advance(10)
    assert len(harness.target.calls_for(job["jobId"])) == 1
    assert job_of(harness, job["jobId"]).state is JobState.ACTIVE


def test_a_cancelled_run_does_not_count_toward_pausing(harness):
    job = self_pausing_job(harness, 1)
    _, outcomes = service_of(harness)
    outcomes.after_end(job, fire_of(job), ExecutionStatus.CANCELLED, harness.clock.now_ms())
    assert job_of(harness, job.job_id).state is JobState.ACTIVE


def test_no_pause_is_written_below_the_threshold(harness, monkeypatch):
    job = self_pausing_job(harness, 2)
    _, outcomes = service_of(harness)
    writes = []
    monkeypatch.setattr(harness.stores.jobs, "pause_itself", lambda *args: writes.append(args) or False)
    outcomes.after_end(job, fire_of(job), ExecutionStatus.DEAD, harness.clock.now_ms())
    assert writes == []


def test_no_pause_is_written_for_a_job_read_paused(harness, monkeypatch):
    job = self_pausing_job(harness, 1)
    _, outcomes = service_of(harness)
    writes = []
    monkeypatch.setattr(harness.stores.jobs, "pause_itself", lambda *args: writes.append(args) or False)
    outcomes.after_end(replace(job, state=JobState.PAUSED), fire_of(job), ExecutionStatus.DEAD,
                       harness.clock.now_ms())
    assert writes == []


def test_the_pause_write_refuses_below_the_threshold(harness):
    job = self_pausing_job(harness, 3)
    assert harness.stores.jobs.count_dead(job, fire_of(job).execution_id, harness.clock.now_ms()) == 1
    assert harness.stores.jobs.pause_itself(job, 3, "r", harness.clock.now_ms()) is False
    assert job_of(harness, job.job_id).state is JobState.ACTIVE


def test_the_pause_write_refuses_a_job_no_longer_active(harness):
    job = self_pausing_job(harness, 1)
    harness.stores.jobs.count_dead(job, fire_of(job).execution_id, harness.clock.now_ms())
    assert harness.request("DELETE", f"/v1/jobs/{job.job_id}")[0] == 200
    assert harness.stores.jobs.pause_itself(job, 1, "r", harness.clock.now_ms()) is False
    assert job_of(harness, job.job_id).state is JobState.CANCELLED
