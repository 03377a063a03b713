"""What the API takes as input: every JSON string of a body is Unicode text, a target URL is
one the call could make, and each refusal is a 4xx naming its field (never a 500)."""
import json
from urllib.parse import quote

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


def api_with(harness, **settings):
    """The API function of this stack under other deployment settings (Env names)."""
    from jobsched.handlers import api
    from jobsched.local.events import Function, api_gateway_event, http_response, json_or_text
    function = Function("api", api.make_handler({**harness.envs["api"], **settings}, harness.clock, harness.session))

    def request(method, path, body):
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {harness.default_key}"}
        status, _, raw = http_response(function.invoke(api_gateway_event(method, path, headers, json.dumps(body),
                                                                         api=harness.api_type)))
        return status, json_or_text(raw)
    return request


@pytest.mark.parametrize("url", ["http://h.example:99999/", "http://h.example:-1/", "http://h.example:abc/",
                                 "http://h.example:0/", "http://h.example:１２/", "http://[::1/",
                                 "http://h.example/a\r\nX-Injected: 1", "http://h.exa\nmple/", "http://h.example/\x00",
                                 "http://h.example/a b", "http://h.example/\u202ex", "http://h..example/",
                                 "http://h.example/é"])
def test_a_url_no_call_could_use_is_a_400_naming_it(harness, url):
    for where, body in (("target.url", {**JOB, "target": {**HOOK, "url": url}}),
                        ("onSuccess.url", {**JOB, "onSuccess": {**HOOK, "url": url}})):
        status, answer = harness.request("POST", "/v1/jobs", body)
        assert status == 400 and fields(answer) == [where], answer
        assert "Value error" not in answer["error"]["message"], answer


LOOPBACK_SPELLINGS = ["127.0.0.1", "2130706433", "0x7f000001", "127.1", "0177.0.0.1", "0x7f.1",
                      "\uff11\uff12\uff17.\uff10.\uff10.\uff11", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]",
                      "localhost", "LocalHost.", "api.localhost", "[::1]", "0", "0.0.0.0"]


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
def test_the_stacks_own_endpoint_in_any_spelling_is_refused_at_creation(harness, host):
    request = api_with(harness, OWN_ENDPOINTS="127.0.0.1:8080,[::1]:8080", ALLOW_PRIVATE_TARGETS="true")
    status, answer = request("POST", "/v1/jobs", {**JOB, "target": {**HOOK, "url": f"http://{host}:8080/v1/jobs"}})
    assert status == 422 and fields(answer) == ["target.url"], answer
    status, answer = request("POST", "/v1/jobs", {**JOB, "target": {**HOOK, "url": f"http://{host}:8081/x"}})
    assert status == 201, answer  # the deployment allows private targets: another port is one


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS + ["10.0.0.1", "012.0.0.1", "169.254.169.254", "2852039166",
                                                     "[fd00::1]", "[2002:a9fe:a9fe::1]", "[64:ff9b::a9fe:a9fe]"])
def test_a_private_address_in_any_spelling_is_refused_at_creation_unless_the_deployment_allows_it(harness, host):
    request = api_with(harness, ALLOW_PRIVATE_TARGETS="false")
    for where, body in (("target.url", {**JOB, "target": {**HOOK, "url": f"http://{host}/x"}}),
                        ("steps.0.target.url", {**{k: v for k, v in JOB.items() if k != "target"},
                                                "steps": [{"name": "a", "target": {**HOOK, "url": f"http://{host}/"}}]})):
        status, answer = request("POST", "/v1/jobs", body)
        assert status == 422 and fields(answer) == [where], answer
    status, answer = request("POST", "/v1/jobs", {**JOB, "target": {**HOOK, "url": "https://93.184.216.34/x"}})
    assert status == 201, answer
    status, answer = request("POST", "/v1/jobs", {**JOB, "target": {**HOOK, "url": "https://hooks.example/x"}})
    assert status == 201, answer  # a name is checked where it is resolved: at the call


@pytest.mark.parametrize("extra,field", [
    ({"name": "   "}, "name"),
    ({"name": "\u3000\t"}, "name"),
    ({"name": "invoice\u202egpj.exe"}, "name"),
    ({"name": "a\u2066b"}, "name"),
    ({"tags": {"team": "a\nb"}}, "tags"),
    ({"tags": {"team": "a\u0085"}}, "tags"),
    ({"type": "CRON", "schedule": "0 3 * * *", "timezone": "localtime"}, "timezone"),
    ({"type": "CRON", "schedule": "0 3 * * *", "timezone": "posixrules"}, "timezone"),
    ({"type": "CRON", "schedule": "0 3 * * *", "timezone": "Factory"}, "timezone"),
    ({"type": "CRON", "schedule": "0 3 * * *", "timezone": "posix/Europe/Paris"}, "timezone"),
    ({"type": "ONE_TIME", "schedule": "at(2030-06-01T00:00:00)", "timezone": "localtime"}, "timezone"),
])
def test_names_tags_and_zones_that_are_no_such_thing_are_refused_naming_the_field(harness, extra, field):
    status, answer = harness.request("POST", "/v1/jobs", json.dumps({**JOB, **extra}))
    assert status in (400, 422) and fields(answer) == [field], answer
    assert "Value error" not in json.dumps(answer), answer


@pytest.mark.parametrize("zone", ["Europe/Paris", "UTC", "US/Eastern", "Etc/GMT+5", "EST5EDT"])
def test_a_zone_that_is_an_iana_name_is_taken(harness, zone):
    status, answer = harness.request("POST", "/v1/jobs", {**JOB, "type": "CRON", "schedule": "0 3 * * *",
                                                          "timezone": zone})
    assert status == 201, answer
    status, answer = harness.request("GET", f"/v1/schedule-preview?type=CRON&schedule=0+3+*+*+*&timezone={quote(zone)}")
    assert status == 200, answer
    status, answer = harness.request("GET", "/v1/schedule-preview?type=CRON&schedule=0+3+*+*+*&timezone=localtime")
    assert status == 422 and fields(answer) == ["timezone"], answer


def test_messages_leak_no_library_text(harness):
    status, answer = harness.request("POST", "/v1/jobs", '{"name": "n", "payload": ' + "9" * 5000 + "}")
    assert status == 400 and fields(answer) == ["body"], answer
    assert "sys." not in answer["error"]["message"] and "4,300 digits" in answer["error"]["message"], answer
    status, answer = harness.request("POST", "/v1/jobs", {**JOB, "target": {**HOOK, "url": "ftp://h.example/"}})
    assert status == 400 and not any(d["message"].startswith("Value error") for d in answer["error"]["details"])


def test_the_document_states_what_the_api_enforces():
    from jobsched.api.openapi import openapi_document
    document = openapi_document()
    paths, schemas = document["paths"], document["components"]["schemas"]

    def param(path, method, name):
        return next(p for p in paths[path][method]["parameters"] if p["name"] == name)

    assert param("/v1/jobs", "get", "limit")["schema"].items() >= {"type": "integer", "minimum": 1, "maximum": 100}.items()
    assert param("/v1/jobs/{jobId}/stats", "get", "window")["schema"]["enum"] == ["1h", "24h", "7d"]
    assert param("/v1/schedule-preview", "get", "schedule")["required"] is True
    assert param("/v1/jobs/{jobId}/occurrences", "get", "from")["schema"]["format"] == "date-time"
    assert param("/v1/calendars/{name}", "put", "name")["schema"]["pattern"] == "^[A-Za-z0-9_-]{1,64}$"
    assert paths["/v1/signing-secrets/rotate"]["post"]["requestBody"]["required"] is False
    assert paths["/v1/jobs"]["post"]["requestBody"]["required"] is True
    assert "400" in paths["/v1/jobs/{jobId}/trigger"]["post"]["responses"]
    job = schemas["JobRequest"]["properties"]
    assert "pattern" in job["name"] and job["steps"]["anyOf"][0]["maxItems"] == 100
    assert schemas["ExpectModel"]["properties"]["successWithinSec"].items() >= {"minimum": 60, "maximum": 604_800}.items()
    assert job["tags"]["maxProperties"] == 20 and "pattern" in job["tags"]["propertyNames"]
