"""Every test runs against fake AWS credentials and a fixed region; nothing may reach an
instance-metadata address or a real account."""
import os

for name, value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    "POWERTOOLS_METRICS_NAMESPACE": "Jobsched",
}.items():
    os.environ[name] = value
os.environ.pop("AWS_ENDPOINT_URL", None)
os.environ.pop("AWS_PROFILE", None)

import pytest  # noqa: E402

from jobsched.local.synth import synthesize  # noqa: E402

TEST_SEGMENTS = 2


@pytest.fixture(scope="session")
def template(tmp_path_factory):
    """The synthesized CloudFormation template, once per session."""
    return synthesize(tmp_path_factory.mktemp("cdk.out"), segments=TEST_SEGMENTS, allow_private_targets=True)
