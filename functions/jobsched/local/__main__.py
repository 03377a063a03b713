"""`make run`: the whole scheduler locally on an embedded AWS emulator.

Environment: JOBSCHED_PORT (API, default 8080), JOBSCHED_API_KEYS ("tenant:key,..."; else a
dev key is printed), JOBSCHED_SEGMENTS (default 4), JOBSCHED_ECHO_PORT (default 8081),
JOBSCHED_EMULATOR_PORT (default 8090, where `jobsched keys --local` finds it), DEMO=1 (schedule a demo job and show it
fire), JOBSCHED_VERBOSE=1 (the functions' INFO logs as well as their EMF metric lines),
JOBSCHED_WORKDIR (default .build/local: the state kept across restarts), JOBSCHED_RESET=1 (start
empty; `make run RESET=1`)."""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import urllib.request
from pathlib import Path

from jobsched.local.fake_aws import use_local_aws_env
from jobsched.local.runtime import LocalRuntime, Options


def _int_env(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        sys.exit(f"{name} must be an integer, got {value!r}")


def parse_api_keys(text: str) -> list[tuple[str, str]]:
    pairs = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        tenant, sep, key = item.partition(":")
        if not sep or not tenant or not key:
            sys.exit(f"JOBSCHED_API_KEYS: expected 'tenant:key' pairs, got {item!r}")
        pairs.append((tenant, key))
    return pairs


def call_api(url: str, key: str, method: str, path: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method, headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def run_demo(api_url: str, key: str, echo_url: str) -> None:
    try:
        _demo(api_url, key, echo_url)
    except Exception as exc:  # noqa: BLE001 - the demo reports, the stack keeps running
        print(f"[demo] failed: {exc}", flush=True)


def _demo(api_url: str, key: str, echo_url: str) -> None:
    run_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 20))
    job = call_api(api_url, key, "POST", "/v1/jobs", {
        "name": "demo-hello", "type": "ONE_TIME", "runAt": run_at,
        "target": {"type": "HTTP", "url": f"{echo_url}/demo"}, "payload": {"hello": "world"}})
    print(f"[demo] created {job['jobId']}, due {job['nextFireAt']}; watch the echo line below.", flush=True)
    deadline = time.time() + 90
    while time.time() < deadline:
        time.sleep(2)
        page = call_api(api_url, key, "GET", f"/v1/jobs/{job['jobId']}/executions")
        done = [e for e in page["items"] if e["status"] in ("SUCCEEDED", "DEAD")]
        if done:
            e = done[0]
            print(f"[demo] execution {e['executionId']}: {e['status']}, attempt {e['attempt']}, "
                  f"late by {e['lateMs']} ms", flush=True)
            return
    print("[demo] the demo job has not finished within 90 s", flush=True)


DEV_KEY_FILE = "dev-key"


def _dev_key(workdir: Path, keys) -> str:
    """The dev tenant's key: the same across restarts (kept beside the state, readable by the
    user only), since the state keeps only its hash."""
    path = workdir / DEV_KEY_FILE
    if path.is_file() and (workdir / "state.json").is_file():
        key = path.read_text().strip()
        keys.register("dev", key)
        return key
    _, key = keys.issue("dev")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:  # never readable by others
        handle.write(key + "\n")
    path.chmod(0o600)  # a file left by an earlier version may have had another mode
    return key


def boot(options: Options, seeded: list[tuple[str, str]], progress=None):
    """Start the stack, store the keys, then mark it ready: `GET /v1/health` answers 503 until a
    client can be served with the printed or seeded keys."""
    progress = progress or (lambda text: print(text, flush=True))
    runtime = LocalRuntime(options).start(announce_ready=False, progress=progress)

    from jobsched.domain.clock import SystemClock
    from jobsched.service.auth import ApiKeys
    from jobsched.store.aws import build_stores

    stores = build_stores(runtime.settings)
    keys = ApiKeys(stores.api_keys, SystemClock())
    if seeded:
        for tenant, key in seeded:
            keys.register(tenant, key)
        key_lines = [f"  tenant {tenant}: {key}" for tenant, key in seeded]
        demo_key = seeded[0][1]
    else:
        demo_key = _dev_key(options.workdir, keys)
        key_lines = [f"  tenant dev: {demo_key}"]
    tenants = [tenant for tenant, _ in seeded] if seeded else ["dev"]
    # And every tenant the state kept (made with `jobsched keys --local create`, or seeded at an
    # earlier start): the emulator keeps no ECS state, each start registers their definitions again.
    kept = sorted({k["tenantId"] for k in stores.api_keys.list_keys(None) if not k.get("revoked")} - set(tenants))
    key_lines += ["Container jobs (ECS_TASK, run here as local processes):",
                  *runtime.grant_container_tasks(tenants + kept)]
    progress("jobsched: keys stored; waiting for the first tick of every segment ...")
    runtime.mark_ready()
    return runtime, key_lines, demo_key


def _stop_on_sigterm() -> None:
    """SIGTERM (a service manager, `kill`) stops the stack as Ctrl-C does, and Ctrl-C stops it even
    when the stack was started with SIGINT ignored: a process inherits an ignored SIGINT, and Python
    then installs no KeyboardInterrupt for it (a shell's background job, nohup, a test runner's
    worker: the stack went on running after Ctrl-C reached it)."""
    def interrupt(_signum, _frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def main() -> None:
    use_local_aws_env()
    _stop_on_sigterm()
    options = Options(
        port=_int_env("JOBSCHED_PORT", 8080),
        emulator_port=_int_env("JOBSCHED_EMULATOR_PORT", 8090),
        segments=_int_env("JOBSCHED_SEGMENTS", 4),
        workdir=Path(os.environ.get("JOBSCHED_WORKDIR", ".build/local")),
        quiet_functions=os.environ.get("JOBSCHED_VERBOSE", "") not in ("1", "true"),
        keep_metrics=True,
        reset=os.environ.get("JOBSCHED_RESET", "") in ("1", "true", "yes"),
    )
    seeded = parse_api_keys(os.environ.get("JOBSCHED_API_KEYS", ""))
    runtime = echo = None
    # Ctrl-C stops the stack wherever it lands: while it starts, while it prints the banner, or
    # while it runs (one that landed inside the banner's print used to end in a traceback).
    try:
        runtime, key_lines, demo_key = boot(options, seeded)
        from jobsched.local.echo import EchoServer

        echo = EchoServer(port=_int_env("JOBSCHED_ECHO_PORT", 8081))
        print("\n".join([
            "",
            f"jobsched is running: API {runtime.api_url}/v1  (health: {runtime.api_url}/v1/health)",
            f"  emulator (moto) at {runtime.emulator.url}; {runtime.settings.segments} segments ticking each minute",
            f"  echo endpoint for targets: {echo.url}/anything",
            "API keys:",
            *key_lines,
            "Try:",
            f"  export JOBSCHED_URL={runtime.api_url} JOBSCHED_API_KEY={demo_key}",
            "  jobsched jobs list          (.venv/bin/jobsched, or `source .venv/bin/activate`)",
            "  jobsched keys --local create another-tenant",
            "  jobsched stats             (lateness and outcomes from the functions' EMF metric lines)",
            "Ctrl-C stops it.",
            "",
        ]), flush=True)
        if os.environ.get("DEMO", "") in ("1", "true", "yes"):
            threading.Thread(target=run_demo, args=(runtime.api_url, demo_key, echo.url), daemon=True).start()
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("\njobsched: stopping", flush=True)
        if runtime is not None:
            runtime.stop()
        if echo is not None:
            echo.stop()


if __name__ == "__main__":
    main()
