"""The strict AWS layer: the emulator says no where AWS says no.

moto enforces no IAM, no item size, no per-partition throughput and no KMS quota. This layer
sits on every botocore client of the process (a hook on client creation registers two event
handlers on each client) and, while a layer is active:
- checks each call a function makes against the IAM policies the synthesized template gives that
  function's role (action, resource ARN, the condition operators the template uses; an explicit
  Deny wins) and answers AccessDenied;
- refuses what AWS refuses: DynamoDB items over 400 KB (sized as DynamoDB sizes them), key and
  expression sizes, batch and transaction limits, SQS, SNS and EventBridge messages over theirs;
- bills every DynamoDB read and write in capacity units per partition key (table and index),
  throttles a key past 1,000 WCU or 3,000 RCU within one second of the emulator's clock (no
  burst, no adaptive capacity), and counts KMS requests per second against a quota;
- reports the hottest partition keys and the KMS peak (`report()`).

Which function makes a call is a context variable set around each handler invocation
(`acting_as`, set by local/events.Function); calls made with none set (test setup, the stack
creating its resources) are not checked against IAM, but are sized and billed like any other.
Limits and billing rules: /work/shared/AWS-LIMITS.md, docs/architecture.md ("The strict AWS layer").
"""
# The layer's parts, one module per concern; what callers use is named here, as before the split.
# ruff: noqa: F401
from jobsched.local.strict_aws.base import (_access_key, _Call, _error, _internal, _raw_bytes, ACCESS_DENIED,
    ACCOUNT, acting_as, BATCH_GET_MAX_KEYS, BATCH_WRITE_MAX_ITEMS, current_function, EVENTS_MAX_ENTRIES,
    EVENTS_MAX_ENTRY_BYTES, FARGATE_LAUNCHES, KB, KMS_REQUESTS_PER_SECOND, MAX_EXPRESSION_BYTES,
    MAX_ITEM_BYTES, MAX_PARTITION_KEY_BYTES, MAX_PLACEHOLDER_BYTES, MAX_SORT_KEY_BYTES,
    MAX_SUBSTITUTION_BYTES, PARTITION_RCU_PER_SECOND, PARTITION_WCU_PER_SECOND, REGION, RUN_TASK_CALLS,
    SNS_MAX_BATCH_BYTES, SNS_MAX_BATCH_ENTRIES, SNS_MAX_MESSAGE_BYTES, SQS_IN_FLIGHT_PER_QUEUE,
    SQS_MAX_BATCH_BYTES, SQS_MAX_BATCH_ENTRIES, SQS_MAX_MESSAGE_BYTES, StrictLayerError,
    TRANSACTION_MAX_BYTES, TRANSACTION_MAX_ITEMS)
from jobsched.local.strict_aws.iam import (_arn_like, _as_list, _glob, _key_names, _NEGATED, _parsed,
    _POLICY_VARIABLE, _split_operator, _statement, _STRING_OPERATORS, _substitute, _TablesOnly,
    _trust_statement, condition_holds, Statement, Template)
from jobsched.local.strict_aws.capacity import Ledger, Limits, PartitionUse, Report
from jobsched.local.strict_aws.dynamodb import item_size, number_size, read_units, value_size, write_units
from jobsched.local.strict_aws.dynamodb_billing import _ref
from jobsched.local.strict_aws.reports import (_peek_locked, _peek_moto, items_report, REPORT_FIELD,
    REPORT_HEADER, report_keys)
from jobsched.local.strict_aws.sqs import (_attributes_size, _queue_arn, _QUEUE_FALLBACKS, _sns_size,
    _sqs_size, InFlight)
from jobsched.local.strict_aws.kms import _moto_ciphertext_key, KMS_CRYPTO_OPERATIONS
from jobsched.local.strict_aws.ecs import _cluster_name, _task_definition_arn
from jobsched.local.strict_aws.sts import _SESSION_TAG_KEY, _SESSION_TAG_VALUE, RoleSession
from jobsched.local.strict_aws.authorize import IAM_ACTION_OF, TRANSACTION_ACTIONS
from jobsched.local.strict_aws.layer import StrictAws
from jobsched.local.strict_aws.install import (_after, _ask_report, _before, _empty_receive,
    _lift_moto_item_limit, activate, active, install)
