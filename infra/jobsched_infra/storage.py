"""Tables: jobs, the timer wheel, execution history, segment watermarks, API keys."""
from __future__ import annotations

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as ddb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from jobsched.sizing import PROVISIONED_TARGET_UTILIZATION, TableSizing
from jobsched.store.dead_letters import DEAD_LETTERS_INDEX
from jobsched.store.job_lists import JOBS_BY_STATE_INDEX
from jobsched.store.jobs_state_index import JOBS_BY_STATE_SHARD_INDEX, STATE_SHARD_ATTRIBUTE
from jobsched_infra.config import ConfigError
from jobsched_infra.regions import OWNERSHIP_TABLE, RegionPlan, table_name

S = ddb.AttributeType.STRING
N = ddb.AttributeType.NUMBER


class Storage(Construct):
    def __init__(self, scope: Construct, construct_id: str, encryption: str = "kms",
                 tables: tuple[TableSizing, ...] = (), plan: RegionPlan | None = None,
                 primary_key_arn: str | None = None, state_index: str = JOBS_BY_STATE_SHARD_INDEX) -> None:
        super().__init__(scope, construct_id)
        # Regions (regions.py): the data tables are global tables (MREC) defined in one stack and
        # referenced by name in the others; the ownership table is MRSC. None: one region, as before.
        self._plan = plan
        self._region = Stack.of(self).region
        self.ownership = None
        # A sizing profile's per-table settings (jobsched/sizing.py): warm throughput or capacity.
        self._sizing = {table.table: table for table in tables}
        # The indexes below are on demand with their table: provisioned, each would need capacity of
        # its own, and an index short of it throttles its table's writes (the model never asks).
        for indexed in ("Jobs", "Executions"):
            if indexed in self._sizing and self._sizing[indexed].billing == "provisioned":
                raise ConfigError(f"the {indexed} table has a secondary index: it stays on demand")
        # One customer-managed key for the data at rest (tables, queues, the alarm and alert topics),
        # or none.
        if plan is None:
            self.key = kms.Key(self, "Key", description="jobsched data at rest", enable_key_rotation=True,
                               rotation_period=Duration.days(365), removal_policy=RemovalPolicy.RETAIN) \
                if encryption == "kms" else None
        else:
            self.key = self._multi_region_key(plan, primary_key_arn) if encryption == "kms" else None
        if isinstance(self.key, kms.Key):
            self.key.add_to_resource_policy(self._cloudwatch_alarms_statement())
        # Idempotency records live beside the jobs of their tenant (sort key "idem#...") and expire.
        # Ended one-time jobs expire too (expiresAt: their end plus the retention).
        self.jobs = self._table("Jobs", ("tenantId", S), ("jobId", S), ttl="expiresAt")
        # GET /v1/jobs?state=: keys only (a write that leaves `state` as it is writes nothing here;
        # a change of state writes two small entries), the jobs then read by key. The old index
        # (partition tenantId, sort state) only where a deployment keeps it (config.state_index:
        # `-c stateIndex=JobsByState`, the step from a release before JobsByStateShard).
        if state_index == JOBS_BY_STATE_INDEX:
            self._index(
                self.jobs, index_name=JOBS_BY_STATE_INDEX,
                partition_key=ddb.Attribute(name="tenantId", type=S),
                sort_key=ddb.Attribute(name="state", type=S),
                projection_type=ddb.ProjectionType.KEYS_ONLY,
            )
        # One tenant's entries over 32 keys per state (store/jobs_state_index.py: partition
        # "<tenant>#<state>#<n>", sort jobId, keys only). CloudFormation adds or deletes one index
        # of a table per update (both in one update fails), and DynamoDB backfills an added index
        # before it is ACTIVE: a table with JobsByState alone gets this one first (with
        # `-c stateIndex=JobsByState`), then loses JobsByState (the default).
        self._index(
            self.jobs, index_name=JOBS_BY_STATE_SHARD_INDEX,
            partition_key=ddb.Attribute(name=STATE_SHARD_ATTRIBUTE, type=S),
            sort_key=ddb.Attribute(name="jobId", type=S),
            projection_type=ddb.ProjectionType.KEYS_ONLY,
        )
        # Partition "<epoch-minute>#<segment>", sort "<due-ms>#<kind>#<ref>#<generation>": one
        # query per segment and minute returns what is due, in order. TTL expires old timers.
        self.timers = self._table("Timers", ("bucket", S), ("sk", S), ttl="expiresAt")
        self.executions = self._table("Executions", ("jobId", S), ("executionId", S), ttl="expiresAt")
        # Sparse: only DEAD executions carry deadLetterTenant, so GET /v1/dead-letters reads only them.
        self._index(
            self.executions, index_name=DEAD_LETTERS_INDEX,
            partition_key=ddb.Attribute(name="deadLetterTenant", type=S),
            sort_key=ddb.Attribute(name="deadAtMs", type=N),
            projection_type=ddb.ProjectionType.ALL,
        )
        self.segments = self._table("Segments", ("segment", N))
        self.api_keys = self._table("ApiKeys", ("keyHash", S))
        if plan is not None:
            self._finish_global_tables(plan)
            # Every replica the functions may call (failover), by ARN: no wildcard region.
            self.ownership_arns = [Stack.of(self).format_arn(
                service="dynamodb", region=region, resource="table", resource_name=table_name(OWNERSHIP_TABLE))
                for region in plan.ownership_endpoints(self._region)]
            if self._region == plan.ownership_home:
                self.ownership = self._ownership_table(plan)

    def _table(self, name: str, pk, sk=None, ttl: str | None = None):
        if self._plan is not None:
            return self._global_table(name, pk, sk, ttl)
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

    def _index(self, table, **index) -> None:
        if self._plan is None:
            table.add_global_secondary_index(**index)
        else:
            # A global table's indexes are made with it, in every replica (_finish_global_tables).
            table.indexes.append(index)

    # --- regions -----------------------------------------------------------------------------------

    def _multi_region_key(self, plan: RegionPlan, primary_key_arn: str | None) -> kms.IKey:
        """One key, the same key material in every region: a multi-Region primary key in the first
        region, a replica in each other (AWS::KMS::ReplicaKey). A replica has the primary's key id,
        so what one region encrypts (a tenant's signing secret, store/signing.py) another decrypts:
        https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-kms-replicakey.html"""
        if self._region == plan.primary:
            key = kms.Key(self, "Key", description="jobsched data at rest (multi-Region primary)",
                          enable_key_rotation=True, rotation_period=Duration.days(365),
                          removal_policy=RemovalPolicy.RETAIN)
            # The L2 key has no multiRegion property: the escape hatch on AWS::KMS::Key. Rotation
            # is set on the primary and applies to its replicas (they share the key material).
            key.node.default_child.add_property_override("MultiRegion", True)
            self.key_id = key.key_id
            return key
        if primary_key_arn is None:
            raise ConfigError("a replica region's stack needs the multi-Region primary key's ARN")
        # A replica's key policy is its own (not copied from the primary): the same default policy,
        # the account administers it and IAM policies grant its use (as for the primary).
        policy = iam.PolicyDocument(statements=[iam.PolicyStatement(
            actions=["kms:*"], principals=[iam.AccountRootPrincipal()], resources=["*"]),
            self._cloudwatch_alarms_statement()])
        replica = kms.CfnReplicaKey(self, "Key", primary_key_arn=primary_key_arn, key_policy=policy,
                                    description=f"jobsched data at rest (replica in {self._region})")
        replica.apply_removal_policy(RemovalPolicy.RETAIN)
        self.key_id = replica.ref  # the key id: the primary's own (mrk-...)
        return kms.Key.from_key_arn(self, "KeyReplica", replica.attr_arn)

    @staticmethod
    def _cloudwatch_alarms_statement() -> iam.PolicyStatement:
        """The alarm topic is encrypted with this key: CloudWatch publishes an alarm's notification with
        its own service principal, which needs data keys from the key (an IAM role cannot grant a
        service principal; without this statement every alarm action fails, "CloudWatch Alarms does
        not have authorization to access the SNS topic encryption key"). Only for this account's
        alarms in this region (confused deputy):
        https://repost.aws/knowledge-center/cloudwatch-configure-alarm-sns"""
        return iam.PolicyStatement(
            sid="AllowCloudWatchAlarmsToPublishToEncryptedTopics",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"],
            conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                        "ArnLike": {"aws:SourceArn": f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:{Aws.ACCOUNT_ID}:alarm:*"}})

    def table_arn(self, name: str) -> str:
        """A data table's ARN in this region (its replica here), by its name."""
        return Stack.of(self).format_arn(service="dynamodb", resource="table", resource_name=table_name(name))

    def key_arn_in(self, region: str) -> str:
        """The multi-Region key's ARN in another region: the same key id there."""
        return Stack.of(self).format_arn(service="kms", region=region, resource="key", resource_name=self.key_id)

    def _global_table(self, name: str, pk, sk, ttl: str | None):
        """Where the plan puts the data tables: their definition (TableV2, AWS::DynamoDB::GlobalTable,
        with a replica in every region), made when the indexes are known; elsewhere a reference by
        name (the replica in this region: same name, same indexes)."""
        pending = _Pending(name, pk, sk, ttl)
        self._pending = [*getattr(self, "_pending", []), pending]
        return pending

    def _finish_global_tables(self, plan: RegionPlan) -> None:
        home = self._region == plan.data_home
        for p in self._pending:
            if home:
                table = self._define_global_table(plan, p.name, p.pk, p.sk, p.ttl, p.indexes)
            else:
                table = ddb.TableV2.from_table_attributes(
                    self, p.name, table_name=table_name(p.name), encryption_key=self.key,
                    global_indexes=[i["index_name"] for i in p.indexes] or None)
            setattr(self, _ATTRIBUTE[p.name], table)

    def _define_global_table(self, plan: RegionPlan, name: str, pk, sk, ttl, indexes) -> ddb.TableV2:
        sizing = self._sizing.get(name)
        provisioned = sizing is not None and sizing.billing == "provisioned"
        if provisioned:
            # A global table's provisioned writes must be auto scaled (AWS::DynamoDB::GlobalTable:
            # WriteProvisionedThroughputSettings takes only WriteCapacityAutoScalingSettings); each
            # replica gets the same capacity and scales on its own.
            billing = ddb.Billing.provisioned(
                read_capacity=ddb.Capacity.autoscaled(min_capacity=sizing.read_min, max_capacity=sizing.read_max,
                                                      target_utilization_percent=PROVISIONED_TARGET_UTILIZATION),
                write_capacity=ddb.Capacity.autoscaled(min_capacity=sizing.write_min, max_capacity=sizing.write_max,
                                                       target_utilization_percent=PROVISIONED_TARGET_UTILIZATION))
        else:
            billing = ddb.Billing.on_demand()
        warm = ddb.WarmThroughput(read_units_per_second=sizing.warm_read or None,
                                  write_units_per_second=sizing.warm_write or None) \
            if sizing is not None and not provisioned and (sizing.warm_read or sizing.warm_write) else None
        others = [r for r in plan.regions if r != self._region]
        if self.key is not None:
            # Customer-managed: each replica is encrypted with the multi-Region key's replica in its
            # own region (a table key must be in the replica's region); all share one key id.
            encryption = ddb.TableEncryptionV2.customer_managed_key(
                self.key, replica_key_arns={r: self.key_arn_in(r) for r in others})
        else:
            encryption = ddb.TableEncryptionV2.dynamo_owned_key()
        return ddb.TableV2(
            self, name,
            table_name=table_name(name),
            partition_key=ddb.Attribute(name=pk[0], type=pk[1]),
            sort_key=ddb.Attribute(name=sk[0], type=sk[1]) if sk else None,
            billing=billing,
            warm_throughput=warm,
            # TableV2 applies these to every replica (a replica may override them; none does).
            point_in_time_recovery_specification=ddb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            encryption=encryption,
            # TTL deletes in one region replicate as ordinary deletes (billed in the other replicas).
            time_to_live_attribute=ttl,
            removal_policy=RemovalPolicy.RETAIN,
            global_secondary_indexes=[ddb.GlobalSecondaryIndexPropsV2(**i) for i in indexes] or None,
            replicas=[ddb.ReplicaTableProps(region=r) for r in others],
        )

    def _ownership_table(self, plan: RegionPlan) -> ddb.TableV2:
        """Segment leases: one item per global segment, keyed by `segment` (Number). Multi-Region
        strong consistency (MRSC): a write is acknowledged once a quorum of the three regions has it,
        and a strongly consistent read sees the latest write in any replica, so two regions never
        both hold a lease. AWS: three regions of one Region set; no TTL (the leases must never rely
        on expiry by TTL: they carry their own expiry), no transactions, no LSIs
        (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/V2globaltables_HowItWorks.html).
        Encryption: the DynamoDB-owned key. The items are segment numbers, regions, epochs and
        expiry times, no tenant data; and a customer-managed key would tie this table, defined in
        one region's stack, to the replica keys of the others (the ordering of regions.py)."""
        return ddb.TableV2(
            self, OWNERSHIP_TABLE,
            table_name=table_name(OWNERSHIP_TABLE),
            partition_key=ddb.Attribute(name="segment", type=N),
            billing=ddb.Billing.on_demand(),
            point_in_time_recovery_specification=ddb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            encryption=ddb.TableEncryptionV2.dynamo_owned_key(),
            multi_region_consistency=ddb.MultiRegionConsistency.STRONG,
            witness_region=plan.witness or None,
            replicas=[ddb.ReplicaTableProps(region=r) for r in plan.ownership_replicas if r != self._region],
            removal_policy=RemovalPolicy.RETAIN,
        )


_ATTRIBUTE = {"Jobs": "jobs", "Timers": "timers", "Executions": "executions", "Segments": "segments",
              "ApiKeys": "api_keys"}


class _Pending:
    """A data table of a multi-region stack until the indexes are known (replaced at the end of
    Storage's constructor; nothing reads it before)."""

    def __init__(self, name: str, pk, sk, ttl: str | None) -> None:
        self.name, self.pk, self.sk, self.ttl = name, pk, sk, ttl
        self.indexes: list[dict] = []
