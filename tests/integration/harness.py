"""Drives the real handlers on moto with a fake clock: API → tick → SQS → worker."""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator
from urllib.parse import urlsplit

from jobsched.client import Client, Response, Retries
from jobsched.domain.clock import FakeClock
from jobsched.domain.executions import AttemptOutcome, Dispatch, ExecutionStatus
from jobsched.domain.jobs import Job
from jobsched.local.events import api_gateway_event, http_response
from jobsched.local.inprocess import InProcessStack
from jobsched.settings import Env

TENANT_A, KEY_A = "tenant-a", "key-a"
TENANT_B, KEY_B = "tenant-b", "key-b"


@dataclass
class Call:
    execution_id: str
    attempt: int
    at_ms: int
    job_id: str
    payload: object = None
    step: str | None = None  # a step of a run: its name (the X-Step header)


class WorkerDied(Exception):
    pass


class ProcessDied(BaseException):
    """The worker's process dies in the middle of an attempt (a Lambda timeout, out of memory): no
    code of the worker sees it, so nothing is recorded; the invocation fails and SQS returns its
    batch after the visibility timeout. (A BaseException: the worker records every Exception
    raised while calling a target as that attempt's failure.)"""


@dataclass
class RecordingTarget:
    """A target that dedupes nothing: every call is a side effect. Outcomes are scripted per
    job (a list consumed call by call); unscripted calls succeed."""

    clock: FakeClock
    calls: list[Call] = field(default_factory=list)
    script: dict[str, list[AttemptOutcome]] = field(default_factory=dict)
    step_script: dict[str, list[AttemptOutcome]] = field(default_factory=dict)  # by step name

    tokens: dict[str, str] = field(default_factory=dict)  # execution id → the latest callback token
    progress_seen: list = field(default_factory=list)
    crash_before_call: int = 0  # the next N calls die before reaching the target (worker crash)
    during_call: object = None  # a hook run inside the call (to interleave another worker)
    effects: list[str] = field(default_factory=list)  # execution ids whose call took effect

    def invoke(self, job: Job, dispatch: Dispatch, attempt: int, callback_token: str | None = None,
               progress=None) -> AttemptOutcome:
        if self.crash_before_call:
            self.crash_before_call -= 1
            raise ProcessDied("the worker process died after its claim")
        step = (job.spec.target.config.get("headers") or {}).get("X-Step")
        self.calls.append(Call(dispatch.execution_id, attempt, self.clock.now_ms(), job.job_id, job.spec.payload, step))
        if callback_token:
            self.tokens[dispatch.execution_id] = callback_token
        self.progress_seen.append(progress)
        planned = self.step_script.get(step) if step is not None else None
        planned = planned if planned else self.script.get(job.job_id)
        outcome = planned.pop(0) if planned else AttemptOutcome(True, ExecutionStatus.SUCCEEDED, None, {"ok": True})
        if self.during_call is not None:
            hook, self.during_call = self.during_call, None
            hook()
        if outcome.ok:  # a failed or timed-out call had no effect on the target
            self.effects.append(dispatch.execution_id)
        return outcome

    def effects_per_execution(self, job_id: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for execution_id in self.effects:
            if execution_id.startswith(job_id + "."):
                counts[execution_id] = counts.get(execution_id, 0) + 1
        return counts



    def calls_for(self, job_id: str) -> list[Call]:
        return [c for c in self.calls if c.job_id == job_id]


FAIL = AttemptOutcome(False, ExecutionStatus.FAILED, "HTTP 503: try later")
ACCEPTED = AttemptOutcome(True, ExecutionStatus.RUNNING, None, None, accepted=True)
TIMEOUT = AttemptOutcome(False, ExecutionStatus.TIMED_OUT, "no answer within 30 s")


class QuietHandler(BaseHTTPRequestHandler):
    """A loopback target for tests: subclasses record what they need in `on_post` and answer 200."""

    def on_post(self, body: bytes) -> None:
        raise NotImplementedError

    def do_POST(self):  # noqa: N802
        self.on_post(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@contextmanager
def loopback(handler: type[BaseHTTPRequestHandler], path: str = "/hook") -> Iterator[str]:
    """Serve `handler` on loopback (a thread per call, a backlog for bursts); yields its URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.request_queue_size = 64
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}{path}"
    finally:
        httpd.shutdown()


# The index lists by state read: JobsByStateShard, as the template deploys it by default (the
# tests' template holds it alone); JOBSCHED_TEST_STATE_INDEX=JobsByState runs the suite on a table
# that keeps the old index too (`-c stateIndex=JobsByState`: keep_old_state_index).
STATE_INDEX = os.environ.get("JOBSCHED_TEST_STATE_INDEX", "JobsByStateShard")


def keep_old_state_index(stack) -> None:
    """The Jobs table as a deployment that keeps the old state index has it (`-c stateIndex=JobsByState`,
    or the release before this one): JobsByState (partition tenantId, sort state, keys only) beside
    JobsByStateShard, in the emulator and in the strict layer's model of the template (which bills
    its index writes and refuses over a key's 1,000 WCU)."""
    from jobsched.store.job_lists import JOBS_BY_STATE_INDEX

    table = stack.settings.jobs_table
    stack.session.client("dynamodb").update_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": "tenantId", "AttributeType": "S"},
                              {"AttributeName": "state", "AttributeType": "S"}],
        GlobalSecondaryIndexUpdates=[{"Create": {
            "IndexName": JOBS_BY_STATE_INDEX,
            "KeySchema": [{"AttributeName": "tenantId", "KeyType": "HASH"}, {"AttributeName": "state", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "KEYS_ONLY"}}}])
    stack.strict.template.tables[table][JOBS_BY_STATE_INDEX] = ("tenantId", "state")
    stack.strict.template.projections[table][JOBS_BY_STATE_INDEX] = ("KEYS_ONLY", frozenset())


def ids_of_every_page(harness, query: str, limit: int) -> list[str]:
    """The job ids of `GET /v1/jobs?<query>` page after page, `limit` a page."""
    ids, cursor = [], None
    for _ in range(200):  # a list that repeats a page would never end
        status, page = harness.request("GET", f"/v1/jobs?{query}&limit={limit}" + (f"&cursor={cursor}" if cursor else ""))
        assert status == 200, page
        ids += [j["jobId"] for j in page["items"]]
        cursor = page["nextCursor"]
        if not cursor:
            return ids
    raise AssertionError(f"no last page after 200: {ids[-5:]}")


class Harness(InProcessStack):
    def __init__(self, template: dict, clock: FakeClock, state_index: str = STATE_INDEX) -> None:
        self.target = RecordingTarget(clock)
        super().__init__(template, clock, invoker=self.target, keys={TENANT_A: KEY_A, TENANT_B: KEY_B},
                         env_overrides={"api": {Env.JOBS_STATE_INDEX: state_index}})
        inner = self.worker._handler

        def invocation(event, context):
            try:
                return inner(event, context)
            except ProcessDied as died:  # the invocation fails as a whole, as a dead process's does
                raise RuntimeError("the worker's process died") from died

        self.worker._handler = invocation
        if state_index == "JobsByState":
            keep_old_state_index(self)

    def transport(self, method: str, url: str, headers, body: bytes | None, timeout: float) -> Response:
        """The Python client's transport (jobsched.client): the API function answers, as
        `request` calls it (the function alone, as the tests' requests reach it)."""
        parts = urlsplit(url)
        event = api_gateway_event(method, parts.path + (f"?{parts.query}" if parts.query else ""), dict(headers), body,
                                  api=self.api_type)
        return Response(*http_response(self.api.invoke(event)))

    def client(self, key: str | None = KEY_A, retries: Retries | None = None) -> Client:
        """The Python client, answered by this stack's API; a retry moves the fake clock, never sleeps."""
        retries = retries or Retries(sleep=lambda seconds: self.clock.advance_ms(int(seconds * 1000)))
        return Client("http://in-process", key, transport=self.transport, retries=retries)

    def create_job(self, body: dict, key: str = KEY_A) -> dict:
        status, answer = self.request("POST", "/v1/jobs", body, key)
        assert status == 201, answer
        return answer

    def execution(self, execution_id: str) -> dict:
        status, body = self.request("GET", f"/v1/executions/{execution_id}")
        assert status == 200, body
        return body

    def executions_of(self, job_id: str) -> list[dict]:
        status, body = self.request("GET", f"/v1/jobs/{job_id}/executions?limit=100")
        assert status == 200, body
        return body["items"]

    def queued_executions(self) -> int:
        """The executions the lanes' messages carry (a pack message carries several), read from the
        emulator's queues without receiving them (delayed ones included)."""
        import json as _json

        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.sqs.models import sqs_backends

        from jobsched.domain.packs import Pack

        backend = sqs_backends[DEFAULT_ACCOUNT_ID][self.sqs.meta.region_name]
        total = 0
        for url in self.lane_urls:
            queue = backend.queues[url.rstrip("/").rsplit("/", 1)[-1]]
            for message in list(queue._messages):
                total += len(Pack.from_json(_json.loads(message.body)["d"]).entries)
        return total

    def queue_depth(self) -> int:
        total = 0
        for url in self.lane_urls:
            attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            total += int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesDelayed"])
        return total
