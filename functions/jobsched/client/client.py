"""The client object: a session (URL, key, transport, retries) and the resources over it."""
from __future__ import annotations

import os
from typing import Any, Mapping

from jobsched.api import schemas
from jobsched.client.answers import parse
from jobsched.client.resources import Callbacks, Calendars, DeadLetters, Executions, Jobs, Signing
from jobsched.client.session import Retries, Session
from jobsched.client.transport import Transport

DEFAULT_URL = "http://127.0.0.1:8080"  # the local stack (`make run`)


class Client:
    """`Client(base_url, api_key)`; then `client.jobs`, `client.executions`, `client.calendars`,
    `client.dead_letters`, `client.signing`, `client.callbacks`, `client.preview(...)`,
    `client.health()`. `transport` and `retries` are for tests and tuning (client/session.py)."""

    def __init__(self, base_url: str = DEFAULT_URL, api_key: str | None = None, *, timeout: float = 15.0,
                 transport: Transport | None = None, retries: Retries | None = None) -> None:
        self.session = Session(base_url, api_key, timeout=timeout, transport=transport, retries=retries)
        self.jobs = Jobs(self.session)
        self.executions = Executions(self.session)
        self.calendars = Calendars(self.session)
        self.dead_letters = DeadLetters(self.session)
        self.signing = Signing(self.session)
        self.callbacks = Callbacks(self.session)

    @classmethod
    def from_env(cls, **options: Any) -> "Client":
        """The API and key the CLI uses too: JOBSCHED_URL (default the local stack) and
        JOBSCHED_API_KEY (what `make run` prints)."""
        return cls(os.environ.get("JOBSCHED_URL") or DEFAULT_URL, os.environ.get("JOBSCHED_API_KEY") or None, **options)

    def preview(self, schedule: str, *, type: str | None = None, timezone: str | None = None,  # noqa: A002
                count: int | None = None, after: str | None = None, exclude_calendars: list[str] | None = None,
                **more: Any) -> schemas.Preview:
        """GET /v1/schedule-preview: the next fire instants (more: startAt, endAt, maxRuns,
        maxCatchUp, catchUpPerMinute, as the route names them)."""
        query = {"type": type, "schedule": schedule, "timezone": timezone, "count": count, "after": after,
                 "excludeCalendars": exclude_calendars or None, **more}
        return parse(schemas.Preview, self.session.request("GET", "/v1/schedule-preview", query=query))

    def health(self) -> schemas.Health:
        return parse(schemas.Health, self.session.request("GET", "/v1/health"))

    def callback(self, execution_id: str, token: str) -> "Callback":
        """The callbacks of one call, bound to its execution id and token."""
        return Callback(self.callbacks, execution_id, token)

    def callback_for(self, headers: Mapping[str, str]) -> "Callback":
        """The callbacks of the call whose headers these are (X-Execution-Id, X-Callback-Token)."""
        lowered = {k.lower(): v for k, v in headers.items()}
        missing = [name for name in ("x-execution-id", "x-callback-token") if not lowered.get(name)]
        if missing:
            raise ValueError(f"the call's headers lack {', '.join(missing)}")
        return self.callback(lowered["x-execution-id"], lowered["x-callback-token"])


class Callback:
    """A long-running target's handle on its execution (Temporal's async activity handle):
    `heartbeat(progress)` while it works, then `complete(output)` or `fail(error)`."""

    def __init__(self, callbacks: Callbacks, execution_id: str, token: str) -> None:
        self._callbacks = callbacks
        self.execution_id = execution_id
        self._token = token

    def heartbeat(self, progress: Any = None, *, ok: bool = False) -> schemas.HeartbeatAnswer:
        return self._callbacks.heartbeat(self.execution_id, self._token, progress, ok=ok)

    def complete(self, output: Any = None) -> schemas.Execution:
        return self._callbacks.complete(self.execution_id, self._token, output)

    def fail(self, error: str = "failed") -> schemas.Execution:
        return self._callbacks.fail(self.execution_id, self._token, error)

    def __repr__(self) -> str:
        return f"Callback({self.execution_id!r})"  # never the token
