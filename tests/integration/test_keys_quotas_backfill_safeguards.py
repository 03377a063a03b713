"""Safeguards a mutation pass found untested (issue 26): a trigger's Idempotency-Key belongs to
its job, a cancelled job gives its quota place back to its own shard, and a backfill takes exactly
the occurrences of [from, to), at most MAX_BACKFILL of them."""
import json

from jobsched.domain.packs import Pack
from jobsched.domain.schedule import MS_PER_MINUTE, format_instant, parse_instant
from jobsched.service.jobs import MAX_BACKFILL

from .harness import TENANT_A
from .test_faults import take_messages
from .test_quotas_and_logs import BODY, call, limited_api, quota_items

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
HOUR_MS = 3600_000


def test_an_idempotency_key_reused_on_another_job_triggers_that_job(harness):
    # Given a job triggered with an Idempotency-Key
    first = harness.create_job({"name": "first", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    second = harness.create_job({"name": "second", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    key = {"Idempotency-Key": "nightly-2030-01-01"}
    status, one = harness.request("POST", f"/v1/jobs/{first['jobId']}/trigger", headers=key)
    assert status == 202
    # When the same key triggers another job, then that job again
    status, other = harness.request("POST", f"/v1/jobs/{second['jobId']}/trigger", headers=key)
    assert status == 202
    status, repeat = harness.request("POST", f"/v1/jobs/{second['jobId']}/trigger", headers=key)
    assert status == 202
    # Then the other job gets an execution of its own (the key is the job's, not the tenant's), and
    # its repeat is that execution
    assert one["executionId"].startswith(first["jobId"] + ".")
    assert other["executionId"].startswith(second["jobId"] + "."), other
    assert repeat["executionId"] == other["executionId"]
    harness.advance(5)
    assert harness.target.effects_per_execution(first["jobId"]) == {one["executionId"]: 1}
    assert harness.target.effects_per_execution(second["jobId"]) == {other["executionId"]: 1}


def test_a_cancelled_job_gives_its_place_back_to_its_own_shard(harness):
    # Given a busy tenant's active-jobs counter in 8 shards and jobs spread over them
    limited = limited_api(harness, MAX_ACTIVE_JOBS=100, MAX_CREATES_PER_SECOND=2000)
    created = [call(limited, "POST", "/v1/jobs", BODY)[1]["jobId"] for _ in range(8)]
    shards = {job_id: harness.stores.jobs.get(TENANT_A, job_id).quota_shard for job_id in created}
    victim = next((job_id for job_id, shard in shards.items() if shard != 0), None)
    assert victim is not None, shards
    counter = f"quota#active#{shards[victim]}"
    before = quota_items(harness, TENANT_A)
    assert before[counter] >= 1
    # When it is cancelled
    assert call(limited, "DELETE", f"/v1/jobs/{victim}")[0] == 200
    # Then its own shard has one place fewer taken, and no other shard changed
    after = quota_items(harness, TENANT_A)
    assert after == {**before, counter: before[counter] - 1}, (before, after)


def paused_hourly_job(harness):
    job = harness.create_job({"name": "hourly", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    harness.request("POST", f"/v1/jobs/{job['jobId']}/pause", {"reason": "an outage downstream"})
    return job, parse_instant(job["createdAt"], "createdAt")


def test_a_backfill_takes_the_occurrence_at_from_and_leaves_the_one_at_to(harness):
    # Given an hourly job that missed its occurrences at +1 h, +2 h and +3 h
    job, created = paused_hourly_job(harness)
    harness.clock.set_ms(created + 3 * HOUR_MS + 60_000)
    # When the window starts on one occurrence and ends on another
    window = {"from": format_instant(created + HOUR_MS), "to": format_instant(created + 3 * HOUR_MS)}
    status, filled = harness.request("POST", f"/v1/jobs/{job['jobId']}/backfill", window)
    # Then it runs [from, to): the one at `from`, not the one at `to`
    assert status == 202, filled
    assert filled["executionIds"] == [f"{job['jobId']}.{created + h * HOUR_MS:013d}" for h in (1, 2)]


def test_a_backfill_window_of_more_than_the_bound_is_refused_naming_to(harness):
    # Given a job with an occurrence every minute, over more than MAX_BACKFILL minutes past
    job = harness.create_job({"name": "minutely", "type": "CRON", "schedule": "* * * * *", "target": HOOK})
    created = parse_instant(job["createdAt"], "createdAt")
    harness.clock.set_ms(created + (MAX_BACKFILL + 10) * MS_PER_MINUTE)
    # When all of them are backfilled at once
    status, answer = harness.request("POST", f"/v1/jobs/{job['jobId']}/backfill",
                                     {"from": format_instant(created), "to": format_instant(harness.clock.now_ms())})
    # Then the request is refused, naming `to`, and nothing is sent
    assert status == 422, answer
    assert answer["error"]["details"][0]["field"] == "to" and str(MAX_BACKFILL) in answer["error"]["message"]
    assert "BACKFILL" not in [d.kind.value for m in take_messages(harness)  # a message is a pack of one or more
                              for d in Pack.from_json(json.loads(m["Body"])["d"]).entries]
