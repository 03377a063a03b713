"""The AWS emulator in a process of its own, so that its time (moto's request handling, which is
all Python) runs on one core and the functions, the API and the pollers on another, instead of
sharing one interpreter lock. Its request handling stays serialized (SerializedServer), which keeps
DynamoDB's claim guarantee.

The process keeps the stack's state too (StateKeeper reads moto's backends directly, so it has to
run where they are): the parent tells it the work directory and the created tables and queues,
and it restores, snapshots, and saves a last time when it is stopped or when its parent is gone
(a SIGKILL of `make run` then loses nothing that the emulator had acknowledged).

The child ignores SIGINT: Ctrl-C reaches the whole process group, and the parent stops the API
and the pollers before it asks the emulator for its last snapshot."""
from __future__ import annotations

import argparse
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from jobsched.local.emulator import CONTROL_PREFIX, CONTROL_SECRET_HEADER
from jobsched.local.emulator_auth import StackCredentials

READY_LINE = "jobsched-emulator ready at "
PARENT_CHECK_SECONDS = 0.5
# The per-start secret of the control routes, handed to the emulator's process in its environment
# (not on its command line, which every user of the machine can read).
CONTROL_SECRET_ENV = "JOBSCHED_CONTROL_SECRET"
# The stack's AWS credentials (emulator_auth.py), handed over the same way: the emulator answers
# only requests signed with them (or with what its STS handed out).
CREDENTIALS_ENV = "JOBSCHED_EMULATOR_CREDENTIALS"


# --- in the emulator's process -------------------------------------------------------------------
class Control:
    """The control requests of the emulator process: stats, state (restore and keep), stop."""

    def __init__(self) -> None:
        self.server = None
        self.state = None
        self.done = threading.Event()
        self._stopping = threading.Lock()

    def __call__(self, method: str, path: str, body: bytes) -> tuple[int, dict]:
        if method == "GET" and path == "ping":
            return 200, {"ok": True}
        if method == "GET" and path == "stats":
            return 200, self.stats()
        if method == "POST" and path == "state":
            return 200, self.keep_state(json.loads(body or b"{}"))
        if method == "POST" and path == "peek":
            return 200, self.peek(json.loads(body or b"{}"))
        if method == "POST" and path == "stop":
            self.stop()
            return 200, {"stopped": True}
        return 404, {"message": f"no control route {method} {path}"}

    def stats(self) -> dict:
        server, state = self.server, self.state
        return {
            "busySeconds": server.busy_seconds,
            "busyByOperation": dict(server.busy_by_operation),
            "requestsByOperation": dict(server.requests_by_operation),
            "mutations": server.mutations,
            "connectionsOpened": server.connections_opened,
            "snapshots": state.snapshots if state else 0,
            "snapshotLockedSeconds": state.locked_seconds if state else 0.0,
            "snapshotSeconds": state.saving_seconds if state else 0.0,
        }

    def peek(self, request: dict) -> dict:
        """An item as stored (its wire form), read from moto's backend under the emulator's lock:
        the strict layer's reads before and after each write (local/strict_aws/dynamodb_billing.py, _peek), which as
        GetItem requests were most of the emulator's requests (AWS never sees them). Counted in the
        busy time as "peek"."""
        from jobsched.local.strict_aws import _peek_moto

        started = time.perf_counter()
        try:
            found, item = _peek_moto(request["table"], request["key"])
        finally:
            spent = time.perf_counter() - started
            self.server.busy_seconds += spent
            self.server.busy_by_operation["peek"] += spent
            self.server.requests_by_operation["peek"] += 1
        return {"found": found, "item": item}

    def keep_state(self, request: dict) -> dict:
        import boto3

        from jobsched.local.state import StateKeeper

        if self.state is not None:
            raise RuntimeError("the state is kept already")
        state = StateKeeper(Path(request["workdir"]), request["physicalIds"])
        if request.get("reset"):
            state.reset()
        restored = state.restore(boto3.session.Session())  # through this server, as any client
        state.start(lambda: self.server.mutations)
        self.state = state
        return {**restored, "path": str(state.path)}

    def stop(self) -> None:
        """The last snapshot, then the server stops (after this answer is sent) and the process ends."""
        with self._stopping:
            if self.done.is_set():
                return
            if self.state is not None:
                self.state.stop()
            threading.Timer(0.1, self._finish).start()

    def _finish(self) -> None:
        self.server.stop()
        self.done.set()


EMULATOR_SWITCH_INTERVAL_S = 0.05


def serve(port: int, parent_pid: int) -> None:
    from jobsched.local.emulator import SerializedServer
    from jobsched.local.fake_aws import use_local_aws_env

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The thread that holds the emulator's lock works while the connections' threads parse their
    # requests and then wait for it: at Python's 5 ms switch interval it gave up the interpreter to
    # each of them, and held the lock longer for it. At 50 ms the lock was held 206-211 s over bench
    # lateness's 50 a second instead of 224 s (docs/performance.md).
    sys.setswitchinterval(EMULATOR_SWITCH_INTERVAL_S)
    secret = os.environ.pop(CONTROL_SECRET_ENV, "")
    credentials_text = os.environ.pop(CREDENTIALS_ENV, "")
    if not secret or not credentials_text:
        sys.exit(f"the emulator's process needs {CONTROL_SECRET_ENV} and {CREDENTIALS_ENV}: the local stack starts it")
    credentials = StackCredentials.parse(credentials_text)
    use_local_aws_env(credentials=credentials)
    from jobsched.local.tasks import create_local_network, hold_tasks_running

    hold_tasks_running()  # container tasks stop when their process ends or StopTask says (local/tasks.py)
    control = Control()
    control.server = SerializedServer(port=port, control=control, control_secret=secret,
                                      credentials=credentials).start()
    create_local_network()  # after start()'s reset: the container jobs' VPC, with the same ids each time
    use_local_aws_env(control.server.url, credentials)  # the restore talks to this server
    print(READY_LINE + control.server.url, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: control.stop())
    while not control.done.wait(PARENT_CHECK_SECONDS):
        if os.getppid() != parent_pid:  # the stack was killed: keep what it had, then go
            print("jobsched emulator: the local stack is gone; saving and stopping", file=sys.stderr, flush=True)
            control.stop()
    control.done.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--parent", type=int, required=True)
    args = parser.parse_args()
    serve(args.port, args.parent)


# --- in the local stack's process ----------------------------------------------------------------
class EmulatorProcess:
    """Start, use and stop the emulator's process from the local stack."""

    def __init__(self, port: int = 0, start_timeout: float = 60.0) -> None:
        self.port = port
        self.url = ""
        self._start_timeout = start_timeout
        self._process: subprocess.Popen | None = None
        self._secret = secrets.token_urlsafe(32)  # new at each start: nothing outside the stack knows it
        # The AWS credentials the stack signs with, new at each start too (docs/reliability.md).
        self.credentials = StackCredentials.new()

    def start(self) -> "EmulatorProcess":
        import jobsched

        package_root = str(Path(jobsched.__file__).resolve().parent.parent)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])),
               CONTROL_SECRET_ENV: self._secret, CREDENTIALS_ENV: self.credentials.text()}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "jobsched.local.emulator_process", "--port", str(self.port),
             "--parent", str(os.getpid())],
            stdout=subprocess.PIPE, text=True, env=env)
        lines: queue.Queue = queue.Queue()

        def forward() -> None:  # the ready line to us, anything else to our output
            ready = False
            for line in self._process.stdout:
                if not ready and line.startswith(READY_LINE):
                    ready = True
                    lines.put(line)
                    continue
                sys.stdout.write(line)
            if not ready:
                lines.put("")

        threading.Thread(target=forward, name="emulator-output", daemon=True).start()
        try:
            line = lines.get(timeout=self._start_timeout)
        except queue.Empty:
            self.kill()
            raise RuntimeError(f"the emulator did not start within {self._start_timeout:.0f} s") from None
        if not line:
            raise RuntimeError(f"the emulator exited at start (exit code {self._process.wait()})")
        self.url = line[len(READY_LINE):].strip()
        self.port = int(self.url.rsplit(":", 1)[1])
        return self

    @property
    def pid(self) -> int | None:
        """The emulator's process (bench lateness reads its CPU)."""
        return self._process.pid if self._process is not None else None

    def _call(self, method: str, path: str, body: dict | None = None, timeout: float = 300.0) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + CONTROL_PREFIX + path, data=data, method=method,
                                         headers={"Content-Type": "application/json",
                                                  CONTROL_SECRET_HEADER: self._secret})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())

    def keep_state(self, workdir: Path, physical_ids: dict[str, str], reset: bool) -> dict:
        """Restore the saved state (none with `reset`) and keep it from now on. Returns the items
        and messages restored, and the state file's path."""
        return self._call("POST", "state", {"workdir": str(Path(workdir).resolve()), "physicalIds": physical_ids,
                                            "reset": reset})

    def stats(self) -> dict:
        return self._call("GET", "stats", timeout=30)

    def peek(self, table: str, key: dict) -> dict | None:
        """The item as stored, or None: read in the emulator's process, not as a GetItem request."""
        answer = self._call("POST", "peek", {"table": table, "key": key}, timeout=30)
        if not answer.get("found"):
            raise LookupError(f"the emulator has no table {table}")
        return answer.get("item")

    def answers(self, timeout: float = 2.0) -> bool:
        """Whether the emulator's process is up and serving (the local stack's health)."""
        if self._process is None or self._process.poll() is not None:
            return False
        try:
            return self._call("GET", "ping", timeout=timeout).get("ok") is True
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def stop(self, timeout: float = 60.0) -> None:
        """A last snapshot, then the process ends."""
        if self._process is None or self._process.poll() is not None:
            return
        try:
            self._call("POST", "stop", timeout=timeout)
            self._process.wait(timeout)
        except (urllib.error.URLError, OSError, subprocess.TimeoutExpired) as exc:
            print(f"jobsched: the emulator did not stop cleanly ({exc}); killing it", file=sys.stderr, flush=True)
            self.kill()

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(10)


if __name__ == "__main__":
    main()
