"""Drives the real handlers on moto with a fake clock: API → tick → SQS → worker."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import boto3

from jobsched.domain.clock import FakeClock
from jobsched.domain.executions import AttemptOutcome, Dispatch, ExecutionStatus
from jobsched.domain.jobs import Job
from jobsched.domain.schedule import MS_PER_MINUTE
from jobsched.handlers import api, tick, worker
from jobsched.local.events import Function, LanePoller, api_gateway_event, http_response, json_or_text
from jobsched.local.stack import LocalStack
from jobsched.service.auth import ApiKeys
from jobsched.settings import Env, Settings
from jobsched.store.aws import build_stores

TENANT_A, KEY_A = "tenant-a", "key-a"
TENANT_B, KEY_B = "tenant-b", "key-b"


@dataclass
class Call:
    execution_id: str
    attempt: int
    at_ms: int
    job_id: str


class WorkerDied(Exception):
    pass


@dataclass
class RecordingTarget:
    """A target that dedupes nothing: every call is a side effect. Outcomes are scripted per
    job (a list consumed call by call); unscripted calls succeed."""

    clock: FakeClock
    calls: list[Call] = field(default_factory=list)
    script: dict[str, list[AttemptOutcome]] = field(default_factory=dict)

    tokens: dict[str, str] = field(default_factory=dict)  # execution id → the latest callback token
    progress_seen: list = field(default_factory=list)
    crash_before_call: int = 0  # the next N calls die before reaching the target (worker crash)
    during_call: object = None  # a hook run inside the call (to interleave another worker)
    effects: list[str] = field(default_factory=list)  # execution ids whose call took effect

    def invoke(self, job: Job, dispatch: Dispatch, attempt: int, callback_token: str | None = None,
               progress=None) -> AttemptOutcome:
        if self.crash_before_call:
            self.crash_before_call -= 1
            raise WorkerDied("the worker process died after its claim")
        self.calls.append(Call(dispatch.execution_id, attempt, self.clock.now_ms(), job.job_id))
        if callback_token:
            self.tokens[dispatch.execution_id] = callback_token
        self.progress_seen.append(progress)
        planned = self.script.get(job.job_id)
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


class Harness:
    def __init__(self, template: dict, clock: FakeClock) -> None:
        self.clock = clock
        self.session = boto3.session.Session(region_name="us-east-1")
        stack = LocalStack.create(self.session, template)
        self.envs = stack.envs
        self.target = RecordingTarget(clock)
        self.api = Function("api", api.make_handler(self.envs["api"], clock, self.session))
        self.tick_fn = Function("tick", tick.make_handler(self.envs["tick"], clock, self.session))
        self.worker = Function("worker", worker.make_handler(self.envs["worker"], clock, self.session, self.target))
        self.settings = Settings.from_env(self.envs["api"], "api")
        self.stores = build_stores(self.settings, self.session)
        self.sqs = self.session.client("sqs")
        self.lane_urls = [self.envs["worker"][v] for v in Env.LANE_URL.values()]
        self.poller = LanePoller(self.sqs, self.lane_urls, self.worker)
        keys = ApiKeys(self.stores.api_keys, clock)
        keys.register(TENANT_A, KEY_A)
        keys.register(TENANT_B, KEY_B)
        # A deployed scheduler has been ticking: every segment has watermarks.
        self.tick_all()

    # --- the API, through the same API Gateway event the cloud sends -----------------------
    def request(self, method: str, path: str, body=None, key: str | None = KEY_A, headers=None):
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        if key is not None:
            all_headers["Authorization"] = f"Bearer {key}"
        text = body if isinstance(body, str) or body is None else json.dumps(body)
        status, _, raw = http_response(self.api.invoke(api_gateway_event(method, path, all_headers, text)))
        return status, json_or_text(raw)

    def create_job(self, body: dict, key: str = KEY_A) -> dict:
        status, answer = self.request("POST", "/v1/jobs", body, key)
        assert status == 201, answer
        return answer

    # --- time ------------------------------------------------------------------------------
    ticks_enabled = True  # False: an outage of the EventBridge rules

    def tick_all(self) -> None:
        if not self.ticks_enabled:
            return
        for segment in range(self.settings.segments):
            self.tick_fn.invoke({"segment": segment})

    def deliver(self) -> int:
        return self.poller.drain()

    def advance(self, seconds: float, step_ms: int = 1000) -> None:
        """Move the clock in steps; tick every segment on each minute boundary (as the
        EventBridge rules do) and deliver whatever SQS makes visible."""
        end = self.clock.now_ms() + int(seconds * 1000)
        while self.clock.now_ms() < end:
            before = self.clock.now_ms()
            step_to = min(end, before + step_ms)
            next_minute = (before // MS_PER_MINUTE + 1) * MS_PER_MINUTE
            if next_minute <= step_to:
                self.clock.set_ms(next_minute)
                self.tick_all()
            self.clock.set_ms(max(self.clock.now_ms(), step_to))
            self.deliver()

    def execution(self, execution_id: str) -> dict:
        status, body = self.request("GET", f"/v1/executions/{execution_id}")
        assert status == 200, body
        return body

    def executions_of(self, job_id: str) -> list[dict]:
        status, body = self.request("GET", f"/v1/jobs/{job_id}/executions?limit=100")
        assert status == 200, body
        return body["items"]

    def queue_depth(self) -> int:
        total = 0
        for url in self.lane_urls:
            attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            total += int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesDelayed"])
        return total
