"""The local stack's moving parts: API on loopback, a tick per segment each wall-clock minute,
and pollers that feed SQS batches to the worker. The same handlers as in AWS."""
from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from jobsched.domain.clock import SystemClock
from jobsched.local.emulator import SerializedServer
from jobsched.local.events import Function, LanePoller, api_gateway_event, http_response
from jobsched.local.fake_aws import use_local_aws_env
from jobsched.local.metrics import EmfTee
from jobsched.local.stack import LocalStack
from jobsched.local.synth import synthesize
from jobsched.settings import Env, Settings

IDLE_POLL_SECONDS = 0.1


@dataclass
class Options:
    port: int = 8080
    host: str = "127.0.0.1"
    emulator_port: int = 0
    segments: int = 4
    workdir: Path = Path(".build/local")
    quiet_functions: bool = True
    keep_metrics: bool = False  # tee EMF lines into workdir/metrics.jsonl (make run does)
    # Worker "containers" polling each lane (Lambda scales these out). More than one does not help
    # locally: moto scans the whole queue on every receive, so more pollers load its lock.
    workers_per_lane: int = 1
    env_overrides: dict = field(default_factory=dict)  # function name → settings to change (benchmarks)


@dataclass
class LocalRuntime:
    options: Options
    emulator: SerializedServer | None = None
    stack: LocalStack | None = None
    functions: dict[str, Function] = field(default_factory=dict)
    settings: Settings | None = None
    api_url: str = ""
    _stop: threading.Event = field(default_factory=threading.Event)
    _servers: list = field(default_factory=list)

    def start(self) -> "LocalRuntime":
        opts = self.options
        use_local_aws_env()
        if opts.keep_metrics and not isinstance(sys.stdout, EmfTee):
            # Keep the EMF lines the functions print (what CloudWatch ingests) for `jobsched stats`.
            sys.stdout = EmfTee(sys.stdout, opts.workdir / "metrics.jsonl")
        if opts.quiet_functions:
            os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
        self.emulator = SerializedServer(port=opts.emulator_port).start()
        use_local_aws_env(self.emulator.url)

        import boto3

        from jobsched.handlers import api, tick, worker

        template = synthesize(opts.workdir / "cdk.out", segments=opts.segments, allow_private_targets=True)
        session = boto3.session.Session()
        self.stack = LocalStack.create(session, template)
        envs = {name: {**env, **opts.env_overrides.get(name, {})} for name, env in self.stack.envs.items()}
        clock = SystemClock()
        self.settings = Settings.from_env(envs["api"], "api")
        self.functions["api"] = Function("api", api.make_handler(envs["api"], clock, session))
        self.functions["tick"] = Function("tick", tick.make_handler(envs["tick"], clock, session))
        sqs = session.client("sqs")
        for priority, variable in Env.LANE_URL.items():
            for n in range(opts.workers_per_lane):
                worker_fn = Function("worker", worker.make_handler(envs["worker"], clock, session))
                poller = LanePoller(sqs, [envs["worker"][variable]], worker_fn)
                self._thread(f"poller-{priority.value.lower()}-{n}", self._poll, poller, envs["worker"][variable])
        self._serve_api()
        self._thread("ticks", self._tick_each_minute)
        return self

    def _thread(self, name: str, target, *args) -> None:
        threading.Thread(target=target, args=args, name=name, daemon=True).start()

    def _poll(self, poller: LanePoller, url: str) -> None:
        while not self._stop.is_set():
            try:
                handed = poller.poll_once(url)
            except Exception as exc:  # noqa: BLE001 - keep polling; report and go on
                print(f"poller: {exc}", file=sys.stderr)
                handed = 0
            if not handed:
                self._stop.wait(IDLE_POLL_SECONDS)

    def tick_all(self) -> None:
        assert self.settings is not None
        for segment in range(self.settings.segments):
            try:
                self.functions["tick"].invoke({"segment": segment})
            except Exception as exc:  # noqa: BLE001 - the next minute catches up
                print(f"tick of segment {segment} failed: {exc}", file=sys.stderr)

    def _tick_each_minute(self) -> None:
        """As the EventBridge rules do: every segment at the start of each wall-clock minute."""
        self.tick_all()
        while not self._stop.is_set():
            now = time.time()
            self._stop.wait(60 - now % 60 + 0.05)
            if not self._stop.is_set():
                self.tick_all()

    def _serve_api(self) -> None:
        api_fn = self.functions["api"]

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode("utf-8", "replace") if length else None
                headers = {k: v for k, v in self.headers.items()}
                event = api_gateway_event(self.command, self.path, headers, body, self.client_address[0])
                status, out_headers, payload = http_response(api_fn.invoke(event))
                self.send_response(status)
                for name, value in out_headers.items():
                    if name.lower() != "content-length":
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle  # noqa: N815

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer((self.options.host, self.options.port), Handler)
        self._servers.append(server)
        self.api_url = f"http://{self.options.host}:{server.server_port}"
        self._thread("api", server.serve_forever)

    def stop(self) -> None:
        self._stop.set()
        for server in self._servers:
            server.shutdown()
        if self.emulator:
            self.emulator.stop()
