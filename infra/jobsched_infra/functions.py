"""One factory for Lambda defaults: runtime, architecture, dependency layer, logs, tracing."""
from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from jobsched_infra.config import ROOT, ConfigError

RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64
# The local stack and the CLI run on people's machines, never in Lambda.
CODE_EXCLUDES = ["**/__pycache__", "**/*.pyc", "jobsched/local", "jobsched/local/**", "jobsched/cli", "jobsched/cli/**"]


class FunctionFactory(Construct):
    def __init__(self, scope: Construct, construct_id: str, layer_dir: Path, common_env: dict[str, str],
                 tracing: bool = False) -> None:
        super().__init__(scope, construct_id)
        self._tracing = lambda_.Tracing.ACTIVE if tracing else lambda_.Tracing.DISABLED  # `-c tracing`
        if not (layer_dir / "python").is_dir():
            raise ConfigError(
                f"the dependency layer is not built at {layer_dir}; run `make layer` (or `make synth`)"
            )
        self._env = common_env
        self._code = lambda_.Code.from_asset(str(ROOT / "functions"), exclude=CODE_EXCLUDES)
        self.layer = lambda_.LayerVersion(
            self,
            "Dependencies",
            # Bytecode compiled here would be for this machine's Python, not the runtime's: it is
            # left out (the Makefile also builds the layer with --no-compile).
            code=lambda_.Code.from_asset(str(layer_dir), exclude=["**/__pycache__", "**/*.pyc", ".built-*"]),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="boto3 and botocore (pinned), Powertools, pydantic, tzdata (layers/requirements.txt)",
        )

    def create(self, name: str, handler: str, env: dict[str, str], timeout: Duration, memory_mb: int,
               **kwargs) -> lambda_.Function:
        log_group = logs.LogGroup(self, f"{name}Logs", retention=logs.RetentionDays.ONE_MONTH)
        # One role per function, writing only to its own log group (instead of the managed
        # AWSLambdaBasicExecutionRole, which allows every log group of the account).
        role = iam.Role(self, f"{name}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description=f"jobsched {name} function")
        role.add_to_policy(iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                                               resources=[log_group.log_group_arn]))
        return lambda_.Function(
            self,
            name,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=handler,
            code=self._code,
            layers=[self.layer],
            timeout=timeout,
            memory_size=memory_mb,
            environment={**self._env, **env},
            tracing=self._tracing,
            log_group=log_group,
            role=role,
            **kwargs,
        )
