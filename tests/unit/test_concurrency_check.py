"""`make deploy` checks the account's Lambda concurrency against what the templates reserve before
deploying (infra/jobsched_infra/concurrency_check.py). Offline: account settings as
GetAccountSettings answers them, and stubbed clients; never a real AWS call."""
import io
import json

from botocore.exceptions import ClientError

from jobsched_infra.concurrency_check import QUOTA_CODE, check, main, reserved_by


def settings(total, unreserved):
    return {"AccountLimit": {"ConcurrentExecutions": total, "UnreservedConcurrentExecutions": unreserved,
                             "TotalCodeSize": 80530636800}, "AccountUsage": {"FunctionCount": 0}}


def test_the_default_template_reserves_the_api_the_tick_and_the_authorizer(template):
    reserved = reserved_by(template)
    assert sorted(reserved.values()) == [4, 10, 50]  # tick (2 per segment, 2 segments), authorizer, API


def test_an_account_with_room_passes_and_a_new_accounts_low_limit_is_refused_naming_both_ways_out(template):
    wanted = sum(reserved_by(template).values())  # 64
    assert check(settings(1000, 1000), [template]).ok
    assert check(settings(100 + wanted, 100 + wanted), [template]).ok  # exactly 100 left
    refused = check(settings(100 + wanted - 1, 100 + wanted - 1), [template], region="eu-west-1")
    assert not refused.ok
    assert QUOTA_CODE in refused.message and "--desired-value 164" in refused.message
    assert "reservedConcurrency=off" in refused.message and "eu-west-1" in refused.message
    # An account whose whole limit is 50 cannot reserve 64 either (its floor is its limit)
    assert not check(settings(50, 50), [template]).ok
    # Five regions' stacks are checked per Region: each against its own Region's settings
    assert check(settings(1000, 900), [template]).ok


def test_a_redeploy_counts_what_the_stack_already_holds(template):
    wanted = sum(reserved_by(template).values())
    # The stack's own reservations are already out of the unreserved count: not counted twice
    assert not check(settings(200, 200 - wanted), [template]).ok
    assert check(settings(200, 200 - wanted), [template], held=wanted).ok


class _Stub:
    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __getattr__(self, name):
        def call(**kwargs):
            self.calls.append((name, kwargs))
            answer = self.answers[name]
            if isinstance(answer, Exception):
                raise answer
            return answer(**kwargs) if callable(answer) else answer
        return call


def test_make_deploys_check_reads_the_assembly_and_the_accounts_settings_per_region(template, tmp_path):
    (tmp_path / "Jobsched.template.json").write_text(json.dumps(template))
    (tmp_path / "manifest.json").write_text(json.dumps({"artifacts": {
        "Jobsched": {"type": "aws:cloudformation:stack", "environment": "aws://unknown-account/unknown-region",
                     "properties": {"templateFile": "Jobsched.template.json"}}}}))
    missing = ClientError({"Error": {"Code": "ValidationError", "Message": "Stack with id Jobsched does not exist"}},
                          "ListStackResources")
    lambdas = {"us-east-1": _Stub({"get_account_settings": settings(100, 100)})}
    stacks = {"us-east-1": _Stub({"list_stack_resources": missing})}

    def client_for(service, region):
        return (lambdas if service == "lambda" else stacks)[region]
    out = io.StringIO()  # (the region: AWS_DEFAULT_REGION, us-east-1 in the tests)
    assert main([str(tmp_path)], client_for, out) == 1
    assert "request a higher limit" in out.getvalue() and "Concurrent executions" in out.getvalue()
    # A deployed stack's functions: their reservations count as held
    # ... every page of them: the stack has more than the 100 resources DescribeStackResources
    # would answer, and the API function is on the second page.
    first = [{"ResourceType": "AWS::SQS::Queue", "PhysicalResourceId": f"q{n}"} for n in range(100)]
    second = [{"ResourceType": "AWS::Lambda::Function", "PhysicalResourceId": "Jobsched-Api"}]

    def pages(StackName, NextToken=None):
        return ({"StackResourceSummaries": second} if NextToken == "page-2"
                else {"StackResourceSummaries": first, "NextToken": "page-2"})
    stacks["us-east-1"] = _Stub({"list_stack_resources": pages})
    lambdas["us-east-1"] = _Stub({"get_account_settings": settings(200, 150),
                                  "get_function_concurrency": {"ReservedConcurrentExecutions": 50}})
    assert main([str(tmp_path)], client_for, io.StringIO()) == 0  # 150 + 50 held - 64 = 136 >= 100
    assert ("get_function_concurrency", {"FunctionName": "Jobsched-Api"}) in lambdas["us-east-1"].calls
