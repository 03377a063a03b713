"""Forwarding a change to the region that schedules it (store/region_apis.py): the event carried,
marked, and every failure to get the holder's answer taken as unavailable."""
import io
import json

import pytest
from botocore.exceptions import ReadTimeoutError

from jobsched.store.region_apis import FORWARDED_BY, RegionApis, RegionUnreachable


class Lambda:
    def __init__(self, answer=None, error=None):
        self.answer, self.error, self.calls = answer, error, []

    def invoke(self, **kwargs):
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        return self.answer


class Session:
    def __init__(self, client):
        self.client_, self.regions = client, []

    def client(self, service, region_name, config):
        assert service == "lambda"
        self.regions.append(region_name)
        return self.client_


def payload(value, **extra):
    data = json.dumps(value).encode()
    return {"StatusCode": 200, "Payload": io.BytesIO(data), **extra}


EVENT = {"path": "/v1/executions/x/heartbeat", "headers": {"X-Callback-Token": "t"},
         "multiValueHeaders": {"X-Callback-Token": ["t"]}, "body": "{}"}


def test_the_event_goes_to_the_holders_api_function_marked_and_its_answer_comes_back():
    client = Lambda(payload({"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": "{}"}))
    session = Session(client)
    apis = RegionApis(session, "Jobsched-{region}-api", "eu-west-1")
    assert apis.call("us-east-1", EVENT)["statusCode"] == 200
    [call] = client.calls
    assert session.regions == ["us-east-1"] and call["FunctionName"] == "Jobsched-us-east-1-api"
    assert call["InvocationType"] == "RequestResponse"
    sent = json.loads(call["Payload"])
    assert sent["headers"] == {"X-Callback-Token": "t", FORWARDED_BY: "eu-west-1"}
    assert sent["multiValueHeaders"][FORWARDED_BY] == ["eu-west-1"] and sent["body"] == "{}"
    assert FORWARDED_BY not in EVENT["headers"]  # the caller's event is left as it was


@pytest.mark.parametrize("client", [
    Lambda(error=ReadTimeoutError(endpoint_url="https://lambda.us-east-1.amazonaws.com")),
    Lambda(payload({"errorMessage": "boom"}, FunctionError="Unhandled")),
    Lambda(payload("not an API answer")),
])
def test_no_answer_from_the_holder_is_unavailable(client):
    with pytest.raises(RegionUnreachable):
        RegionApis(Session(client), "Jobsched-{region}-api", "eu-west-1").call("us-east-1", EVENT)


def test_without_a_function_name_pattern_nothing_is_forwarded():
    assert not RegionApis(Session(Lambda()), "", "eu-west-1").configured
