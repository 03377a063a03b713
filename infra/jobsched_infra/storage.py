"""Tables: jobs, the timer wheel, execution history, segment watermarks, API keys."""
from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as ddb
from aws_cdk import aws_kms as kms
from constructs import Construct

from jobsched.sizing import PROVISIONED_TARGET_UTILIZATION, TableSizing
from jobsched.store.executions import DEAD_LETTERS_INDEX
from jobsched.store.jobs import JOBS_BY_STATE_INDEX
from jobsched_infra.config import ConfigError

S = ddb.AttributeType.STRING
N = ddb.AttributeType.NUMBER


class Storage(Construct):
    def __init__(self, scope: Construct, construct_id: str, encryption: str = "kms",
                 tables: tuple[TableSizing, ...] = ()) -> None:
        super().__init__(scope, construct_id)
        # A sizing profile's per-table settings (jobsched/sizing.py): warm throughput or capacity.
        self._sizing = {table.table: table for table in tables}
        # The indexes below are on demand with their table: provisioned, each would need capacity of
        # its own, and an index short of it throttles its table's writes (the model never asks).
        for indexed in ("Jobs", "Executions"):
            if indexed in self._sizing and self._sizing[indexed].billing == "provisioned":
                raise ConfigError(f"the {indexed} table has a secondary index: it stays on demand")
        # One customer-managed key for the data at rest (tables, queues, alarm topic), or none.
        self.key = kms.Key(self, "Key", description="jobsched data at rest", enable_key_rotation=True,
                           rotation_period=Duration.days(365), removal_policy=RemovalPolicy.RETAIN) \
            if encryption == "kms" else None
        # Idempotency records live beside the jobs of their tenant (sort key "idem#...") and expire.
        # Ended one-time jobs expire too (expiresAt: their end plus the retention).
        self.jobs = self._table("Jobs", ("tenantId", S), ("jobId", S), ttl="expiresAt")
        # GET /v1/jobs?state=: keys only (a write that leaves `state` as it is writes nothing here;
        # a change of state writes two small entries), the jobs then read by key.
        self.jobs.add_global_secondary_index(
            index_name=JOBS_BY_STATE_INDEX,
            partition_key=ddb.Attribute(name="tenantId", type=S),
            sort_key=ddb.Attribute(name="state", type=S),
            projection_type=ddb.ProjectionType.KEYS_ONLY,
        )
        # Partition "<epoch-minute>#<segment>", sort "<due-ms>#<kind>#<ref>#<generation>": one
        # query per segment and minute returns what is due, in order. TTL expires old timers.
        self.timers = self._table("Timers", ("bucket", S), ("sk", S), ttl="expiresAt")
        self.executions = self._table("Executions", ("jobId", S), ("executionId", S), ttl="expiresAt")
        # Sparse: only DEAD executions carry deadLetterTenant, so GET /v1/dead-letters reads only them.
        self.executions.add_global_secondary_index(
            index_name=DEAD_LETTERS_INDEX,
            partition_key=ddb.Attribute(name="deadLetterTenant", type=S),
            sort_key=ddb.Attribute(name="deadAtMs", type=N),
            projection_type=ddb.ProjectionType.ALL,
        )
        self.segments = self._table("Segments", ("segment", N))
        self.api_keys = self._table("ApiKeys", ("keyHash", S))

    def _table(self, name: str, pk, sk=None, ttl: str | None = None) -> ddb.Table:
        sizing = self._sizing.get(name)
        provisioned = sizing is not None and sizing.billing == "provisioned"
        # On demand, a new table takes 12,000 read and 4,000 write units a second at once; a profile
        # whose peak is above that warms the table to it from its first second.
        warm = ddb.WarmThroughput(read_units_per_second=sizing.warm_read or None,
                                  write_units_per_second=sizing.warm_write or None) \
            if sizing is not None and not provisioned and (sizing.warm_read or sizing.warm_write) else None
        table = ddb.Table(
            self,
            name,
            partition_key=ddb.Attribute(name=pk[0], type=pk[1]),
            sort_key=ddb.Attribute(name=sk[0], type=sk[1]) if sk else None,
            billing_mode=ddb.BillingMode.PROVISIONED if provisioned else ddb.BillingMode.PAY_PER_REQUEST,
            read_capacity=sizing.read_min if provisioned else None,
            write_capacity=sizing.write_min if provisioned else None,
            warm_throughput=warm,
            point_in_time_recovery_specification=ddb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=ddb.TableEncryption.CUSTOMER_MANAGED if self.key else ddb.TableEncryption.DEFAULT,
            encryption_key=self.key,
            time_to_live_attribute=ttl,
            removal_policy=RemovalPolicy.RETAIN,
        )
        if provisioned:
            # The model holds the peak at the minimum (auto scaling follows minutes, the tick's
            # burst lasts seconds); scaling above it covers growth. The model provisions only
            # tables without a secondary index (an index would need capacity of its own).
            for scalable in (table.auto_scale_read_capacity(min_capacity=sizing.read_min, max_capacity=sizing.read_max),
                             table.auto_scale_write_capacity(min_capacity=sizing.write_min,
                                                             max_capacity=sizing.write_max)):
                scalable.scale_on_utilization(target_utilization_percent=PROVISIONED_TARGET_UTILIZATION)
        return table
