"""The environment of everything that runs on the emulator: fake credentials, a region, and no
instance-metadata probe. Nothing here may ever reach a real AWS account."""
from __future__ import annotations

import os

LOCAL_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    # botocore must never probe an instance-metadata address.
    "AWS_EC2_METADATA_DISABLED": "true",
    # The machine image ships Node 20, which jsii (the CDK's runtime) warns about at length.
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
}


def use_local_aws_env(endpoint_url: str | None = None, credentials=None) -> None:
    """The process's AWS environment; with `credentials` (a StackCredentials, local/emulator_auth.py),
    every client it builds signs with the local stack's own keys, the only ones its emulator takes."""
    os.environ.update(LOCAL_AWS_ENV)
    os.environ.pop("AWS_PROFILE", None)
    if credentials is not None:
        os.environ["AWS_ACCESS_KEY_ID"] = credentials.access_key_id
        os.environ["AWS_SECRET_ACCESS_KEY"] = credentials.secret_access_key
        os.environ.pop("AWS_SESSION_TOKEN", None)
    if endpoint_url:
        os.environ["AWS_ENDPOINT_URL"] = endpoint_url
    else:
        os.environ.pop("AWS_ENDPOINT_URL", None)
