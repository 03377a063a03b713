"""The strict layer's ARN condition operators (local/strict_aws/iam.py): as IAM matches them, part
by part of the six colon-delimited parts, a wildcard never spanning a colon, case-sensitive."""
from jobsched.local.strict_aws import condition_holds

QUEUE = "arn:aws:sqs:us-east-1:123456789012:lane-normal"


def holds(operator: str, wanted, have: str) -> bool:
    return condition_holds({operator: {"aws:SourceArn": wanted}}, {"aws:sourcearn": have})


def test_a_wildcard_in_one_part_does_not_span_a_colon():
    assert holds("ArnLike", "arn:aws:sqs:*:123456789012:lane-*", QUEUE)
    # One `*` for region and account together: a whole-string glob would take it.
    assert not holds("ArnLike", "arn:aws:sqs:*:lane-normal", QUEUE)
    assert not holds("ArnLike", "arn:aws:*", QUEUE)
    assert holds("ArnNotLike", "arn:aws:sqs:*:lane-normal", QUEUE)
    assert not holds("ArnLike", "arn:aws:sqs:us-east-?:123456789012:lane-normal", "arn:aws:sqs:us-east-1:1:x:lane-normal")


def test_the_resource_part_keeps_its_colons():
    assert holds("ArnLike", "arn:aws:ecs:us-east-1:123456789012:task/*",
                 "arn:aws:ecs:us-east-1:123456789012:task/c:1")
    assert holds("ArnLike", "arn:aws:logs:*:*:log-group:/jobs:*", "arn:aws:logs:us-east-1:1:log-group:/jobs:x")


def test_case_matters_as_iam_documents_it():
    assert not holds("ArnLike", "arn:aws:sqs:*:123456789012:LANE-*", QUEUE)
    assert not holds("ArnEquals", QUEUE.upper(), QUEUE)
    assert holds("ArnEquals", "arn:aws:sqs:*:123456789012:lane-normal", QUEUE)  # ArnEquals takes wildcards too
