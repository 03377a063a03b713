"""The served OpenAPI document against the public contract in shared/API.md."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = [ROOT.parent / "shared" / "API.md", ROOT / "shared" / "API.md"]
CONTRACT = next((p for p in CANDIDATES if p.exists()), None)

# Routes of the contract not served yet. Listed so that a route of the contract served later is
# checked here (the test then asks for its removal), and no other route may be missing.
NOT_YET_SERVED: set[tuple[str, str]] = set()
V1_ADDITIONS = "## v1 additions"

pytestmark = pytest.mark.skipif(CONTRACT is None, reason="shared/API.md is not beside this checkout")


def contract_text() -> str:
    return CONTRACT.read_text()


def documented_routes() -> set[tuple[str, str]]:
    routes = set()
    additions = contract_text().split(V1_ADDITIONS, 1)[-1]
    for line in additions.splitlines():  # a route the additions name in prose, at a line's start
        match = re.match(r"`(GET|POST|PUT|DELETE) (/v1/[^`?]+)(?:\?[^`]*)?`", line)
        if match and match.group(2) not in ("/v1/health", "/v1/openapi.json"):
            routes.add((match.group(1), match.group(2)))
    for line in contract_text().splitlines():
        if not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        match = re.match(r"\s*`(GET|POST|PUT|DELETE) ([^`?]+)(?:\?[^`]*)?`(.*)", cell)
        if not match:
            continue
        method, path, rest = match.groups()
        routes.add((method, path))
        for alternative in re.findall(r"/ `(\w[\w-]*)`", rest):  # "`POST .../pause` / `resume`"
            routes.add((method, path.rsplit("/", 1)[0] + "/" + alternative))
        # "`GET /v1/calendars` / `GET /v1/calendars/{name}` / `DELETE ...`": whole routes
        routes.update(re.findall(r"/ `(GET|POST|PUT|DELETE) ([^`?]+)`", rest))
    return routes


def json_blocks() -> list[dict]:
    """The complete examples of the core contract (the v1 additions show fragments)."""
    core = contract_text().split(V1_ADDITIONS)[0]
    blocks = re.findall(r"```json\n(.*?)```", core, re.S)
    return [json.loads(block.replace("{...}", "{}")) for block in blocks]


@pytest.fixture
def document(harness):
    status, body = harness.request("GET", "/v1/openapi.json", key=None)
    assert status == 200
    return body


def served_routes(document) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}


def props(document, name):
    return set(document["components"]["schemas"][name]["properties"])


def test_every_documented_route_is_served_and_nothing_else(document):
    documented = documented_routes()
    assert len(documented) == 28  # round 4 adds POST /v1/jobs/batch
    served = served_routes(document) - {("GET", "/v1/openapi.json")}
    assert not served & NOT_YET_SERVED, "served now: remove it from NOT_YET_SERVED"
    assert served | NOT_YET_SERVED == documented


def test_openapi_document_routes_are_the_routes_the_api_answers(harness, document):
    for method, path in served_routes(document):
        concrete = path.replace("{jobId}", "job_0").replace("{executionId}", "job_0.1")
        status, _ = harness.request(method, concrete, {} if method in ("POST", "PUT") else None)
        assert status != 404 or "job_0" in concrete, (method, path)


def test_job_fields_match_the_contract(document):
    request_example, execution_example = json_blocks()[0], json_blocks()[1]
    request_fields = set(request_example)
    assert request_fields <= props(document, "JobRequest")
    documented_extra = {"runAt", "delaySeconds", "startAt", "endAt", "overlapPolicy", "misfirePolicy", "jitterSec"}
    assert documented_extra <= props(document, "JobRequest")
    response_adds = {"jobId", "state", "nextFireAt", "createdAt", "updatedAt", "version"}
    assert request_fields | response_adds <= props(document, "Job")
    assert set(request_example["retryPolicy"]) == props(document, "RetryPolicyModel")
    assert set(execution_example) <= props(document, "Execution")
    assert set(execution_example["attempts"][0]) == props(document, "Attempt")


def test_target_fields_match_the_contract(document):
    expected = {"HttpTarget": {"type", "url", "method", "headers"}, "SqsTarget": {"type", "queueUrl"},
                "SnsTarget": {"type", "topicArn"},
                "EventBridgeTarget": {"type", "eventBusName", "source", "detailType"},
                "LambdaTarget": {"type", "functionArn"}}
    for name, fields in expected.items():
        assert props(document, name) == fields, name
    for name in ("eventBusName", "detailType", "functionArn", "topicArn", "queueUrl"):
        assert f"`{name}`" in contract_text()


def test_error_shape_matches_the_contract(document):
    example = re.search(r'Errors: `(\{"error".*?\})`', contract_text()).group(1)
    error = json.loads(example)["error"]
    assert set(error) == props(document, "ErrorBody")
    assert set(error["details"][0]) == props(document, "ErrorDetail")


def test_responses_validate_against_the_documented_models(harness):
    from jobsched.api import schemas

    job = harness.create_job({"name": "v", "type": "RATE", "schedule": "PT20S",
                              "target": {"type": "HTTP", "url": "http://127.0.0.1:9/x"}})
    schemas.Job.model_validate(job)
    harness.advance(25)
    status, page = harness.request("GET", f"/v1/jobs/{job['jobId']}/executions")
    schemas.ExecutionList.model_validate(page)
    schemas.JobList.model_validate(harness.request("GET", "/v1/jobs")[1])
    schemas.Error.model_validate(harness.request("GET", "/v1/jobs/job_nope")[1])
    schemas.Preview.model_validate(harness.request("GET", "/v1/schedule-preview?type=RATE&schedule=PT1M")[1])
    # The occurrence ledger: its answer and the fields the contract names.
    schemas.OccurrenceList.model_validate(harness.request("GET", f"/v1/jobs/{job['jobId']}/occurrences")[1])


def test_occurrence_fields_match_the_contract(document):
    fields = re.search(r'oldest first: `(\{"scheduledAt".*?\})`', contract_text(), re.S).group(1)
    assert set(re.findall(r'"(\w+)"', fields)) <= props(document, "Occurrence")
    assert "expect" in props(document, "JobRequest") and "expectation" in props(document, "Execution")


def steps_section() -> str:
    text = contract_text().split("### Steps", 1)[1]
    return text.split("\n### ", 1)[0]


def test_step_fields_match_the_contract(document):
    section = steps_section()
    fragment = re.search(r'```json\n"steps": (\[.*?\])\n```', section, re.S).group(1)
    steps = json.loads(fragment.replace("{...}", "{}"))
    documented = set().union(*(set(step) for step in steps))
    assert documented == {"name", "target", "dependsOn", "retryPolicy", "timeoutSec"}
    assert documented == props(document, "StepModel")
    assert "steps" in props(document, "JobRequest") and "steps" in props(document, "Job")
    summary = re.search(r'The run\'s Execution adds `"steps": \[\{(.*?)\}\]`', section, re.S).group(1)
    assert {name.strip().strip('"') for name in summary.split(",")} == props(document, "StepSummary")
    statuses = document["components"]["schemas"]["StepSummary"]["properties"]["status"]
    assert "UPSTREAM_FAILED" in json.dumps(statuses) and "UPSTREAM_FAILED" in section
    for header in ("X-Run-Id", "X-Step", "X-Execution-Id"):
        assert f"`{header}`" in section


def test_a_run_and_its_steps_validate_against_the_documented_models(harness):
    from jobsched.api import schemas

    hook = {"type": "HTTP", "url": "http://127.0.0.1:9/x"}
    job = harness.create_job({"name": "flow", "type": "DELAYED", "delaySeconds": 70, "steps": [
        {"name": "a", "target": hook}, {"name": "b", "target": hook, "dependsOn": ["a"], "timeoutSec": 30}]})
    schemas.Job.model_validate(job)
    harness.advance(200)
    runs = harness.request("GET", f"/v1/jobs/{job['jobId']}/executions")[1]
    schemas.ExecutionList.model_validate(runs)
    run = harness.execution(runs["items"][0]["executionId"])
    schemas.Execution.model_validate(run)
    assert [s["name"] for s in run["steps"]] == ["a", "b"]
    schemas.Execution.model_validate(harness.execution(run["steps"][1]["executionId"]))


def section(title: str) -> str:
    return contract_text().split(f"### {title}", 1)[1].split("\n### ", 1)[0]


def test_signing_and_flow_control_match_the_contract(document):
    signed = section("Signed calls")
    assert "`X-Jobsched-Signature: t=<unix seconds>,v1=<hex>`" in signed
    rotate = document["paths"]["/v1/signing-secrets/rotate"]["post"]
    assert "201" in rotate["responses"]
    answer = re.search(r"201 `\{(.*?)\}`", signed).group(1)
    assert {name.strip().strip('"') for name in answer.split(",")} == props(document, "SigningSecret")
    flow = section("Flow control")
    fields = json.loads(re.search(r"`flowControl: (\{.*?\})`", flow).group(1))
    assert set(fields) == props(document, "FlowControlModel")
    assert "flowControl" in props(document, "JobRequest") and "flowControl" in props(document, "Job")
    assert "`throttledMs`" in flow and "throttledMs" in props(document, "Execution")
