"""Batch create (shared/API.md, "v1 additions (round 4)"): POST /v1/jobs/batch, 1 to 100 jobs, a
result per job in order, per-job and per-batch idempotency, quotas per job in one counter write,
nothing half-created."""
import json

import pytest

from jobsched.handlers import api

from .harness import KEY_B, TENANT_A
from .test_quotas_and_logs import _quota_writes, call, limited_api, quota_items

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


def one_time(name: str, delay: int = 90, **extra) -> dict:
    return {"name": name, "type": "DELAYED", "delaySeconds": delay, "target": HOOK, "payload": {"n": name}, **extra}


def test_a_batch_creates_each_job_and_answers_a_result_per_job_in_order(harness):
    jobs = [one_time(f"j{i}") for i in range(5)]
    status, answer = harness.request("POST", "/v1/jobs/batch", {"jobs": jobs})
    assert status == 200, answer
    results = answer["results"]
    assert [r["index"] for r in results] == [0, 1, 2, 3, 4]
    assert {r["status"] for r in results} == {201}
    assert [r["job"]["name"] for r in results] == [f"j{i}" for i in range(5)]
    for result in results:  # each job is there, readable, and fires like one made alone
        assert harness.request("GET", f"/v1/jobs/{result['job']['jobId']}")[1]["state"] == "ACTIVE"
    harness.advance(120)
    for result in results:
        calls = harness.target.calls_for(result["job"]["jobId"])
        assert len(calls) == 1 and calls[0].payload == {"n": result["job"]["name"]}


def test_one_jobs_bad_input_never_fails_the_others(harness):
    jobs = [one_time("good"), {**one_time("bad"), "target": {"type": "HTTP", "url": "ftp://x"}},
            {"name": "no-type"}, "not an object", one_time("also-good")]
    status, answer = harness.request("POST", "/v1/jobs/batch", {"jobs": jobs})
    assert status == 200, answer
    statuses = [r["status"] for r in answer["results"]]
    assert statuses[0] == 201 and statuses[4] == 201
    assert all(400 <= s < 500 for s in statuses[1:4])
    bad = answer["results"][1]["error"]
    assert bad["details"] and bad["details"][0]["field"].startswith("target")
    assert answer["results"][2]["error"]["details"][0]["field"] == "type"
    assert answer["results"][3]["error"]["details"][0]["field"] == "job"
    listed = {j["name"] for j in harness.request("GET", "/v1/jobs?limit=100")[1]["items"]}
    assert {"good", "also-good"} <= listed and "bad" not in listed


@pytest.mark.parametrize("body, field", [({"jobs": []}, "jobs"), ({"jobs": [one_time("x")] * 101}, "jobs"),
                                         ({}, "jobs"), ({"jobs": [], "extra": 1}, "extra")])
def test_the_envelope_is_checked_first_naming_the_field(harness, body, field):
    status, answer = harness.request("POST", "/v1/jobs/batch", body)
    assert status == 400, answer
    assert field in {d["field"] for d in answer["error"]["details"]}


def test_a_batch_over_its_size_bound_is_413(harness):
    big = "x" * 200_000
    jobs = [one_time(f"j{i}", payload=big) for i in range(27)]  # about 5.4 MB of body
    status, answer = harness.request("POST", "/v1/jobs/batch", {"jobs": jobs})
    assert status == 413 and answer["error"]["details"][0]["field"] == "body"


def test_per_job_idempotency_keys_give_the_same_job_and_a_changed_body_conflicts(harness):
    first = harness.request("POST", "/v1/jobs/batch", {"jobs": [one_time("a", idempotencyKey="k-a"),
                                                               one_time("b")]})[1]["results"]
    again = harness.request("POST", "/v1/jobs/batch", {"jobs": [one_time("a", idempotencyKey="k-a"),
                                                               one_time("b")]})[1]["results"]
    assert again[0]["status"] == 201 and again[0]["job"]["jobId"] == first[0]["job"]["jobId"]
    assert again[1]["job"]["jobId"] != first[1]["job"]["jobId"]  # no key: a second job
    changed = harness.request("POST", "/v1/jobs/batch", {"jobs": [one_time("a2", idempotencyKey="k-a")]})[1]
    assert changed["results"][0]["status"] == 409
    # The same key through the single create is the same job too (one key space per tenant).
    status, single = harness.request("POST", "/v1/jobs", one_time("a"), headers={"Idempotency-Key": "k-a"})
    assert status == 201 and single["jobId"] == first[0]["job"]["jobId"]


def test_the_batch_key_repeats_the_whole_answer_and_refuses_another_body(harness):
    body = {"jobs": [one_time("a"), one_time("b")]}
    key = {"Idempotency-Key": "batch-1"}
    first = harness.request("POST", "/v1/jobs/batch", body, headers=key)[1]["results"]
    again = harness.request("POST", "/v1/jobs/batch", body, headers=key)[1]["results"]
    assert [r["job"]["jobId"] for r in again] == [r["job"]["jobId"] for r in first]
    status, answer = harness.request("POST", "/v1/jobs/batch", {"jobs": [one_time("c")]}, headers=key)
    assert status == 409 and answer["error"]["code"] == "CONFLICT"
    assert len(harness.request("GET", "/v1/jobs?limit=100")[1]["items"]) == 2


def test_quotas_count_each_job_in_one_counter_write_and_refuse_those_past_them(harness):
    import boto3

    session = boto3.session.Session(region_name="us-east-1")
    writes = _quota_writes(harness, session)
    from jobsched.local.events import Function
    from jobsched.settings import Env

    env = {**harness.envs["api"], Env.MAX_ACTIVE_JOBS: "7", Env.MAX_CREATES_PER_SECOND: "50"}
    limited = Function("api", api.make_handler(env, harness.clock, session))
    status, answer = call(limited, "POST", "/v1/jobs/batch", {"jobs": [one_time(f"j{i}") for i in range(5)]})
    assert [r["status"] for r in answer["results"]] == [201] * 5
    assert len(writes) == 1  # five places in one write
    harness.clock.advance_ms(1000)
    del writes[:]
    status, answer = call(limited, "POST", "/v1/jobs/batch", {"jobs": [one_time(f"k{i}") for i in range(4)]})
    assert [r["status"] for r in answer["results"]] == [201, 201, 429, 429]
    assert answer["results"][2]["error"]["code"] == "QUOTA_EXCEEDED"
    assert len(writes) == 2  # the write that did not fit (its old item says 2 remain), then the 2
    assert quota_items(harness, TENANT_A)["quota#active"] == 7


def test_the_creates_per_second_quota_refuses_the_jobs_past_this_seconds_rate(harness):
    limited = limited_api(harness, MAX_CREATES_PER_SECOND=3)
    status, answer = call(limited, "POST", "/v1/jobs/batch", {"jobs": [one_time(f"j{i}") for i in range(5)]})
    assert [r["status"] for r in answer["results"]] == [201, 201, 201, 429, 429]
    assert "3 jobs created in one second" in answer["results"][3]["error"]["message"]
    harness.clock.advance_ms(1000)  # the next second takes the rest
    status, answer = call(limited, "POST", "/v1/jobs/batch", {"jobs": [one_time(f"j{i}") for i in range(3, 5)]})
    assert [r["status"] for r in answer["results"]] == [201, 201]


def test_a_job_whose_timer_cannot_be_written_is_taken_back_with_its_quota_place(harness, monkeypatch):
    from botocore.exceptions import ClientError

    from jobsched.service.handoff import HandOff

    real_place = HandOff.place
    failing = {"name": "fails"}

    def place(self, timer, job):
        if job is not None and job.spec.name == failing["name"]:
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
                              "PutItem")
        return real_place(self, timer, job)

    monkeypatch.setattr(HandOff, "place", place)
    status, answer = harness.request("POST", "/v1/jobs/batch", {"jobs": [one_time("ok"), one_time("fails")]})
    assert [r["status"] for r in answer["results"]] == [201, 503]
    assert answer["results"][1]["error"]["code"] == "THROTTLED"
    names = {j["name"] for j in harness.request("GET", "/v1/jobs?limit=100")[1]["items"]}
    assert names == {"ok"}  # nothing half-created: the job without its timer is gone
    assert quota_items(harness, TENANT_A)["quota#active"] == 1


def test_a_batch_is_the_tenants_own(harness):
    status, answer = harness.request("POST", "/v1/jobs/batch", {"jobs": [one_time("b-job")]}, KEY_B)
    assert status == 200
    job_id = answer["results"][0]["job"]["jobId"]
    assert harness.request("GET", f"/v1/jobs/{job_id}")[0] == 404  # tenant A does not see it
    assert harness.request("GET", "/v1/jobs/batch")[0] in (404, 405)
    assert harness.request("POST", "/v1/jobs/batch", {"jobs": [one_time("x")]}, key="nope")[0] == 401


def test_the_cli_sends_a_json_lines_file_in_batches_and_retries_the_jobs_past_the_rate(harness, tmp_path,
                                                                                        monkeypatch):
    from jobsched.cli import batch

    from .test_calendars import run_cli

    monkeypatch.setattr(batch, "BATCH_SIZE", 4)  # 10 lines: batches of 4, 4 and 2
    slept = []
    monkeypatch.setattr(batch.time, "sleep", lambda seconds: (slept.append(seconds),
                                                              harness.clock.advance_ms(int(seconds * 1000))))
    lines = [json.dumps(one_time(f"line{i}")) for i in range(10)]
    lines[3] = json.dumps({**one_time("bad"), "delaySeconds": -1})
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(lines[:5]) + "\n\n" + "\n".join(lines[5:]) + "\n")
    # Creates a second: 6, so the second batch is cut short and its rest sent a second later.
    monkeypatch.setattr(harness, "api", limited_api(harness, MAX_CREATES_PER_SECOND=6))
    code, out = run_cli(harness, "jobs", "create", "--file", str(path), "--priority", "HIGH")
    assert slept == [1.0], out  # the jobs past the second's six, sent again once, a second later
    rows = [row.split("\t") for row in out.strip().splitlines()]
    assert [int(r[0]) for r in rows] == [1, 2, 3, 4, 5, 7, 8, 9, 10, 11]  # file line numbers, blank skipped
    assert rows[3][1].startswith("422") or rows[3][1].startswith("400")
    assert code == 1  # one invalid request
    created = [r[1] for i, r in enumerate(rows) if i != 3]
    assert all(c.startswith("job_") for c in created)
    for job_id in created:  # the flags apply to each line
        assert harness.request("GET", f"/v1/jobs/{job_id}")[1]["priority"] == "HIGH"


def test_a_json_lines_file_names_its_bad_line(harness, tmp_path):
    from .test_calendars import run_cli

    path = tmp_path / "jobs.jsonl"
    path.write_text(json.dumps(one_time("ok")) + "\n[1, 2]\n")
    with pytest.raises(Exception, match="line 2"):
        run_cli(harness, "jobs", "create", "--file", str(path))
