"""W3C trace context of an execution: one trace per execution, a span per attempt, well formed."""
import re

import pytest

from jobsched.domain import trace
from jobsched.domain.trace import trace_context, trace_id_of

TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-01")


@pytest.mark.parametrize("execution_id", ["job_abc.1893456000000", "job_abc.1893456000000.manual", "x"])
def test_every_attempt_of_an_execution_is_a_span_of_one_trace(execution_id):
    first, second = trace_context(execution_id, 1), trace_context(execution_id, 2)
    assert TRACEPARENT.fullmatch(first.traceparent) and TRACEPARENT.fullmatch(second.traceparent)
    assert first.trace_id == second.trace_id == trace_id_of(execution_id)
    assert first.span_id != second.span_id
    assert trace_context(execution_id, 1) == first  # a redelivery sends the same context


def test_executions_do_not_share_a_trace():
    ids = {trace_id_of(f"job_abc.{1893456000000 + 60_000 * i}") for i in range(1000)}
    assert len(ids) == 1000


def test_the_xray_form_names_the_same_ids():
    context = trace_context("job_abc.1893456000000", 3)
    root, parent, sampled = context.xray_header.split(";")
    assert root == f"Root=1-{context.trace_id[:8]}-{context.trace_id[8:]}"
    assert parent == f"Parent={context.span_id}" and sampled == "Sampled=1"


def test_an_all_zero_id_is_never_produced(monkeypatch):
    class Zero:
        def hexdigest(self):
            return "0" * 64

    monkeypatch.setattr(trace.hashlib, "sha256", lambda data: Zero())
    assert TRACEPARENT.fullmatch(trace_context("any", 1).traceparent)
