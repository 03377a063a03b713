"""No request body may produce a 500: property-based inputs against POST and PUT."""
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

VALID = {"name": "fuzz", "type": "CRON", "schedule": "0 3 * * *", "timezone": "UTC",
         "target": {"type": "HTTP", "url": "https://example.com/x", "method": "POST", "headers": {}},
         "payload": {"a": 1}, "retryPolicy": {"maxAttempts": 3, "backoff": "EXPONENTIAL", "initialDelayMs": 1000,
                                              "maxDelayMs": 60000},
         "timeoutSec": 30, "priority": "NORMAL"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**63, max_value=2**63) | st.floats(allow_nan=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
field_names = st.sampled_from(sorted(VALID) + ["runAt", "delaySeconds", "startAt", "endAt", "jitterSec",
                                               "misfirePolicy", "overlapPolicy"])
interesting = st.sampled_from(["", "0 3 * * *", "cron(0 10 ? * MON-FRI *)", "rate(0 minutes)", "at(2030-01-01T00:00:00)",
                               "PT0S", "P1M", "99999-01-01T00:00:00Z", "2030-02-30T00:00:00Z", "Europe/Nowhere",
                               "* * * * 8", "L W # ?", "ONE_TIME", "DELAYED", "RATE", "HTTP", "SQS", -1, 0, 10**12])
mutated = st.builds(lambda name, value: {**VALID, name: value}, field_names, json_values | interesting)
deleted = st.builds(lambda name: {k: v for k, v in VALID.items() if k != name}, field_names)
bodies = st.one_of(mutated, deleted, json_values, st.dictionaries(field_names, json_values | interesting, max_size=6))

ALLOWED = {201, 400, 409, 413, 422, 429}  # 429: many creates in one fake second


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies)
def test_create_answers_a_4xx_or_201_never_a_500(harness, body):
    status, answer = harness.request("POST", "/v1/jobs", json.dumps(body))
    assert status in ALLOWED, (status, answer)
    if status != 201:
        assert answer["error"]["message"] and isinstance(answer["error"]["details"], list)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=60))
def test_any_text_body_is_answered_cleanly(harness, text):
    status, _ = harness.request("POST", "/v1/jobs", text)
    assert status in ALLOWED
