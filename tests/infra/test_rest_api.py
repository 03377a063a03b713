"""`-c api=rest`: the REST API checks tenant keys before the API function with the same Lambda
authorizer as the HTTP API (REQUEST type, cached 60 s per Authorization header), on every method
and path but the routes that take no key (before: no authorizer, the function checked every key,
and a flood of bad keys filled its reserved executions)."""
import json

import pytest

from jobsched.api.routes import public_routes
from jobsched.handlers.authorizer import TENANT_CONTEXT_KEY, rest_answer

from .test_regions import functions_of, synth_app
from .test_template import resources


@pytest.fixture(scope="module")
def rest(tmp_path_factory):
    [stack] = synth_app(tmp_path_factory.mktemp("rest"), {"api": "rest"}).values()
    return stack["template"]


def method_paths(template) -> dict[tuple[str, str], dict]:
    """(HTTP method, path) -> the method's properties, its path rebuilt from the resources."""
    api_id = next(iter(resources(template, "AWS::ApiGateway::RestApi")))
    parts = {k: r["Properties"] for k, r in resources(template, "AWS::ApiGateway::Resource").items()}

    def path_of(ref) -> str:
        if ref == {"Fn::GetAtt": [api_id, "RootResourceId"]}:
            return ""
        props = parts[ref["Ref"]]
        return path_of(props["ParentId"]) + "/" + props["PathPart"]
    return {(m["Properties"]["HttpMethod"], path_of(m["Properties"]["ResourceId"]) or "/"): m["Properties"]
            for m in resources(template, "AWS::ApiGateway::Method").values()}


def test_the_rest_api_checks_keys_with_the_cached_lambda_authorizer_on_every_keyed_path(rest):
    [(authorizer_id, authorizer)] = resources(rest, "AWS::ApiGateway::Authorizer").items()
    props = authorizer["Properties"]
    assert (props["Type"], props["IdentitySource"]) == ("REQUEST", "method.request.header.Authorization")
    assert props["AuthorizerResultTtlInSeconds"] == 60  # how long a revoked key can still pass
    logical, authorizer_fn = functions_of(rest)["authorizer"]
    assert logical in json.dumps(props["AuthorizerUri"])
    assert authorizer_fn["ReservedConcurrentExecutions"] == 10
    methods = method_paths(rest)
    public = {(m, p) for m, p in public_routes()}
    assert public <= set(methods), public - set(methods)
    for key, method in methods.items():
        if key in public:
            assert method["AuthorizationType"] == "NONE", key
        else:  # ANY on /, on {proxy+} and on every resource made for a public route
            assert (method["AuthorizationType"], method["AuthorizerId"]) == ("CUSTOM", {"Ref": authorizer_id}), key
    # Every path reaches the function through the authorizer: / and the greedy {proxy+} of the root
    assert ("ANY", "/") in methods and ("ANY", "/{proxy+}") in methods
    # Paths beside and below the public ones do too (the most specific resource is taken)
    for key in (("ANY", "/v1/{proxy+}"), ("ANY", "/v1/health"), ("ANY", "/v1/executions/{executionId}"),
                ("ANY", "/v1/executions/{executionId}/{proxy+}")):
        assert methods[key]["AuthorizationType"] == "CUSTOM", key
    permissions = [p["Properties"] for p in resources(rest, "AWS::Lambda::Permission").values()
                   if p["Properties"]["FunctionName"] == {"Fn::GetAtt": [logical, "Arn"]}]
    assert permissions and "/authorizers/" in json.dumps(permissions[0]["SourceArn"])


def test_the_rest_authorizers_answer_is_a_policy_for_the_whole_stage():
    arn = "arn:aws:execute-api:us-east-1:123456789012:abc123/live/GET/v1/jobs"
    allowed = rest_answer(arn, "tenant-a")
    [statement] = allowed["policyDocument"]["Statement"]
    # Cached per key for every method and path: the policy names the stage, not the asking method
    assert statement == {"Action": "execute-api:Invoke", "Effect": "Allow",
                         "Resource": "arn:aws:execute-api:us-east-1:123456789012:abc123/live/*"}
    assert allowed["context"] == {TENANT_CONTEXT_KEY: "tenant-a"} and allowed["principalId"] == "tenant-a"
    denied = rest_answer(arn, None)
    assert denied["policyDocument"]["Statement"][0]["Effect"] == "Deny" and "context" not in denied
