"""A claim that botocore sends again after a read time-out finds its own claim applied (issue 28,
item 12): it is recognised as ours and the attempt goes on, instead of being taken for another
worker's and waiting out its own lease."""
import boto3
import pytest

from jobsched.domain.errors import ConditionLost
from jobsched.domain.executions import Dispatch, DispatchKind
from jobsched.store.dynamo import raw_client
from jobsched.store.executions import ExecutionsStore
from .aws_doubles import RetriedAfterReadTimeout


def test_a_claim_repeated_after_a_read_timeout_is_recognised_as_our_own(harness):
    now = harness.clock.now_ms()
    dispatch = Dispatch(DispatchKind.MANUAL, "tenant-a", "job_x", "job_x.0000000000001", 1, 1)
    dynamodb = boto3.session.Session(region_name="us-east-1").resource("dynamodb")
    client = RetriedAfterReadTimeout(raw_client(dynamodb))
    store = ExecutionsStore(dynamodb, harness.settings.executions_table, client=client)
    claim = store.claim(dispatch, now, now + 60_000, "token-hash-of-this-attempt")
    assert client.repeated == 1
    assert claim.attempt == 1 and claim.taken_over is None
    # Another worker's claim (another token) of the same attempt still loses
    with pytest.raises(ConditionLost):
        harness.stores.executions.claim(dispatch, now, now + 60_000, "another-workers-token")
