"""What the API takes as input: every JSON string of a body is Unicode text, a target URL is
one the call could make, and each refusal is a 4xx naming its field (never a 500)."""
import json

import pytest

from .test_long_running_and_policies import accepted_job, callback

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
JOB = {"name": "n", "type": "RATE", "schedule": "PT1M", "target": HOOK}
LONE = "\ud800"  # json.dumps writes it as the escape "\ud800", which json.loads reads back alone


def fields(answer):
    return [d["field"] for d in answer["error"]["details"]]


@pytest.mark.parametrize("extra,field", [
    ({"payload": LONE}, "payload"),
    ({"payload": {"a": [1, {"b": "x" + LONE}]}}, "payload.a.1.b"),
    ({"payload": {"k" + LONE: 1}}, "payload.k\\ud800"),
    ({"tags": {"team": "a" + "\udfff"}}, "tags.team"),
    ({"tags": {LONE: "v"}}, "tags.\\ud800"),
    ({"name": LONE}, "name"),
    ({"target": {**HOOK, "headers": {"X-A": LONE}}}, "target.headers.X-A"),
])
def test_a_lone_surrogate_anywhere_in_a_job_is_a_400_naming_its_field(harness, extra, field):
    status, answer = harness.request("POST", "/v1/jobs", json.dumps({**JOB, **extra}))
    assert status == 400 and fields(answer) == [field], answer
    json.dumps(answer, ensure_ascii=False).encode("utf-8")  # the answer itself is text


def test_a_lone_surrogate_in_a_report_is_a_400_naming_its_field(harness):
    _, execution_id = accepted_job(harness)
    status, answer = callback(harness, execution_id, "heartbeat", {"progress": {"at": LONE}})
    assert status == 400 and fields(answer) == ["progress.at"], answer
    status, answer = callback(harness, execution_id, "complete", {"output": [LONE]})
    assert status == 400 and fields(answer) == ["output.0"], answer
    status, answer = callback(harness, execution_id, "fail", {"error": LONE})
    assert status == 400 and fields(answer) == ["error"], answer
    status, done = callback(harness, execution_id, "complete", {"output": "\U0001f600"})  # a pair is text
    assert status == 200 and done["output"] == "\U0001f600", done
