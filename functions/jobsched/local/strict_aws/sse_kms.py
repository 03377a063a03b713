"""The strict layer's KMS part: the KMS calls SQS and SNS make for a sender to a queue or topic
encrypted with a customer-managed key (SSE-KMS).

SQS and SNS ask KMS for a data key with the sender's own credentials: a producer needs
kms:GenerateDataKey and kms:Decrypt on the queue's or topic's key (SQS Developer Guide, "Key
management"; SNS Developer Guide, "Encryption at rest"), through the service (kms:ViaService
sqs.<region>.amazonaws.com / sns.<region>.amazonaws.com) with the queue's or topic's ARN as
encryption context. A key that refuses, is disabled, pending deletion or gone fails the send with
the service's KMS error (SQS: KMS.AccessDeniedException and its kin, raised as botocore's KmsAccessDenied
...; SNS: KMSAccessDenied ...). An AWS managed key (alias/aws/sqs, alias/aws/sns) allows every
principal of the account through its service. SQS reuses a data key for the queue's
KmsDataKeyReusePeriodSeconds (300 by default) per caller: a sender allowed once is not checked again
for that long (a grant revoked meanwhile takes effect at the period's end, as on AWS). The key
policy is taken to delegate to IAM (the default key policy): the caller's IAM policies decide.
Functions here read through clients the layer passes in (unchecked calls); the layer decides."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from botocore.exceptions import ClientError

SSE_SENDS = frozenset({("sqs", "SendMessage"), ("sqs", "SendMessageBatch"), ("sns", "Publish"),
                       ("sns", "PublishBatch")})
SSE_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
AWS_MANAGED_ALIASES = {"sqs": "alias/aws/sqs", "sns": "alias/aws/sns"}
DEFAULT_REUSE_SECONDS = 300  # SQS's KmsDataKeyReusePeriodSeconds when a queue sets none
# How each service answers a send whose key refuses: (error code, botocore's modeled exception).
# SQS (JSON protocol, query compatible) gives the query code in Error.Code; SNS its own codes.
REFUSALS = {
    "sqs": {"denied": ("KMS.AccessDeniedException", "KmsAccessDenied"),
            "Disabled": ("KMS.DisabledException", "KmsDisabled"),
            "missing": ("KMS.NotFoundException", "KmsNotFound"),
            "state": ("KMS.InvalidStateException", "KmsInvalidState")},
    "sns": {"denied": ("KMSAccessDenied", "KMSAccessDenied"),
            "Disabled": ("KMSDisabled", "KMSDisabled"),
            "missing": ("KMSNotFound", "KMSNotFound"),
            "state": ("KMSInvalidState", "KMSInvalidState")},
}


@dataclass(frozen=True)
class SseKey:
    """A queue's or topic's customer-managed key as KMS knows it ("" state: no such key)."""
    arn: str
    state: str
    tags: dict
    reuse_seconds: int  # how long SQS reuses a data key for one caller (0: SNS, checked each send)


def address_of(service: str, params: dict) -> str | None:
    """The queue URL or topic ARN a send names."""
    return params.get("QueueUrl") if service == "sqs" else (params.get("TopicArn") or params.get("TargetArn"))


def sse_key(client_of: Callable[[str], Any], service: str, address: str, region: str, account: str,
            own_keys: dict[str, str]) -> SseKey | None:
    """The customer-managed key the queue or topic encrypts with (None: unencrypted, SSE-SQS, an AWS
    managed key, or no such queue or topic: the service answers that itself). `own_keys`: the
    stack's own keys (id as a queue names it -> its id now), taken as enabled and untagged: the
    emulator cannot describe a key created from a template (moto reads its key policy as text)."""
    try:
        if service == "sqs":
            attributes = client_of("sqs").get_queue_attributes(
                QueueUrl=address, AttributeNames=["KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds"],
            ).get("Attributes", {})
        else:
            attributes = client_of("sns").get_topic_attributes(TopicArn=address).get("Attributes", {})
    except ClientError:
        return None
    key_id = attributes.get("KmsMasterKeyId") or ""
    if not key_id or key_id.split(":")[-1] == AWS_MANAGED_ALIASES[service]:
        return None
    reuse = int(attributes.get("KmsDataKeyReusePeriodSeconds") or DEFAULT_REUSE_SECONDS) if service == "sqs" else 0
    if key_id.split("/")[-1] in own_keys:
        return SseKey(f"arn:aws:kms:{region}:{account}:key/{own_keys[key_id.split('/')[-1]]}", "Enabled", {}, reuse)
    kms = client_of("kms")
    try:
        metadata = kms.describe_key(KeyId=key_id)["KeyMetadata"]
    except ClientError:
        kind = "" if key_id.startswith("alias/") else "key/"
        arn = key_id if key_id.startswith("arn:") else f"arn:aws:kms:{region}:{account}:{kind}{key_id}"
        return SseKey(arn, "", {}, reuse)
    if metadata.get("KeyManager") == "AWS":
        return None
    tags = {t["TagKey"]: t["TagValue"] for t in kms.list_resource_tags(KeyId=metadata["KeyId"]).get("Tags", [])}
    # Named in the layer's region, as the template's policies are (a simulated region's key too).
    return SseKey(f"arn:aws:kms:{region}:{account}:key/{metadata['KeyId']}", metadata.get("KeyState", "Enabled"),
                  tags, reuse)


def unencrypted_recheck_ms(service: str) -> int:
    """How long the layer takes a queue found without a customer-managed key to stay so (SQS's
    default reuse period; SNS: every publish looks again)."""
    return DEFAULT_REUSE_SECONDS * 1000 if service == "sqs" else 0


def condition_keys(service: str, address: str, key: SseKey, region: str, account: str) -> dict[str, Any]:
    """The condition keys of KMS's request made by the service for the sender (lowercase names)."""
    if service == "sqs":
        name = address.rstrip("/").split("/")[-1]
        context = {"kms:encryptioncontext:aws:sqs:arn": f"arn:aws:sqs:{region}:{account}:{name}"}
    else:
        context = {"kms:encryptioncontext:aws:sns:topicarn": address}
    context["kms:viaservice"] = f"{service}.{region}.amazonaws.com"
    context["kms:calleraccount"] = account
    context.update({f"aws:resourcetag/{k}".lower(): v for k, v in key.tags.items()})
    return context


def refusal(client, operation: str, service: str, kind: str, message: str) -> ClientError:
    """The error the service answers a send with when KMS refused its data-key request."""
    code, modeled = REFUSALS[service][kind]
    error = {"Code": code, "Message": message}
    if service == "sqs":
        error["QueryErrorCode"] = modeled  # as botocore's parser keeps SQS's shape name beside the query code
    response = {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400, "HTTPHeaders": {}, "RetryAttempts": 0}}
    return client.exceptions.from_code(modeled)(response, operation)


def key_state_refusal(client, operation: str, service: str, key: SseKey) -> ClientError | None:
    """A key no caller may use now: gone, disabled, or pending deletion (or import)."""
    if key.state == "Enabled":
        return None
    if not key.state:
        return refusal(client, operation, service, "missing", f"Key '{key.arn}' does not exist (Service: AWSKMS; "
                       "Status Code: 400; Error Code: NotFoundException)")
    kind = "Disabled" if key.state == "Disabled" else "state"
    return refusal(client, operation, service, kind, f"{key.arn} is {key.state.lower()}. (Service: AWSKMS; "
                   f"Status Code: 400; Error Code: {'Disabled' if kind == 'Disabled' else 'KMSInvalidState'}Exception)")
