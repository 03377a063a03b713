"""ChangeMessageVisibility (an in-place hand-back, store/queues.py redeliver_after): only a receipt
that is no longer good is passed over; a throttle or a denial is raised, so the worker counts it
and reports the record failed."""
import pytest
from botocore.exceptions import ClientError

from jobsched.domain.clock import FakeClock
from jobsched.domain.jobs import Priority
from jobsched.store.queues import LaneQueues

URLS = {p: f"https://sqs.us-east-1.amazonaws.com/123456789012/{p.value.lower()}" for p in Priority}
ARN = "arn:aws:sqs:us-east-1:123456789012:normal"


class FaultyQueue:
    """A queue whose ChangeMessageVisibility answers with the error `code`."""

    def __init__(self, code: str) -> None:
        self.code = code

    def change_message_visibility(self, QueueUrl, ReceiptHandle, VisibilityTimeout):  # noqa: N803
        raise ClientError({"Error": {"Code": self.code, "Message": "no"}}, "ChangeMessageVisibility")


def lanes(code: str) -> LaneQueues:
    return LaneQueues(FaultyQueue(code), URLS, FakeClock(1_700_000_000_000), lambda: b"k" * 32)


@pytest.mark.parametrize("code", ["ReceiptHandleIsInvalid", "AWS.SimpleQueueService.MessageNotInflight",
                                  "MessageNotInflight", "InvalidParameterValue"])
def test_a_receipt_no_longer_good_is_passed_over(code):
    assert lanes(code).redeliver_after(ARN, "r", 5) is False


@pytest.mark.parametrize("code", ["AccessDenied", "AccessDeniedException", "RequestThrottled", "ThrottlingException"])
def test_a_denial_or_throttle_is_not_swallowed(code):
    with pytest.raises(ClientError, match=code):
        lanes(code).redeliver_after(ARN, "r", 5)
