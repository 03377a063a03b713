"""The strict AWS layer (local/strict_aws/) says no where AWS says no: each kind of refusal,
answered as botocore raises it, and the billing it reports."""
import pytest
from botocore.exceptions import ClientError

from jobsched.local import strict_aws
from jobsched.local.strict_aws import (
    MAX_ITEM_BYTES, SNS_MAX_MESSAGE_BYTES, SQS_MAX_MESSAGE_BYTES, StrictLayerError, Template, acting_as, item_size,
)
from jobsched.domain.tenant_tags import TENANT_TAG_KEY
from jobsched.settings import Env
from jobsched.store.job_lists import JOBS_BY_STATE_INDEX
from jobsched.store.signing import SIGNING_PURPOSE

from .harness import KEY_A, TENANT_A, keep_old_state_index

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/x"}


def refused(call, code: str, status: int = 400) -> ClientError:
    with pytest.raises(ClientError) as caught:
        call()
    assert caught.value.response["Error"]["Code"] == code, caught.value.response
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    return caught.value


def job_item(job_id: str, filler: int = 0, tenant: str = TENANT_A) -> dict:
    return {"tenantId": {"S": tenant}, "jobId": {"S": job_id}, "blob": {"S": "x" * filler}}


# --- item 28.1 through the layer --------------------------------------------------------------

def test_tag_and_name_filters_answer_through_the_apis_role(harness):
    # Given jobs with tags, when the API lists them by tag and by name (a BatchGetItem on Jobs),
    # then it answers 200 under the API role's IAM (AccessDenied, a 500, without the grant).
    for i in range(3):
        harness.create_job({"name": f"report-{i}", "type": "CRON", "schedule": "0 3 * * *", "target": HOOK,
                            "tags": {"team": "a"}})
    status, body = harness.request("GET", "/v1/jobs?tag=team:a")
    assert status == 200, body
    assert sorted(j["name"] for j in body["items"]) == ["report-0", "report-1", "report-2"]
    status, body = harness.request("GET", "/v1/jobs?namePrefix=report-")
    assert status == 200 and len(body["items"]) == 3, body
    assert harness.strict.report().denied == []


def test_a_workers_batch_reads_its_jobs_in_one_allowed_call(harness):
    # Given several jobs due at once, when one worker batch runs them, no call is denied (the
    # batch's BatchGetItem was, and each record then read its own job).
    for i in range(4):
        harness.create_job({"name": f"now-{i}", "type": "ONE_TIME", "runAt": "2030-01-01T00:00:30Z", "target": HOOK})
    harness.advance(60)
    assert len(harness.target.calls) == 4
    assert harness.strict.report().denied == []


# --- IAM ---------------------------------------------------------------------------------------

def test_an_action_the_role_lacks_is_access_denied(harness):
    client = harness.session.client("dynamodb")
    table = harness.settings.jobs_table
    with acting_as("api"):
        error = refused(lambda: client.scan(TableName=table, Limit=1), "AccessDeniedException")
        assert "dynamodb:Scan" in str(error)
        client.get_item(TableName=table, Key={"tenantId": {"S": "t"}, "jobId": {"S": "j"}})  # granted
    with acting_as("tick"):  # the tick may batch-read jobs, never read one
        refused(lambda: client.get_item(TableName=table, Key={"tenantId": {"S": "t"}, "jobId": {"S": "j"}}),
                "AccessDeniedException")
    # No function: test setup, unchecked.
    client.delete_item(TableName=table, Key={"tenantId": {"S": "t"}, "jobId": {"S": "j"}})


def test_an_index_is_its_own_resource(harness):
    # The API's grant on Executions covers its indexes (table/<t>/index/*); the worker's on Jobs
    # names the table alone, so a query of an index of Jobs would be denied.
    client = harness.session.client("dynamodb")
    executions = harness.settings.executions_table
    query = {"KeyConditionExpression": "deadLetterTenant = :t", "ExpressionAttributeValues": {":t": {"S": "t"}}}
    with acting_as("api"):
        client.query(TableName=executions, IndexName="DeadLetters", **query)
    with acting_as("tick"):  # the tick may only put executions (SKIPPED records)
        refused(lambda: client.query(TableName=executions, IndexName="DeadLetters", **query), "AccessDeniedException")
    arn = harness.strict._resources_of(strict_aws._Call("dynamodb", "Query", {
        "TableName": executions, "IndexName": "DeadLetters"}, 0))
    assert arn == [f"arn:aws:dynamodb:us-east-1:123456789012:table/{executions}/index/DeadLetters"]


def tenant_session(harness, tenant: str = TENANT_A):
    """The worker's session of the targets role for a tenant (as store/targets.TenantSessions makes it)."""
    import boto3

    with acting_as("worker"):
        credentials = harness.session.client("sts").assume_role(
            RoleArn=harness.envs["worker"][Env.TARGETS_ROLE_ARN], RoleSessionName="tenant-session",
            Tags=[{"Key": TENANT_TAG_KEY, "Value": tenant}])["Credentials"]
    return boto3.session.Session(aws_access_key_id=credentials["AccessKeyId"],
                                 aws_secret_access_key=credentials["SecretAccessKey"],
                                 aws_session_token=credentials["SessionToken"], region_name="us-east-1")


def test_an_explicit_deny_wins_over_an_allow(harness):
    # A tenant's session may send to the queues tagged with its tenant, except the stack's DLQs,
    # even when someone tagged a DLQ with the tenant.
    sqs = harness.session.client("sqs")
    dlq = next(url for url in sqs.list_queues()["QueueUrls"] if "Dlq" in url)
    sqs.tag_queue(QueueUrl=dlq, Tags={TENANT_TAG_KEY: TENANT_A})
    other = sqs.create_queue(QueueName="a-tenants-queue", tags={TENANT_TAG_KEY: TENANT_A})["QueueUrl"]
    as_tenant = tenant_session(harness).client("sqs")
    as_tenant.send_message(QueueUrl=other, MessageBody="{}")
    refused(lambda: as_tenant.send_message(QueueUrl=dlq, MessageBody="{}"), "AccessDenied", 403)


# What the signing store encrypts under (store/signing.py): the API's kms:Encrypt needs the purpose.
SIGNING = {"tenantId": "tenant-a", "purpose": SIGNING_PURPOSE}


def test_kms_is_checked_on_the_key_a_ciphertext_names(harness):
    kms = harness.session.client("kms")
    key = harness.envs["api"][Env.SIGNING_KEY_ID]
    with acting_as("api"):
        blob = kms.encrypt(KeyId=key, Plaintext=b"s", EncryptionContext=SIGNING)["CiphertextBlob"]
        # The API may Encrypt only under the signing purpose (kms:EncryptionContext:purpose).
        refused(lambda: kms.encrypt(KeyId=key, Plaintext=b"s"), "AccessDeniedException")
    with acting_as("tick"):
        kms.decrypt(CiphertextBlob=blob, EncryptionContext=SIGNING)  # Decrypt is granted to every function
        refused(lambda: kms.encrypt(KeyId=key, Plaintext=b"s", EncryptionContext=SIGNING),
                "AccessDeniedException")  # Encrypt: API only


def test_an_unsupported_condition_operator_fails_loudly():
    template = {"Resources": {"Fn": {"Type": "AWS::Lambda::Function", "Properties": {
        "Handler": "jobsched.handlers.api.handler", "Role": {"Fn::GetAtt": ["Role", "Arn"]}}},
        "Role": {"Type": "AWS::IAM::Role", "Properties": {}},
        "Policy": {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": "Role"}], "PolicyDocument": {
            "Statement": [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "*",
                           "Condition": {"DateGreaterThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"}}}]}}}}}
    with pytest.raises(StrictLayerError, match="DateGreaterThan"):
        Template(template, {})


# --- sizes and batches ---------------------------------------------------------------------------

def test_an_item_over_400_kb_is_refused_as_dynamodb_sizes_it(harness):
    client = harness.session.client("dynamodb")
    table = harness.settings.jobs_table
    overhead = item_size(job_item("big"))
    client.put_item(TableName=table, Item=job_item("big", MAX_ITEM_BYTES - overhead))  # exactly 400 KB
    refused(lambda: client.put_item(TableName=table, Item=job_item("big", 401 * 1024 - overhead)),
            "ValidationException")
    # An update that would grow the item past the limit is refused and changes nothing.
    refused(lambda: client.update_item(TableName=table, Key={"tenantId": {"S": TENANT_A}, "jobId": {"S": "big"}},
                                       UpdateExpression="SET more = :m",
                                       ExpressionAttributeValues={":m": {"S": "y" * 2048}}),
            "ValidationException")
    stored = client.get_item(TableName=table, Key={"tenantId": {"S": TENANT_A}, "jobId": {"S": "big"}})["Item"]
    assert "more" not in stored and item_size(stored) == MAX_ITEM_BYTES


def test_dynamodb_sizes_follow_the_documented_formula():
    assert item_size({"name": {"S": "héllo"}}) == 4 + 6
    assert item_size({"n": {"N": "12345"}}) == 1 + 3 + 1  # 5 significant digits: 3 bytes + 1
    assert item_size({"n": {"N": "1000"}}) == 1 + 1 + 1  # trailing zeros trimmed
    assert item_size({"b": {"B": b"\x00\x01\x02"}}) == 1 + 3  # raw bytes, not base64
    assert item_size({"f": {"BOOL": True}, "z": {"NULL": True}}) == 2 + 2
    assert item_size({"l": {"L": [{"S": "ab"}, {"N": "1"}]}}) == 1 + 3 + (2 + 1) + (2 + 1)
    assert item_size({"m": {"M": {"k": {"S": "v"}}}}) == 1 + 3 + (1 + 1 + 1)


def test_oversize_messages_are_refused_by_sqs_sns_and_eventbridge(harness):
    granted = [{"Key": TENANT_TAG_KEY, "Value": TENANT_A}]
    queue = harness.sqs.create_queue(QueueName="big-target", tags={TENANT_TAG_KEY: TENANT_A})["QueueUrl"]
    topic = harness.session.client("sns").create_topic(Name="big-target", Tags=granted)["TopicArn"]
    harness.session.client("events").tag_resource(ResourceARN="arn:aws:events:us-east-1:123456789012:event-bus/default",
                                                  Tags=granted)
    sqs, sns, events = (tenant_session(harness).client(s) for s in ("sqs", "sns", "events"))
    with acting_as("worker"):
        sqs.send_message(QueueUrl=queue, MessageBody="x" * SQS_MAX_MESSAGE_BYTES)  # 1 MiB fits (2025)
        refused(lambda: sqs.send_message(QueueUrl=queue, MessageBody="x" * (SQS_MAX_MESSAGE_BYTES + 1)),
                "InvalidParameterValue")
        # Attributes count toward the limit (moto counts the body alone).
        refused(lambda: sqs.send_message(QueueUrl=queue, MessageBody="x" * (SQS_MAX_MESSAGE_BYTES - 10), MessageAttributes={
            "traceparent": {"DataType": "String", "StringValue": "00-" + "a" * 50}}), "InvalidParameterValue")
        refused(lambda: sns.publish(TopicArn=topic, Message="x" * (SNS_MAX_MESSAGE_BYTES + 1)), "InvalidParameter")
        refused(lambda: events.put_events(Entries=[{"Source": "jobsched", "DetailType": "fire",
                                                    "Detail": '"' + "x" * (256 * 1024) + '"'}]),
                "ValidationException")
        # and two entries that fit alone but not together in one request
        half = {"Source": "jobsched", "DetailType": "fire", "Detail": '"' + "x" * (140 * 1024) + '"'}
        events.put_events(Entries=[half])
        refused(lambda: events.put_events(Entries=[half, half]), "ValidationException")


def test_batches_over_their_limits_are_refused(harness):
    client, sqs = harness.session.client("dynamodb"), harness.session.client("sqs")
    table = harness.settings.jobs_table
    refused(lambda: client.batch_write_item(RequestItems={table: [
        {"PutRequest": {"Item": job_item(f"j{i}")}} for i in range(26)]}), "ValidationException")
    client.batch_write_item(RequestItems={table: [{"PutRequest": {"Item": job_item(f"j{i}")}} for i in range(25)]})
    refused(lambda: client.batch_get_item(RequestItems={table: {"Keys": [
        {"tenantId": {"S": TENANT_A}, "jobId": {"S": f"j{i}"}} for i in range(101)]}}), "ValidationException")
    refused(lambda: sqs.send_message_batch(QueueUrl=harness.lane_urls[0], Entries=[
        {"Id": str(i), "MessageBody": "{}"} for i in range(11)]), "TooManyEntriesInBatchRequest")


# --- capacity, throttling, KMS -------------------------------------------------------------------

def test_a_hot_partition_key_is_throttled_within_its_second_and_not_after(harness):
    client = harness.session.client("dynamodb")
    table = harness.settings.jobs_table
    # 10 KB items: 10 WCU each; 100 of them fill the key's 1,000 WCU of this second.
    for i in range(100):
        client.put_item(TableName=table, Item=job_item(f"hot-{i}", 10 * 1024 - 60))
    error = refused(lambda: client.put_item(TableName=table, Item=job_item("one-more")),
                    "ProvisionedThroughputExceededException")
    assert isinstance(error, client.exceptions.ProvisionedThroughputExceededException)
    client.put_item(TableName=table, Item=job_item("cold", tenant="another-tenant"))  # another key is free
    harness.clock.advance_ms(1000)
    client.put_item(TableName=table, Item=job_item("one-more"))  # the next second has its own capacity
    report = harness.strict.report()
    hottest, use = report.hottest[0]
    assert hottest == f"{table}[{TENANT_A}]" and use.peak_wcu == 1000 and use.throttled == 1
    assert f"{table}[{TENANT_A}]: peak 1000 WCU/s" in report.text()


def test_a_hot_index_partition_key_throttles_the_tables_writes_that_would_write_it(harness):
    # GSI back pressure: an index partition key has its own 1,000 WCU a second, and a write to
    # the table whose index entry would land on a key that used them is refused on the table.
    keep_old_state_index(harness)  # a table that keeps JobsByState: one tenant's entries on one key
    client = harness.session.client("dynamodb")
    table = harness.settings.jobs_table
    index_keys = harness.strict.template.tables[table][JOBS_BY_STATE_INDEX]
    shard = {"stateShard": {"S": f"{TENANT_A}#0"}}  # the sharded index's key (ignored by an index without it)
    for i in range(500):
        client.put_item(TableName=table, Item={**job_item(f"s-{i}"), **shard, "state": {"S": "ACTIVE"}})
    harness.clock.advance_ms(1000)

    def complete(i: int, attribute: str = "state"):
        client.update_item(TableName=table, Key={"tenantId": {"S": TENANT_A}, "jobId": {"S": f"s-{i}"}},
                           UpdateExpression="SET #a = :v", ExpressionAttributeNames={"#a": attribute},
                           ExpressionAttributeValues={":v": {"S": "COMPLETED"}})

    # Each completion moves the entry in the index (its sort key changes): a delete and a put
    # there, 2 WCU on the index key against 1 on the table's.
    for i in range(500):
        complete(i)
    error = refused(lambda: complete(500 - 1), "ProvisionedThroughputExceededException")
    index_key = f"{table}/{JOBS_BY_STATE_INDEX}[{TENANT_A}" + ("#0]" if index_keys[0] == "stateShard" else "]")
    assert "IndexWriteKeyRangeThroughputExceeded" in str(error) and index_key in str(error)
    complete(0, attribute="note")  # the table's key has room, and this write leaves the index alone
    harness.clock.advance_ms(1000)
    complete(499)  # the next second has its own capacity
    use = harness.strict.ledger.partitions[index_key]
    assert use.peak_wcu == 1000 and use.throttled == 1
    assert harness.strict.ledger.partitions[f"{table}[{TENANT_A}]"].peak_wcu < 1000


def test_reads_are_billed_in_4_kb_units_halved_when_eventually_consistent(harness):
    client = harness.session.client("dynamodb")
    table = harness.settings.jobs_table
    client.put_item(TableName=table, Item=job_item("big", 400 * 1024 - 100))  # 100 read units strongly
    key = {"tenantId": {"S": TENANT_A}, "jobId": {"S": "big"}}
    harness.clock.advance_ms(1000)
    for _ in range(30):
        client.get_item(TableName=table, Key=key, ConsistentRead=True)
    refused(lambda: client.get_item(TableName=table, Key=key), "ProvisionedThroughputExceededException")
    harness.clock.advance_ms(1000)
    for _ in range(60):  # eventually consistent: half
        client.get_item(TableName=table, Key=key)
    assert harness.strict.report().hottest[0][1].peak_rcu == 3000


def test_an_update_is_billed_on_the_larger_item_and_a_failed_condition_is_billed(harness):
    client = harness.session.client("dynamodb")
    table = harness.settings.jobs_table
    partition = f"{table}[{TENANT_A}]"
    client.put_item(TableName=table, Item=job_item("u", 5 * 1024))  # 6 WCU (5 KB + its names)
    ledger = harness.strict.ledger
    before = ledger.partitions[partition].write_units
    key = {"tenantId": {"S": TENANT_A}, "jobId": {"S": "u"}}
    client.update_item(TableName=table, Key=key, UpdateExpression="SET small = :v",
                       ExpressionAttributeValues={":v": {"N": "1"}})
    assert ledger.partitions[partition].write_units - before == 6  # the larger item, not the change
    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.put_item(TableName=table, Item=job_item("u"), ConditionExpression="attribute_not_exists(jobId)")
    assert ledger.partitions[partition].write_units - before == 12  # billed although it failed


def test_kms_requests_over_the_quota_are_throttled(harness):
    kms = harness.session.client("kms")
    key = harness.envs["api"][Env.SIGNING_KEY_ID]
    harness.strict.limits.kms_per_second = 5
    with acting_as("api"):
        for _ in range(5):
            kms.encrypt(KeyId=key, Plaintext=b"s", EncryptionContext=SIGNING)
        refused(lambda: kms.encrypt(KeyId=key, Plaintext=b"s", EncryptionContext=SIGNING), "ThrottlingException")
        harness.clock.advance_ms(1000)
        kms.encrypt(KeyId=key, Plaintext=b"s", EncryptionContext=SIGNING)
    assert harness.strict.report().kms_peak_per_second == 6


def test_the_layer_is_on_for_every_in_process_stack(harness):
    assert strict_aws.active() is harness.strict
    status, _ = harness.request("GET", "/v1/jobs", key=KEY_A)
    assert status == 200
