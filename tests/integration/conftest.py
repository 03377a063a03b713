import pytest
from moto import mock_aws

from jobsched.domain.clock import FakeClock
from jobsched.domain.schedule import parse_instant
from jobsched.local import strict_aws
from jobsched.local.emulator import emulator_time, serialized_in_process

from .harness import Harness

STRICT_REPORTS: list = []  # (test id, strict_aws.Report) of each test that ran a stack
ALLOWED_GRANTS: set = set()  # (caller, IAM action) the strict layer allowed in any test (grant_report.py)

# 2030-01-01T00:00:05Z: a few seconds past a minute boundary, as a real deployment would be.
START_MS = parse_instant("2030-01-01T00:00:05Z", "start")


@pytest.fixture
def clock():
    return FakeClock(START_MS)


@pytest.fixture
def harness(template, clock, monkeypatch, request):
    """A fresh emulator per test, its stack created from the synthesized template, under the
    strict AWS layer; the layer's report of the test is kept for the session's summary."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws(), serialized_in_process(), emulator_time(clock.now_ms):
        stack = None
        try:
            stack = Harness(template, clock)
            yield stack
        finally:
            strict_aws.activate(None)
            if stack is not None:
                STRICT_REPORTS.append((request.node.nodeid, stack.strict.report()))
                ALLOWED_GRANTS.update(stack.strict.ledger.allowed)
