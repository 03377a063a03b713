"""The stack in one process on moto, driven by a given clock: what the integration tests and the
benchmarks run. The same handlers, events and pollers as the local stack."""
from __future__ import annotations

import json
from typing import Callable

import boto3

from jobsched.domain.schedule import MS_PER_MINUTE
from jobsched.domain.timers import minute_of
from jobsched.handlers import api, authorizer, task_events, tick, worker
from jobsched.local.emulator import next_ready_ms
from jobsched.local.gateway_auth import GatewayAuthorizer
from jobsched.local.events import (ACCOUNT, Function, LanePoller, api_gateway_event, api_type, http_response,
                                   json_or_text)
from jobsched.local import strict_aws
from jobsched.local.stack import LocalStack
from jobsched.service.auth import ApiKeys
from jobsched.service.handoff import LOOK_AHEAD_MINUTES
from jobsched.settings import Env, Settings
from jobsched.store.aws import build_stores


def step_clock(clock, seconds: float, step_ms: int, on_minute: Callable[[], object], on_step: Callable[[], object],
               skip_quiet: Callable[[int, int], None]) -> None:
    """Move a fake clock `seconds` on in steps: `on_minute` at each minute boundary (the ticks, as
    EventBridge's rules run them), `on_step` after each step (deliveries), then `skip_quiet(end,
    step_ms)` may move the clock over steps in which nothing could happen."""
    end = clock.now_ms() + int(seconds * 1000)
    while clock.now_ms() < end:
        before = clock.now_ms()
        step_to = min(end, before + step_ms)
        next_minute = (before // MS_PER_MINUTE + 1) * MS_PER_MINUTE
        if next_minute <= step_to:
            clock.set_ms(next_minute)
            on_minute()
        clock.set_ms(max(clock.now_ms(), step_to))
        on_step()
        skip_quiet(end, step_ms)


class InProcessStack:
    """Call inside `mock_aws()` (with `serialized_in_process()` when threads share it)."""

    def __init__(self, template: dict, clock, invoker=None, session=None,
                 keys: dict[str, str] | None = None, batch_size: int = 10,
                 env_overrides: dict[str, dict[str, str]] | None = None) -> None:
        self.clock = clock
        self.session = session or boto3.session.Session(region_name="us-east-1")
        stack = LocalStack.create(self.session, template)
        self.api_type = api_type(template)  # the events the API function gets: the HTTP API's or the REST API's
        # Every call from here on answers as AWS would (strict_aws): IAM, sizes, capacity per key.
        strict_aws.install()
        self.region = self.session.region_name
        self.strict = strict_aws.StrictAws(template, stack.physical_ids, clock.now_ms, region=self.region)
        strict_aws.activate(self.strict)
        self.envs = {name: {**env, **(env_overrides or {}).get(name, {})} for name, env in stack.envs.items()}
        self.api = Function("api", api.make_handler(self.envs["api"], clock, self.session))
        # API Gateway's authorizer step (HTTP API), for requests sent `through_gateway`.
        self.authorizer = Function("authorizer", authorizer.make_handler(
            self.envs["authorizer"], clock, self.session)) if "authorizer" in self.envs else None
        self.gateway = GatewayAuthorizer.from_template(template, self.authorizer.invoke, clock.now_ms) \
            if self.authorizer else None
        self.tick_fn = Function("tick", tick.make_handler(self.envs["tick"], clock, self.session))
        self.worker = Function("worker", worker.make_handler(self.envs["worker"], clock, self.session, invoker))
        # Container tasks: the function that records a stopped task's end from its ECS event.
        self.task_events = Function("task_events", task_events.make_handler(self.envs["task_events"], clock,
                                                                            self.session))
        self.settings = Settings.from_env(self.envs["api"], "api")
        self.stores = build_stores(self.settings, self.session, clock)
        self.sqs = self.session.client("sqs")
        self.lane_urls = [self.envs["worker"][v] for v in Env.LANE_URL.values()]
        self.poller = LanePoller(self.sqs, self.lane_urls, self.worker, batch_size)
        registry = ApiKeys(self.stores.api_keys, clock)
        for tenant, key in (keys or {}).items():
            registry.register(tenant, key)
        self.default_key = next(iter((keys or {}).values()), None)
        self.ticks_enabled = True  # False: an outage of the EventBridge rules
        # A deployed scheduler has been ticking: every segment has watermarks. They start at the
        # bucket before the first tick's, which then reads one bucket: a first run's catch-up of
        # ten empty buckets (FIRST_RUN_CATCH_UP_MINUTES) was most of a test's setup.
        first = minute_of(clock.now_ms()) + LOOK_AHEAD_MINUTES
        for segment in range(self.settings.total_segments):
            self.stores.watermarks.claim(segment, first - 1)
            self.stores.watermarks.mark_done(segment, first - 1)
        self.tick_all()

    def request(self, method: str, path: str, body=None, key: str | None = "default", headers=None,
                through_gateway: bool = False):
        """The API function's answer to a request (`through_gateway`: after API Gateway's authorizer
        step, as a deployed API answers it; else the function alone)."""
        key = self.default_key if key == "default" else key
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        if key is not None:
            all_headers["Authorization"] = f"Bearer {key}"
        text = body if isinstance(body, str) or body is None else json.dumps(body)
        event = api_gateway_event(method, path, all_headers, text, api=self.api_type)
        refused = self.gateway.authorize(event) if through_gateway and self.gateway else None
        status, _, raw = refused or http_response(self.api.invoke(event))
        return status, json_or_text(raw)

    def tick_all(self) -> None:
        if not self.ticks_enabled:
            return
        for segment in range(self.settings.total_segments):
            self.tick_fn.invoke({"segment": segment})

    def deliver(self) -> int:
        return self.poller.drain()

    def advance(self, seconds: float, step_ms: int = 1000) -> None:
        """Move the clock in steps; tick every segment on each minute boundary (as the
        EventBridge rules do) and deliver whatever SQS makes visible."""
        step_clock(self.clock, seconds, step_ms, self.tick_all, self.deliver, self._skip_quiet_steps)

    def next_ready_ms(self) -> float | None:
        """When a message of this stack's lanes next becomes receivable (None: they hold none)."""
        return next_ready_ms(self.lane_urls, ACCOUNT, self.region)

    def _skip_quiet_steps(self, end: int, step_ms: int) -> None:
        """Move the clock over the steps in which nothing could happen: no message of a lane
        becomes receivable and no minute boundary (a tick) falls before the next step. Lambda runs
        only on a message or a tick, so each skipped step would have polled empty queues; the
        steps kept are the very ones stepping would take (same grid), so what runs, and when, is
        unchanged."""
        now = self.clock.now_ms()
        ready = self.next_ready_ms()
        horizon = min(end, (now // MS_PER_MINUTE + 1) * MS_PER_MINUTE)
        if ready is not None:
            # A message is receivable once the clock is past visible_at (moto: now > visible_at).
            horizon = min(horizon, int(ready))
        skip = (horizon - now - 1) // step_ms
        if skip > 0:
            self.clock.set_ms(now + skip * step_ms)
