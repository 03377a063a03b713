"""The data layer turns a failed condition into ConditionLost carrying the item as it is now."""
from botocore.exceptions import ClientError

from jobsched.store.dynamo import _condition_lost
def test_condition_lost_carries_the_current_item_in_plain_python():
    error = ClientError({"Error": {"Code": "ConditionalCheckFailedException", "Message": "x"},
                         "Item": {"status": {"S": "RUNNING"}, "attempt": {"N": "2"}}}, "UpdateItem")
    lost = _condition_lost(error, "claimed")
    assert lost.current == {"status": "RUNNING", "attempt": 2}


def test_other_errors_are_not_condition_losses():
    error = ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "x"}}, "PutItem")
    assert _condition_lost(error, "x") is None
