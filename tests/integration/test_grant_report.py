"""The report of grants that no call used (local/grant_report.py): each principal's allowed
actions in the template against the (caller, action) pairs the strict layer allowed."""
from jobsched.local.grant_report import granted, text, unused

from .harness import KEY_A


def test_the_report_lists_a_functions_grants_until_a_call_uses_them(harness, template):
    grants = granted(template)
    assert "dynamodb:GetItem" in grants["authorizer"] and "sts:AssumeRole" in grants["worker"]
    assert any(name.startswith("Jobsched-TargetAccessRole") for name in grants)  # a role of no function
    # The API answered a request itself (no authorizer step): the authorizer made no call, so its
    # one grant is reported once it is asked for, and the API's own calls are not.
    assert harness.request("GET", "/v1/jobs")[0] == 200
    before = unused(grants, harness.strict.ledger.allowed, ["api", "authorizer"])
    assert before["authorizer"] == ["dynamodb:GetItem"]
    assert "dynamodb:Query" not in before.get("api", []) and "dynamodb:GetItem" not in before.get("api", [])
    # Through API Gateway's authorizer step: its GetItem is used now, and the report says so.
    assert harness.request("GET", "/v1/jobs", key=KEY_A, through_gateway=True)[0] == 200
    after = unused(grants, harness.strict.ledger.allowed, ["api", "authorizer"])
    assert "authorizer" not in after
    assert "authorizer" not in text(after) and (not after or "api: " in text(after))
