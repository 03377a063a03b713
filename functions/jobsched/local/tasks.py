"""Container tasks locally: the emulator's ECS records RunTask's task (moto accepts and keeps it);
this runner runs the task's command as a local process (there is no Docker here) in a fresh
working directory with the task's environment, and when the process ends, or the scheduler stops
the task (StopTask: its timeout or its cancel), delivers the same "ECS Task State Change" event
ECS would, STOPPED, to the same task_events function. Adapters only: no rule of the scheduler
lives here (the deadline is the scheduler's own, enforced through StopTask as in AWS).

A task is a tenant's code: it must get nothing of the stack's. When the stack runs as root, each
task's process runs as a user of its own (a uid no other process has, without supplementary
groups), with only its task's environment (no credentials of the stack's), in a scratch directory
of its own (0700, removed when the task ends, as a container's filesystem is); its output goes to
a log the stack opened in its own work directory (0700), so the task reads neither the stack's
state, its keys, its credentials nor another task's files, and cannot signal another tenant's
task. When the stack does not run as root, the task runs as the stack's user
(docs/reliability.md says what then holds)."""
from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from jobsched.local.events import ACCOUNT, REGION

LOCAL_CLUSTER = "local"
# The exit code ECS reports for a container stopped with SIGKILL after StopTask's SIGTERM grace.
STOPPED_EXIT_CODE = 137
STOP_GRACE_SECONDS = 5  # ECS waits 30 s by default (stopTimeout); a local process gets less


# The uids of tasks' processes when the stack runs as root: one per task, none a user of the
# machine's (a user namespace maps 0-4294967294 here; the range is far from system and login ids).
TASK_UID_BASE = 1_900_000_000
TASK_UID_RANGE = 1_000_000
# What a task's process finds on PATH when it runs as its own user (a container image's default):
# the stack's PATH may name directories only the stack's user can enter.
TASK_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

LOCAL_VPC_CIDR = "10.42.0.0/16"
LOCAL_SUBNET_CIDR = "10.42.1.0/24"
LOCAL_TASK_ROLE = f"arn:aws:iam::{ACCOUNT}:role/local-task-runner"  # within the local grant (local/synth.py)


# The local network's ids: the same at every start of every stack (a job keeps the ids the stack
# printed: new ones at a restart ended its every run DEAD, InvalidSubnetID.NotFound).
LOCAL_VPC_ID = "vpc-0000000000000a001"
LOCAL_SUBNET_ID = "subnet-0000000000000a001"
LOCAL_SECURITY_GROUP_ID = "sg-0000000000000a001"
LOCAL_SECURITY_GROUP_NAME = "jobsched-local-tasks"


def create_local_network(account: str = ACCOUNT, region: str = REGION) -> None:
    """In the emulator's process, at its start (the emulator keeps no EC2 state across restarts):
    the VPC, subnet and security group of container jobs, made in moto's EC2 with LOCAL_*_ID, the
    ids moto would have drawn at random replaced for these three creations only."""
    from moto.ec2.models import ec2_backends, security_groups, subnets, vpcs

    from jobsched.local.emulator import EMULATOR_LOCK

    backend = ec2_backends[account][region]
    with EMULATOR_LOCK:
        if LOCAL_VPC_ID in backend.vpcs:
            return
        with _fixed_id(vpcs, "random_vpc_id", LOCAL_VPC_ID):
            backend.create_vpc(cidr_block=LOCAL_VPC_CIDR)
        with _fixed_id(subnets, "random_subnet_id", LOCAL_SUBNET_ID):
            backend.create_subnet(vpc_id=LOCAL_VPC_ID, cidr_block=LOCAL_SUBNET_CIDR)
        with _fixed_id(security_groups, "random_security_group_id", LOCAL_SECURITY_GROUP_ID):
            backend.create_security_group(name=LOCAL_SECURITY_GROUP_NAME, description="container jobs",
                                          vpc_id=LOCAL_VPC_ID)


@contextlib.contextmanager
def _fixed_id(module, name: str, value: str):
    drawn = getattr(module, name)
    setattr(module, name, lambda: value)
    try:
        yield
    finally:
        setattr(module, name, drawn)


def prepare_local_cluster(session) -> dict:
    """What an operator has in an account for container jobs: the cluster "local", a VPC whose
    subnet and security group the tasks' network interfaces use (made by the emulator's process
    with the same ids at every start: create_local_network)."""
    ecs, ec2 = session.client("ecs"), session.client("ec2")
    ecs.create_cluster(clusterName=LOCAL_CLUSTER)
    ec2.modify_vpc_attribute(VpcId=LOCAL_VPC_ID, EnableDnsHostnames={"Value": True})
    subnet = ec2.describe_subnets(SubnetIds=[LOCAL_SUBNET_ID])["Subnets"][0]["SubnetId"]
    group = ec2.describe_security_groups(GroupIds=[LOCAL_SECURITY_GROUP_ID])["SecurityGroups"][0]["GroupId"]
    return {"cluster": LOCAL_CLUSTER, "subnet": subnet, "securityGroup": group}


def register_tenant_definitions(ecs, tenants: list[str]) -> dict[str, str]:
    """One task definition per tenant, "local-<tenant>", tagged jobsched:tenant = the tenant (IAM
    lets only that tenant's session run it), with one container "main" whose command a job gives."""
    from jobsched.domain.tenant_tags import TENANT_TAG_KEY

    made = {}
    for tenant in tenants:
        family = "local-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in tenant)[:200]
        made[tenant] = ecs.register_task_definition(
            family=family, requiresCompatibilities=["FARGATE"], networkMode="awsvpc", cpu="256", memory="512",
            taskRoleArn=LOCAL_TASK_ROLE,
            containerDefinitions=[{"name": "main", "image": "local-process", "essential": True, "cpu": 256,
                                   "memory": 512, "command": ["sh", "-c", "echo no command given"]}],
            tags=[{"key": TENANT_TAG_KEY, "value": tenant}])["taskDefinition"]["taskDefinitionArn"]
    return made


def hold_tasks_running() -> Callable[[], None]:
    """moto moves a task one state toward STOPPED at each DescribeTasks; ECS stops a task only when
    its essential container exits or StopTask is called. In the emulator's process, tasks are kept
    RUNNING until then; returns what undoes it."""
    from moto.moto_api import state_manager

    state_manager.set_transition(model_name="ecs::task", transition={"progression": "manual", "times": 10 ** 12})
    return lambda: state_manager.unset_transition(model_name="ecs::task")


def stopped_event(task: dict, exit_code: int | None, stopped_reason: str, stop_code: str,
                  now_ms: int) -> dict:
    """The EventBridge event of a task that stopped, as ECS sends it (source aws.ecs, detail-type
    "ECS Task State Change", the task's fields in detail; no tags). `task` is a DescribeTasks entry."""
    instant = datetime.fromtimestamp(now_ms / 1000, timezone.utc).isoformat().replace("+00:00", "Z")
    containers = [{"name": c.get("name"), "containerArn": c.get("containerArn"), "lastStatus": "STOPPED",
                   "taskArn": task["taskArn"], **({"exitCode": exit_code} if exit_code is not None else {})}
                  for c in task.get("containers") or [{"name": _container_of(task)}]]
    return {"version": "0", "id": task["taskArn"].rsplit("/", 1)[-1], "detail-type": "ECS Task State Change",
            "source": "aws.ecs", "account": ACCOUNT, "time": instant, "region": REGION,
            "resources": [task["taskArn"]],
            "detail": {"clusterArn": task.get("clusterArn"), "taskArn": task["taskArn"],
                       "taskDefinitionArn": task.get("taskDefinitionArn"), "group": task.get("group"),
                       "startedBy": task.get("startedBy"), "launchType": task.get("launchType"),
                       "lastStatus": "STOPPED", "desiredStatus": "STOPPED", "overrides": task.get("overrides") or {},
                       "containers": containers, "stoppedReason": stopped_reason, "stopCode": stop_code,
                       "stoppedAt": instant, "version": 3}}


def _container_of(task: dict) -> str | None:
    overrides = (task.get("overrides") or {}).get("containerOverrides") or []
    return overrides[0].get("name") if overrides else None


@dataclass
class _Run:
    process: subprocess.Popen
    workdir: Path  # the task's scratch directory (its cwd and HOME), removed when it ends
    task: dict
    stop_reason: str | None = None
    uid: int | None = None  # the task's own user (None: the stack's, when it does not run as root)


@dataclass
class LocalTaskRunner:
    """Polls the emulator's ECS for RUNNING tasks of the local cluster, runs each once, reports
    each end. `deliver` is the task_events function's invoke; `ecs` an ECS client of the emulator."""

    ecs: object
    deliver: Callable[[dict], object]
    now_ms: Callable[[], int]
    root: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / "jobsched-tasks")
    cluster: str = LOCAL_CLUSTER
    runs: dict[str, _Run] = field(default_factory=dict)
    _seen: set = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Tasks' scratch directories: outside the stack's work directory (which no task may enter),
    # 0711 (a task enters its own, lists none).
    _scratch: Path | None = None
    _next_uid: int = field(default_factory=lambda: secrets.randbelow(TASK_UID_RANGE))

    def log_path(self, task_id: str) -> Path:
        return self.root / task_id / "output.log"

    def _isolated(self) -> bool:
        return os.geteuid() == 0

    def _task_uid(self) -> int:
        """A uid no running task has: each task is a user of its own."""
        taken = {run.uid for run in self.runs.values()}
        while True:
            uid = TASK_UID_BASE + self._next_uid % TASK_UID_RANGE
            self._next_uid += 1
            if uid not in taken:
                return uid

    def _scratch_root(self) -> Path:
        if self._scratch is None or not self._scratch.is_dir():
            self._scratch = Path(tempfile.mkdtemp(prefix="jobsched-tasks-"))
            self._scratch.chmod(0o711 if self._isolated() else 0o700)
        return self._scratch

    def poll(self) -> None:
        """One look: start what RunTask started, stop what StopTask stopped, report what ended."""
        with self._lock:
            self._start_new()
            self._stop_stopped()
            self._report_ended()

    def _start_new(self) -> None:
        try:
            arns = self.ecs.list_tasks(cluster=self.cluster, desiredStatus="RUNNING").get("taskArns") or []
        except Exception:  # noqa: BLE001 - the cluster may not exist yet: nothing to run
            return
        fresh = [a for a in arns if a not in self._seen]
        if not fresh:
            return
        for task in self.ecs.describe_tasks(cluster=self.cluster, tasks=fresh).get("tasks") or []:
            self._seen.add(task["taskArn"])
            self.runs[task["taskArn"]] = self._run(task)

    def _run(self, task: dict) -> _Run:
        definition = self.ecs.describe_task_definition(taskDefinition=task["taskDefinitionArn"])["taskDefinition"]
        container = _container_of(task)
        spec = next((c for c in definition.get("containerDefinitions") or [] if c.get("name") == container),
                    (definition.get("containerDefinitions") or [{}])[0])
        override = next((o for o in (task.get("overrides") or {}).get("containerOverrides") or []
                         if o.get("name") == container), {})
        command = override.get("command") or spec.get("command") or []
        env = {e["name"]: e["value"] for e in spec.get("environment") or []}
        env.update({e["name"]: e["value"] for e in override.get("environment") or []})
        task_id = task["taskArn"].rsplit("/", 1)[-1]
        uid = self._task_uid() if self._isolated() else None
        log_dir = self.log_path(task_id).parent
        shutil.rmtree(log_dir, ignore_errors=True)
        log_dir.mkdir(parents=True, mode=0o700)
        workdir = self._scratch_root() / task_id
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(mode=0o700)
        as_user: dict = {}
        if uid is not None:
            os.chown(workdir, uid, uid)
            # Its own user and group, no supplementary groups (root's are not kept), files its own.
            as_user = {"user": uid, "group": uid, "extra_groups": [], "umask": 0o077}
        # Only the task's own environment (and a PATH to find its interpreter), as a container has:
        # none of the stack's (its AWS credentials are in its environment).
        path = TASK_PATH if uid is not None else os.environ.get("PATH", TASK_PATH)
        process_env = {"PATH": path, "HOME": str(workdir), **env}
        # The log is the stack's (opened here, 0600); the task writes it through the descriptor.
        log = open(os.open(self.log_path(task_id), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")  # noqa: SIM115
        try:
            process = subprocess.Popen(command, cwd=workdir, env=process_env, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True, **as_user)
        except (OSError, subprocess.SubprocessError) as exc:  # cannot start: as a container that fails to start
            log.write(f"cannot start {command!r}: {exc}\n".encode())
            log.close()
            # An exit in its place, reported as the failed start (a fixed command: as any user).
            process = subprocess.Popen(["false"], cwd="/", env={"PATH": TASK_PATH})
            return _Run(process, workdir, task, stop_reason=f"CannotStartContainerError: {exc}", uid=uid)
        log.close()
        return _Run(process, workdir, task, uid=uid)

    def _stop_stopped(self) -> None:
        running = [arn for arn, run in self.runs.items() if run.process.poll() is None]
        if not running:
            return
        for task in self.ecs.describe_tasks(cluster=self.cluster, tasks=running).get("tasks") or []:
            if task.get("desiredStatus") == "STOPPED":  # StopTask: SIGTERM, then SIGKILL after a grace
                run = self.runs[task["taskArn"]]
                run.stop_reason = task.get("stoppedReason") or "Task stopped by user"
                _terminate(run.process)

    def _report_ended(self) -> None:
        for arn, run in list(self.runs.items()):
            code = run.process.poll()
            if code is None:
                continue
            del self.runs[arn]
            _end(run)
            if run.stop_reason and run.stop_reason.startswith("CannotStartContainerError"):
                event = stopped_event(run.task, None, run.stop_reason, "TaskFailedToStart", self.now_ms())
            elif run.stop_reason:
                event = stopped_event(run.task, STOPPED_EXIT_CODE if code < 0 else code, run.stop_reason,
                                      "UserInitiated", self.now_ms())
            else:
                event = stopped_event(run.task, code, "Essential container in task exited", "EssentialContainerExited",
                                      self.now_ms())
            try:
                # ECS's own state: the task is STOPPED (a no-op when StopTask already said so).
                self.ecs.stop_task(cluster=self.cluster, task=arn, reason=event["detail"]["stoppedReason"])
            except Exception:  # noqa: BLE001 - the event is what the scheduler reads
                pass
            self.deliver(event)

    def stop_all(self) -> None:
        with self._lock:
            for run in self.runs.values():
                _terminate(run.process)
                _end(run)
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)


def _end(run: _Run) -> None:
    """As a container's end: what its command left running is killed, its filesystem discarded.
    A task of its own user: every process of that user (`kill -KILL -1` run as it), even one that
    left the task's process group; else the task's process group."""
    try:
        if run.uid is not None:
            subprocess.run(["kill", "-KILL", "-1"], user=run.uid, group=run.uid, extra_groups=[], cwd="/",
                           env={"PATH": TASK_PATH}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=10, check=False)
        else:
            os.killpg(run.process.pid, signal.SIGKILL)
    except (OSError, subprocess.SubprocessError):
        pass  # nothing left to kill, or no kill command: the scratch directory still goes
    shutil.rmtree(run.workdir, ignore_errors=True)


def _terminate(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass
