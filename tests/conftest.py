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


@pytest.fixture(scope="session")
def template(tmp_path_factory):
    """The synthesized CloudFormation template, once per session."""
    return synthesize(tmp_path_factory.mktemp("cdk.out"), segments=TEST_SEGMENTS, allow_private_targets=True)
