"""Every test runs against fake AWS credentials and a fixed region; nothing may reach an
instance-metadata address or a real account."""
import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path

from jobsched.local.fake_aws import use_local_aws_env  # noqa: E402

use_local_aws_env()
os.environ["POWERTOOLS_METRICS_NAMESPACE"] = "Jobsched"

import pytest  # noqa: E402

from jobsched.local import moto_speedups, strict_aws  # noqa: E402
from jobsched.local.synth import synthesize, template_key  # noqa: E402

# Every botocore client built from here on answers to the strict layer while one is active (each
# in-process stack activates one: tests/integration/conftest.py).
strict_aws.install()
# DynamoDB's item answers written as plain JSON, as the local stack's emulator writes them (the
# same answers: tests/unit/test_emulator_speedups.py), instead of moto's writer's walk of every
# attribute: the in-process stacks' reads cost a fraction of the time.
moto_speedups.speed_up_item_answers()
# One botocore loader for every session (each stack opens sessions per function role): AWS's model
# files parsed once per process, not once per stack.
moto_speedups.share_botocore_loader()

TEST_SEGMENTS = 2
ROOT = Path(__file__).resolve().parents[1]
# The local stacks the tests start (each in a work directory of its own) share one template cache.
os.environ.setdefault("JOBSCHED_TEMPLATE_CACHE", str(ROOT / ".build" / "test-template" / "local"))


@pytest.fixture(autouse=True)
def _no_strict_layer_outlives_its_test():
    """A stack's layer answers for its own emulator: none is left active for the next test (a
    leftover layer peeking for a test that has no emulator would call a real endpoint)."""
    yield
    strict_aws.activate(None)


@pytest.fixture(scope="session")
def cdk_out(template) -> Path:
    """The directory the test template was synthesized into (its assets beside it)."""
    return ROOT / ".build" / "test-template" / "cdk.out"


def _template_inputs_digest() -> str:
    """What the test template is made from: the CDK app and every function module (the app reads
    some of their constants), the CDK and project settings, and the template's own options."""
    digest = hashlib.sha256(f"{TEST_SEGMENTS}:allow-private".encode())
    for base in (ROOT / "infra", ROOT / "functions"):
        for path in sorted(base.rglob("*")):
            if path.is_file() and path.suffix in (".py", ".json", ".toml") and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    for path in (ROOT / "cdk.json", ROOT / "pyproject.toml", ROOT / "layers" / "requirements.txt"):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:24]


def kept_json(saved: Path, lock_path: Path, make, replaces: str):
    """make()'s result, kept as JSON in `saved` until its name (its inputs' digest) changes.
    Processes sharing it (the parallel test workers) make it one at a time: the first under the
    lock at `lock_path` makes it, the others wait and read it. The files matching `replaces` (the
    same thing made from older inputs) are removed when it is made; it is written whole (a
    temporary file, then renamed)."""
    saved.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if saved.is_file():
                return json.loads(saved.read_text())
            made = make()
            for old in saved.parent.glob(replaces):
                old.unlink()
            saved.with_suffix(".tmp").write_text(json.dumps(made))
            saved.with_suffix(".tmp").replace(saved)
            return made
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def template(tmp_path_factory):
    """The synthesized CloudFormation template: synthesized once (a CDK synthesis takes tens of
    seconds) and kept in .build/test-template until its inputs change. The parallel test workers
    share it: the first synthesizes under a file lock, the others wait and read it."""
    cache = ROOT / ".build" / "test-template"
    outdir = cache / "cdk.out"  # kept: a test reads the synthesized assets (tests/infra)

    def synthesized() -> dict:
        shutil.rmtree(outdir, ignore_errors=True)
        template = synthesize(outdir, segments=TEST_SEGMENTS, allow_private_targets=True)
        # The same template is what a local stack of TEST_SEGMENTS segments starts from.
        local = Path(os.environ["JOBSCHED_TEMPLATE_CACHE"])
        local.mkdir(parents=True, exist_ok=True)
        shared = local / f"template-s{TEST_SEGMENTS}-p-{template_key(TEST_SEGMENTS, True)}.json"
        shared.with_suffix(".partial").write_text(json.dumps(template))  # never half-written to a
        shared.with_suffix(".partial").replace(shared)  # worker's stack reading it (cached_template)
        return template

    return kept_json(cache / f"pytest-{_template_inputs_digest()}.json", cache / ".lock", synthesized, "pytest-*.json")


# The tests that hold the local stack to the wall clock: a job must arrive within a second of its
# due instant. (The other e2e tests wait for what they check, whatever the machine's load.)
REALTIME_FILES = ("tests/e2e/test_local_stack.py", "tests/e2e/test_local_restart.py")


def pytest_collection_modifyitems(config, items):
    """The tests that measure lateness on the wall clock are marked `realtime`: `make test` runs
    them alone, after the rest has run on parallel workers, whose load made them late (a fire
    measured 5 s late)."""
    for item in items:
        if item.nodeid.startswith(REALTIME_FILES) or item.nodeid.startswith(tuple(f[6:] for f in REALTIME_FILES)):
            item.add_marker(pytest.mark.realtime)


def _strict_rows() -> list[dict]:
    """The strict layer's figures of each test this process ran, as plain values."""
    import sys

    integration = sys.modules.get("tests.integration.conftest")
    limits = strict_aws.Limits()
    rows = []
    for test, report in getattr(integration, "STRICT_REPORTS", None) or []:
        key, use = report.hottest[0] if report.hottest else ("-", strict_aws.PartitionUse())
        heat = max(use.peak_wcu / limits.partition_wcu, use.peak_rcu / limits.partition_rcu) if report.hottest else 0.0
        rows.append({"test": test, "heat": heat, "key": key, "wcu": use.peak_wcu, "rcu": use.peak_rcu,
                     "throttled": report.throttled, "kms": report.kms_peak_per_second,
                     "denied": sorted(set(report.denied))})
    return rows


_WORKER_ROWS: list[dict] = []
_WORKER_ALLOWED: list[list[str]] = []


def _allowed_grants() -> list[list[str]]:
    import sys

    return [list(pair) for pair in getattr(sys.modules.get("tests.integration.conftest"), "ALLOWED_GRANTS", ())]


def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a parallel worker: its figures go to the controller
        workeroutput["strict_rows"] = json.dumps(_strict_rows())
        workeroutput["allowed_grants"] = json.dumps(_allowed_grants())


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    _WORKER_ROWS.extend(json.loads(getattr(node, "workeroutput", {}).get("strict_rows", "[]")))
    _WORKER_ALLOWED.extend(json.loads(getattr(node, "workeroutput", {}).get("allowed_grants", "[]")))


def _write_grant_report(terminalreporter) -> None:
    """JOBSCHED_GRANT_REPORT=<file>: the template's grants that no call of the session's tests used
    (local/grant_report.py), for the principals that made a call."""
    target = os.environ.get("JOBSCHED_GRANT_REPORT")
    saved = ROOT / ".build" / "test-template" / f"pytest-{_template_inputs_digest()}.json"
    if not target or not saved.is_file():
        return
    from jobsched.local.grant_report import granted, text, unused

    pairs = {tuple(p) for p in _allowed_grants() + _WORKER_ALLOWED}
    report = text(unused(granted(json.loads(saved.read_text())), pairs))
    Path(target).write_text(report + "\n")
    terminalreporter.write_line(f"grants no call used: {len(report.splitlines())} principals, written to {target}")


def pytest_terminal_summary(terminalreporter):
    """The strict AWS layer's figures of the session: the tests with the hottest partition keys
    (share of a key's per-second limit) and the highest KMS rates."""
    _write_grant_report(terminalreporter)
    rows = _strict_rows() + _WORKER_ROWS
    if not rows:
        return
    terminalreporter.section("strict AWS: hottest partition keys per test")
    for row in sorted(rows, key=lambda r: r["heat"], reverse=True)[:10]:
        terminalreporter.write_line(f"{row['heat']:6.1%} {row['test']}: {row['key']} peak {row['wcu']:g} WCU/s, "
                                    f"{row['rcu']:g} RCU/s, throttled {row['throttled']}; "
                                    f"KMS peak {row['kms']}/s; denied {len(row['denied'])}")
    for row in rows:
        if row["denied"]:
            terminalreporter.write_line(f"AccessDenied in {row['test']}: {row['denied']}")
