"""Every test runs against fake AWS credentials and a fixed region; nothing may reach an
instance-metadata address or a real account."""
import os

from jobsched.local.fake_aws import use_local_aws_env  # noqa: E402

use_local_aws_env()
os.environ["POWERTOOLS_METRICS_NAMESPACE"] = "Jobsched"

import pytest  # noqa: E402

from jobsched.local import strict_aws  # noqa: E402
from jobsched.local.synth import synthesize  # noqa: E402

# Every botocore client built from here on answers to the strict layer while one is active (each
# in-process stack activates one: tests/integration/conftest.py).
strict_aws.install()

TEST_SEGMENTS = 2


@pytest.fixture(autouse=True)
def _no_strict_layer_outlives_its_test():
    """A stack's layer answers for its own emulator: none is left active for the next test (a
    leftover layer peeking for a test that has no emulator would call a real endpoint)."""
    yield
    strict_aws.activate(None)


@pytest.fixture(scope="session")
def template(tmp_path_factory):
    """The synthesized CloudFormation template, once per session."""
    return synthesize(tmp_path_factory.mktemp("cdk.out"), segments=TEST_SEGMENTS, allow_private_targets=True)


def pytest_terminal_summary(terminalreporter):
    """The strict AWS layer's figures of the session: the tests with the hottest partition keys
    (share of a key's per-second limit) and the highest KMS rates."""
    import sys

    integration = sys.modules.get("tests.integration.conftest")
    STRICT_REPORTS = getattr(integration, "STRICT_REPORTS", None)
    if not STRICT_REPORTS:
        return
    limits = strict_aws.Limits()

    def heat(report):
        if not report.hottest:
            return 0.0
        use = report.hottest[0][1]
        return max(use.peak_wcu / limits.partition_wcu, use.peak_rcu / limits.partition_rcu)

    terminalreporter.section("strict AWS: hottest partition keys per test")
    for test, report in sorted(STRICT_REPORTS, key=lambda r: heat(r[1]), reverse=True)[:10]:
        key, use = report.hottest[0] if report.hottest else ("-", strict_aws.PartitionUse())
        terminalreporter.write_line(f"{heat(report):6.1%} {test}: {key} peak {use.peak_wcu:g} WCU/s, "
                                    f"{use.peak_rcu:g} RCU/s, throttled {report.throttled}; "
                                    f"KMS peak {report.kms_peak_per_second}/s; denied {len(report.denied)}")
    denied = [(t, r.denied) for t, r in STRICT_REPORTS if r.denied]
    for test, calls in denied:
        terminalreporter.write_line(f"AccessDenied in {test}: {sorted(set(calls))}")
