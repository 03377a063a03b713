"""Start-up of the local stack: `make run` twice on one fresh work directory, each timed from the
process start until `GET /v1/health` answers 200 (the keys work and every segment has ticked).
The first start synthesizes the CDK app; the second reuses the cached template."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.request

from bench.common import machine, print_table

PORTS = {"JOBSCHED_PORT": "18480", "JOBSCHED_EMULATOR_PORT": "18490", "JOBSCHED_ECHO_PORT": "18481"}


def ready_after(workdir: str, limit_s: float = 120.0) -> float:
    env = {**os.environ, **PORTS, "JOBSCHED_WORKDIR": workdir, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "jobsched.local"], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        while time.monotonic() - started < limit_s:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{PORTS['JOBSCHED_PORT']}/v1/health", timeout=1) as r:
                    if r.status == 200:
                        return time.monotonic() - started
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"not ready within {limit_s} s")
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


def main(argv: list[str] | None = None) -> None:
    print(f"startup: the local stack, started twice on one work directory, on {machine()}")
    with tempfile.TemporaryDirectory() as workdir:
        first = ready_after(workdir)
        second = ready_after(workdir)
    print_table("Ready after (health 200)", [("first (synthesizes)", f"{first:.1f} s"),
                                             ("second (cached template)", f"{second:.1f} s")], ("start", "ready"))


if __name__ == "__main__":
    main()
