"""The local stack's moving parts: API on loopback, a tick per segment each wall-clock minute,
and pollers that feed SQS batches to the worker. The same handlers as in AWS."""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from jobsched.cli.keys import EMULATOR_URL_FILE
from jobsched.domain.clock import SystemClock
from jobsched.domain.endpoints import OwnEndpoints
from jobsched.domain.jobs import Priority
from jobsched.domain.lane_shares import format_caps, parse_caps
from jobsched.local.emulator_process import EmulatorProcess
from jobsched.local.events import Function, LanePoller, LoopbackHTTPServer, api_gateway_event, api_type, http_response
from jobsched.local.fake_aws import use_local_aws_env
from jobsched.local.gateway_auth import GatewayAuthorizer
from jobsched.local.metrics import EmfTee
from jobsched.local.stack import LocalStack, reserved_concurrency
from jobsched.store.aws import lean_config
from jobsched.local.synth import cached_template
from jobsched.settings import Env, Settings

IDLE_POLL_SECONDS = 0.1
# The API's containers at most when the template reserves it no concurrency (Lambda's then is the
# account's): as many as its default reservation.
API_LOCAL_CONCURRENCY = 50
MAX_REQUEST_BYTES = 10 * 1024 * 1024  # API Gateway's payload limit


def _gateway_error(length_text: str) -> tuple[int, dict, bytes]:
    too_large = length_text.isascii() and length_text.isdigit()
    if too_large:
        return error_answer(413, "PAYLOAD_TOO_LARGE", f"the request is over API Gateway's "
                                                      f"{MAX_REQUEST_BYTES // (1024 * 1024)} MB payload limit", "body")
    return error_answer(400, "VALIDATION_ERROR", "Content-Length must be a number of bytes", "Content-Length")


def error_answer(status: int, code: str, message: str, field: str | None = None) -> tuple[int, dict, bytes]:
    """An answer of the server itself in the API's error envelope (api/schemas.py, Error)."""
    details = [{"field": field, "message": message}] if field else []
    body = {"error": {"code": code, "message": message, "details": details}}
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


# What the standard library's server answers itself, before any route (an HTML page by default).
_SERVER_ERRORS = {400: ("VALIDATION_ERROR", "the request line or a header could not be read", None),
                  414: ("URI_TOO_LONG", "the request line is over 65,536 bytes", "path"),
                  431: ("HEADERS_TOO_LARGE", "over 100 headers, or a header line over 65,536 bytes", "headers"),
                  501: ("NOT_IMPLEMENTED", "the API answers GET, POST, PUT, PATCH and DELETE", "method"),
                  505: ("VALIDATION_ERROR", "HTTP/1.0 and HTTP/1.1 only", None)}


def local_networks(setup: dict) -> str:
    """Every local tenant's container network ("*"): the local cluster's subnet and security group."""
    from jobsched.domain.task_networks import DEFAULT_TENANT, TaskNetworks

    return TaskNetworks.parse({DEFAULT_TENANT: {"subnets": [setup["subnet"]],
                                                "securityGroups": [setup["securityGroup"]]}}).text()


def local_lanes(worker_env: dict[str, str], containers_per_lane: int | None) -> tuple[dict[str, str], dict[Priority, int]]:
    """The worker's settings as the local stack runs it, and each lane's worker containers at
    most: with `containers_per_lane` None, the lane's cap in the template (its event source's
    maximum concurrency), so that the lane shares, which bound a tenant's containers out of it,
    are the deployment's; with a number, that many per lane, and the caps (and shares) follow."""
    if containers_per_lane is not None:
        worker_env = {**worker_env, Env.LANE_CAPS: format_caps({p.value: containers_per_lane for p in Env.LANE_URL})}
    caps = parse_caps(worker_env[Env.LANE_CAPS]) if worker_env.get(Env.LANE_CAPS) else {}
    return worker_env, {priority: caps.get(priority, UNCAPPED_LANE_CONTAINERS) for priority in Env.LANE_URL}


UNCAPPED_LANE_CONTAINERS = 8  # a lane without a cap in the template (its lane shares are off)


class SharedClients:
    """A session for the containers of one function: each AWS client (and resource) is made once
    and shared by them; anything else is the session's. A container with clients of its own took
    about 100 ms to make here, in its lane's poller, and a lane now makes up to its cap of them as
    one-record batches arrive. botocore clients are thread-safe (a container already shares its
    own among its records' threads). A client asked with credentials (a tenant's) is made each time."""

    def __init__(self, session) -> None:
        self._session = session
        self._made: dict[tuple, object] = {}
        self._lock = threading.Lock()

    def client(self, service: str, **kwargs):
        return self._shared("client", service, kwargs)

    def resource(self, service: str, **kwargs):
        return _SharedTables(self._shared("resource", service, kwargs))

    def _shared(self, kind: str, service: str, kwargs: dict):
        make = getattr(self._session, kind)
        if set(kwargs) - {"config", "region_name"}:
            return make(service, **kwargs)
        key = (kind, service, kwargs.get("region_name"))
        with self._lock:
            if key not in self._made:
                self._made[key] = make(service, **kwargs)
            return self._made[key]

    def __getattr__(self, name: str):
        return getattr(self._session, name)


class _SharedTables:
    """A DynamoDB resource whose Table objects are made once (8 a container, 8 ms each)."""

    def __init__(self, resource) -> None:
        self._resource = resource
        self._tables: dict[str, object] = {}
        self._lock = threading.Lock()

    def Table(self, name: str):  # noqa: N802 - boto3's name
        with self._lock:
            if name not in self._tables:
                self._tables[name] = self._resource.Table(name)
            return self._tables[name]

    def __getattr__(self, name: str):
        return getattr(self._resource, name)


@dataclass
class Options:
    port: int = 8080
    host: str = "127.0.0.1"
    emulator_port: int = 0
    segments: int = 4
    workdir: Path = Path(".build/local")
    quiet_functions: bool = True
    keep_metrics: bool = False  # tee EMF lines into workdir/metrics.jsonl (make run does)
    # One poller per lane receives (more would load the emulator's lock: moto scans the whole queue
    # on every receive) and hands each batch to a worker "container" of its own, up to the lane's
    # cap at once, as Lambda scales a lane out: a slow or hung target holds its container, not the
    # lane. None: the template's caps (local_lanes). A fixed 8 gave one tenant 4 containers (the
    # deployment gives it 100), and one-time jobs created through the API arrive one a batch: at
    # 50 due a second their records were held back by the share, a second each time.
    containers_per_lane: int | None = None
    # Keep state across restarts under the work directory (state.json); `reset` starts empty.
    keep_state: bool = True
    reset: bool = False
    env_overrides: dict = field(default_factory=dict)  # function name → settings to change (benchmarks)


class LaneContainers:
    """Up to `limit` worker containers of one lane, made on demand and reused when idle (what
    Lambda does for an SQS event source with a maximum concurrency)."""

    def __init__(self, make, limit: int) -> None:
        self._make = make
        self._idle: list[Function] = [make()]
        self._free = threading.Semaphore(max(1, limit))
        self._lock = threading.Lock()

    def first(self) -> Function:
        return self._idle[0]

    def acquire(self, stop: threading.Event) -> Function | None:
        if not self._free.acquire(timeout=IDLE_POLL_SECONDS):
            return None
        if stop.is_set():
            self._free.release()
            return None
        with self._lock:
            if self._idle:
                return self._idle.pop()
        try:
            return self._make()
        except BaseException:
            self._free.release()  # no container was made: its place is free again
            raise

    def release(self, container: Function) -> None:
        with self._lock:
            self._idle.append(container)
        self._free.release()

    def invoke(self, event, stop: threading.Event):
        """One invocation in a free container (made if none is idle and the limit allows), as
        Lambda runs concurrent requests of a function: each in a container of its own."""
        while (container := self.acquire(stop)) is None:
            if stop.is_set():
                raise RuntimeError("the local stack is stopping")
        try:
            return container.invoke(event)
        finally:
            self.release(container)


TASK_POLL_SECONDS = 0.5  # how often the local ECS is looked at for tasks to start, stop or report


@dataclass
class LocalRuntime:
    options: Options
    emulator: EmulatorProcess | None = None
    stack: LocalStack | None = None
    strict: object = None  # the strict AWS layer (local/strict_aws/): report() for its peaks
    functions: dict[str, Function] = field(default_factory=dict)
    api_containers: LaneContainers | None = None  # the API's (functions["api"] is the first)
    settings: Settings | None = None
    api_url: str = ""
    api_type: str = "http"  # the template's API: the events the API function gets, API Gateway's own 5xx
    _stop: threading.Event = field(default_factory=threading.Event)
    _servers: list = field(default_factory=list)
    # Set once a client can be served: the keys work, the ticks and pollers run. Until then the
    # API answers 503 (health included), never a 401 for a key that is about to be stored.
    ready: threading.Event = field(default_factory=threading.Event)
    state_path: Path | None = None  # where the emulator's process keeps the state (keep_state)
    _first_tick: threading.Event = field(default_factory=threading.Event)
    task_runner: object = None  # container tasks as local processes (local/tasks.py)
    gateway: object = None  # API Gateway's authorizer step (local/gateway_auth.py); None: the template has none
    container_setup: dict = field(default_factory=dict)

    def mark_ready(self, timeout: float = 120.0) -> None:
        """Call once the keys are stored: waits for the first tick of every segment."""
        self._first_tick.wait(timeout)
        self.ready.set()

    def start(self, announce_ready: bool = True, progress=print) -> "LocalRuntime":
        """Start everything; with `announce_ready`, ready once the first tick has run (callers
        that store keys first pass False and call mark_ready() after)."""
        opts = self.options
        use_local_aws_env()
        # The stack's own: state, keys, credentials, metrics, task logs. Nobody else enters it (a
        # container job's process runs as another user: local/tasks.py).
        opts.workdir.mkdir(parents=True, exist_ok=True)
        opts.workdir.chmod(0o700)
        if opts.keep_metrics and not isinstance(sys.stdout, EmfTee):
            # Keep the EMF lines the functions print (what CloudWatch ingests) for `jobsched stats`.
            sys.stdout = EmfTee(sys.stdout, opts.workdir / "metrics.jsonl", echo_metrics=not opts.quiet_functions)
        if opts.quiet_functions:
            os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
        progress(f"jobsched: starting the AWS emulator (moto, a process of its own) on port "
                 f"{opts.emulator_port or 'any'} ...")
        self.emulator = EmulatorProcess(port=opts.emulator_port).start()
        # Every client from here on signs with the stack's credentials: the emulator takes no other.
        use_local_aws_env(self.emulator.url, self.emulator.credentials)
        (opts.workdir / EMULATOR_URL_FILE).write_text(self.emulator.url + "\n")  # for `jobsched keys --local`
        self.emulator.credentials.write(opts.workdir)  # and its credentials (mode 0600)

        import boto3

        from jobsched.handlers import api, authorizer, task_events, tick, worker
        from jobsched.local import strict_aws
        from jobsched.local.tasks import LocalTaskRunner, prepare_local_cluster

        strict_aws.install()  # before any client is built: every client answers to the layer

        # JOBSCHED_TEMPLATE_CACHE: one template cache for several work directories (the test
        # suite's stacks each have a work directory of their own, and would each synthesize).
        template_dir = Path(os.environ.get("JOBSCHED_TEMPLATE_CACHE") or opts.workdir)
        template = cached_template(template_dir, segments=opts.segments, allow_private_targets=True,
                                   progress=progress)
        session = boto3.session.Session()
        progress("jobsched: creating the tables and queues of the template in the emulator ...")
        self.stack = LocalStack.create(session, template)
        self.api_type = api_type(template)
        # From here on the functions' calls answer as AWS would: IAM of their role, sizes, capacity.
        self.strict = strict_aws.StrictAws(template, self.stack.physical_ids)
        if self.emulator is not None:
            # The layer's reads of an item before and after each write go to the emulator's
            # process directly: as GetItem requests they were 81% of them (docs/performance.md).
            self.strict.use_peek(self.emulator.peek)
            # And the items before and after each write come back with the write's own answer
            # (read under the same hold of the lock): no read of their own at all.
            self.strict.use_reports()
        strict_aws.activate(self.strict)
        if opts.keep_state:
            if opts.reset:
                progress("jobsched: RESET: starting empty")
            restored = self.emulator.keep_state(opts.workdir, self.stack.physical_ids, opts.reset)
            self.state_path = Path(restored["path"])
            self.strict.same_keys(restored.get("keyIds", {}))
            if restored["items"] or restored["messages"]:
                progress(f"jobsched: restored {restored['items']} items and {restored['messages']} queued messages "
                         f"from {self.state_path}")
        # The API's port is taken now, so that the functions know every endpoint of the stack: no
        # job may call them (a job that calls the emulator's stop route stops it for every tenant).
        api_server = self._bind_api()
        own = OwnEndpoints(frozenset({(opts.host, api_server.server_port), ("127.0.0.1", self.emulator.port)})).text()
        # The local lanes' cap is their container count: lane shares bound a tenant's (and a
        # host's) containers out of these, as they bound invocations out of the caps on AWS.
        envs = {name: {**env, Env.OWN_ENDPOINTS: own} for name, env in self.stack.envs.items()}
        envs["worker"], caps = local_lanes(envs["worker"], opts.containers_per_lane)
        # Container tasks run as local processes (local/tasks.py); their output is their log.
        tasks_root = (opts.workdir / "tasks").resolve()
        for name in ("worker", "task_events"):
            envs[name] = {**envs[name], Env.TASK_LOGS_URL: f"file://{tasks_root}/{{taskId}}/output.log"}
        # Container networks: the local cluster's subnet and security group (as `make run` prints
        # them) are every local tenant's, as an operator grants them with `-c ecsNetworks`.
        self.container_setup = prepare_local_cluster(session)
        for name in ("api", "worker"):
            envs[name] = {**envs[name], Env.ECS_NETWORKS: local_networks(self.container_setup)}
        envs = {name: {**env, **opts.env_overrides.get(name, {})} for name, env in envs.items()}
        clock = SystemClock()
        self.settings = Settings.from_env(envs["api"], "api")
        # The API's requests run at once up to its reserved concurrency, each in a container of its
        # own (one container made the API answer one request at a time: about 10 creates a second).
        api_session = SharedClients(session)
        self.api_containers = LaneContainers(lambda: Function("api", api.make_handler(envs["api"], clock, api_session)),
                                             reserved_concurrency(template, "api") or API_LOCAL_CONCURRENCY)
        self.functions["api"] = self.api_containers.first()
        if "authorizer" in envs:
            # API Gateway's authorizer step before the API function (local/gateway_auth.py), with its
            # own containers up to its reserved concurrency, and its cache on the stack's clock.
            authorizers = LaneContainers(lambda: Function("authorizer", authorizer.make_handler(
                envs["authorizer"], clock, api_session)), reserved_concurrency(template, "authorizer") or 1)
            self.functions["authorizer"] = authorizers.first()
            self.gateway = GatewayAuthorizer.from_template(template, lambda e: authorizers.invoke(e, self._stop),
                                                           clock.now_ms)
        self.functions["tick"] = Function("tick", tick.make_handler(envs["tick"], clock, session))
        sqs = session.client("sqs", config=lean_config())  # the lanes' event source mappings
        workers_session = SharedClients(session)
        for priority, variable in Env.LANE_URL.items():
            url = envs["worker"][variable]
            containers = LaneContainers(
                lambda: Function("worker", worker.make_handler(envs["worker"], clock, workers_session)), caps[priority])
            poller = LanePoller(sqs, [url], containers.first())
            self._thread(f"poller-{priority.value.lower()}", self._poll, poller, url, containers)
        self.functions["task_events"] = Function("task_events", task_events.make_handler(envs["task_events"], clock,
                                                                                         session))
        self.task_runner = LocalTaskRunner(session.client("ecs", config=lean_config()),
                                           self.functions["task_events"].invoke, clock.now_ms,
                                           root=tasks_root)
        progress("jobsched: starting the API, the ticks, the lane pollers and the container task runner ...")
        self._thread("tasks", self._run_tasks)
        self._thread("api", api_server.serve_forever)
        self._thread("ticks", self._tick_each_minute)
        if announce_ready:
            self._thread("ready", self.mark_ready)
        return self

    def _run_tasks(self) -> None:
        """Container tasks: start what RunTask started, stop what StopTask stopped, report ends."""
        while not self._stop.wait(TASK_POLL_SECONDS):
            try:
                self.task_runner.poll()
            except Exception as exc:  # noqa: BLE001 - keep running; report and go on
                print(f"container tasks: {exc}", file=sys.stderr)
        self.task_runner.stop_all()

    def grant_container_tasks(self, tenants: list[str]) -> list[str]:
        """A task definition per tenant, tagged for it (as an operator grants one), for container
        jobs run as local processes; returns the lines that name them."""
        import boto3

        from jobsched.local.tasks import register_tenant_definitions

        made = register_tenant_definitions(boto3.session.Session().client("ecs"), tenants)
        setup = self.container_setup
        return [f"  tenant {tenant}: taskDefinition {arn}" for tenant, arn in made.items()] + [
            f"  cluster {setup['cluster']}, subnet {setup['subnet']}, security group {setup['securityGroup']}, "
            f"container main"]

    def _thread(self, name: str, target, *args) -> None:
        threading.Thread(target=target, args=args, name=name, daemon=True).start()

    def _poll(self, poller: LanePoller, url: str, containers: "LaneContainers") -> None:
        """Receive only when a container is free, and never wait for a batch to finish: each
        batch runs in its own container's thread."""
        while not self._stop.is_set():
            container = containers.acquire(self._stop)
            if container is None:
                continue
            try:
                messages = poller.receive(url)
            except Exception as exc:  # noqa: BLE001 - keep polling; report and go on
                print(f"poller: {exc}", file=sys.stderr)
                messages = []
            if not messages:
                containers.release(container)
                self._stop.wait(IDLE_POLL_SECONDS)
                continue
            self._thread("worker-batch", self._run_batch, poller, url, messages, container, containers)

    @staticmethod
    def _run_batch(poller: LanePoller, url: str, messages: list, container: Function,
                   containers: "LaneContainers") -> None:
        try:
            poller.handle(url, messages, container)
        except Exception as exc:  # noqa: BLE001 - the messages reappear after their visibility timeout
            print(f"worker batch: {exc}", file=sys.stderr)
        finally:
            containers.release(container)

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
        self._first_tick.set()
        while not self._stop.is_set():
            now = time.time()
            self._stop.wait(60 - now % 60 + 0.05)
            if not self._stop.is_set():
                self.tick_all()

    def _bind_api(self) -> LoopbackHTTPServer:
        """The API's server, bound (its port known) but not serving yet."""
        functions = self.functions
        ready = self.ready
        emulator = self.emulator
        runtime = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self):
                length_text = self.headers.get("Content-Length") or "0"
                if not length_text.isascii() or not length_text.isdigit() or int(length_text) > MAX_REQUEST_BYTES:
                    # API Gateway answers these itself (400, or 413 past its 10 MB payload limit).
                    self._answer(*_gateway_error(length_text))
                    return
                length = int(length_text)
                body = self.rfile.read(length) if length else None
                if not ready.is_set():
                    # Starting: no route answers yet (a key may not be stored yet), health says so.
                    answer = {"status": "starting"} if self.path.startswith("/v1/health") else {"error": {
                        "code": "STARTING", "message": "the local stack is starting; retry in a second", "details": []}}
                    self._answer(503, {"Content-Type": "application/json", "Retry-After": "1"},
                                 json.dumps(answer).encode())
                    return
                if self.path.startswith("/v1/health") and not emulator.answers():
                    # Every other route needs the emulator: health says what the stack can do.
                    self._answer(503, {"Content-Type": "application/json", "Retry-After": "5"}, json.dumps(
                        {"status": "unavailable", "reason": "the AWS emulator does not answer"}).encode())
                    return
                headers = {k: v for k, v in self.headers.items()}
                event = api_gateway_event(self.command, self.path, headers, body, self.client_address[0],
                                          api=runtime.api_type)
                refused = runtime.gateway.authorize(event) if runtime.gateway else None
                if refused:  # API Gateway's own answer: the API function is not invoked
                    self._answer(*refused)
                    return
                try:
                    status, out_headers, payload = http_response(runtime.api_containers.invoke(event, runtime._stop))
                except Exception as exc:  # noqa: BLE001 - API Gateway answers 5xx when the function fails
                    print(f"api: {exc}", file=sys.stderr)
                    # The HTTP API answers 500 "Internal Server Error", the REST API 502.
                    status, message = (500, "Internal Server Error") if runtime.api_type == "http" else \
                        (502, "Internal server error")
                    status, out_headers, payload = status, {"Content-Type": "application/json"}, json.dumps(
                        {"message": message}).encode()
                self._answer(status, out_headers, payload)

            def _answer(self, status, out_headers, payload):
                self.send_response(status)
                for name, value in out_headers.items():
                    if name.lower() != "content-length":
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle  # noqa: N815

            def send_error(self, code, message=None, explain=None):
                """The server's own refusals (a request line or headers too long, an unknown method)
                in the API's error envelope, never the standard library's HTML page."""
                self.close_connection = True
                name, text, field = _SERVER_ERRORS.get(code, ("ERROR", message or "the request was refused", None))
                status, headers, payload = error_answer(code, name, text, field)
                self.send_response(status, message)
                self.send_header("Connection", "close")
                for header_name, value in headers.items():
                    self.send_header(header_name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            def log_message(self, *args):
                pass

        server = LoopbackHTTPServer((self.options.host, self.options.port), Handler)
        self._servers.append(server)
        self.api_url = f"http://{self.options.host}:{server.server_port}"
        return server

    def stop(self) -> None:
        """Stops the API, the pollers and the ticks, then the emulator (a second call does nothing)."""
        if self._stop.is_set():
            return
        self._stop.set()
        for server in self._servers:
            server.shutdown()
        if self.emulator:
            self.emulator.stop()  # the last snapshot, after the API and the pollers have stopped
