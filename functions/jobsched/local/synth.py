"""Synthesize the CDK app (in a process of its own), so the local stack runs what `cdk deploy` would create."""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# What the template is made from: the CDK app, the functions' code (the app reads constants of
# many of their modules: sizing, settings, store indexes, routes, lane shares) and the project's
# CDK settings. The layer changes only asset hashes, which the local stack does not use.
TEMPLATE_INPUTS = ("infra", "functions/jobsched", "cdk.json", "pyproject.toml")


def synthesize(outdir: Path, segments: int = 4, allow_private_targets: bool = True, deployed: bool = False) -> dict:
    """The template, synthesized in a process of its own: the CDK's Node.js process (jsii) then
    never lives in the stack's process, where Ctrl-C (which reaches the whole process group) killed
    it and its exit hook printed a BrokenPipeError traceback when the stack stopped. `deployed`: the
    default deployment's settings (`bench cost` prices them) instead of the local stack's (LOCAL)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(ROOT / "functions"), str(ROOT / "infra"), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "jobsched.local.synth", str(outdir), str(segments),
                           "true" if allow_private_targets else "false", "deployed" if deployed else "local"],
                          env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"synthesizing the stack failed (exit code {done.returncode}); see above")
    return json.loads((Path(outdir) / "Jobsched.template.json").read_text())


# Container tasks locally (local/tasks.py): the emulator's account may run task definitions named
# "local-*" in the cluster "local", passing roles named "local-task-*", as an operator would grant
# them with `-c ecsTaskDefinitions=... -c ecsClusters=... -c ecsTaskRoles=...`.
LOCAL_ACCOUNT = "123456789012"
LOCAL_CONTAINER_GRANTS = {
    "ecs_task_definitions": (f"arn:aws:ecs:*:{LOCAL_ACCOUNT}:task-definition/local-*",),
    "ecs_clusters": (f"arn:aws:ecs:*:{LOCAL_ACCOUNT}:cluster/local",),
    "ecs_task_roles": (f"arn:aws:iam::{LOCAL_ACCOUNT}:role/local-task-*",),
}
# The local stack (and the tests, which run its template) keep the stack's own KMS key
# (`-c encryption=kms`): that path calls KMS (sealed signing secrets, SSE-KMS lanes), which the
# strict layer checks; the default deployment uses AWS-owned keys and makes no KMS call.
LOCAL_SETTINGS = {**LOCAL_CONTAINER_GRANTS, "encryption": "kms"}


def synthesize_here(outdir: Path, segments: int = 4, allow_private_targets: bool = True,
                    deployed: bool = False) -> dict:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")  # see local/fake_aws.py
    import aws_cdk as cdk

    from jobsched_infra.compliance import apply_checks
    from jobsched_infra.stack import JobschedStack, StackConfig

    app = cdk.App(outdir=str(outdir))
    if app.node.try_get_context("profile"):
        # A sizing profile in the context (CDK_CONTEXT_JSON; `bench e2e --profile=NAME`): its settings
        # as `cdk synth -c profile=NAME` makes them, segments included (it was ignored before).
        config = dataclasses.replace(StackConfig.from_context(app.node), allow_private_targets=allow_private_targets)
    else:
        config = StackConfig(segments=segments, allow_private_targets=allow_private_targets,
                             **({} if deployed else LOCAL_SETTINGS))
    JobschedStack(app, "Jobsched", config=config)
    apply_checks(app)  # cdk-nag: a finding without an acknowledgement fails synthesis
    app.synth()
    return json.loads((Path(outdir) / "Jobsched.template.json").read_text())


def template_key(segments: int, allow_private_targets: bool) -> str:
    digest = hashlib.sha256(f"{segments}:{allow_private_targets}".encode())
    for name in TEMPLATE_INPUTS:
        base = ROOT / name
        files = sorted(p for p in base.rglob("*") if p.is_file() and p.suffix in (".py", ".json", ".toml")) \
            if base.is_dir() else [base]
        for path in files:
            if "__pycache__" in path.parts or not path.exists():
                continue
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def cached_template(workdir: Path, segments: int = 4, allow_private_targets: bool = True,
                    progress=print, deployed: bool = False) -> dict:
    """The synthesized template, from `workdir` when its inputs have not changed since the last
    synthesis (a synthesis takes tens of seconds: CDK runs on Node.js), else synthesized anew.
    `deployed`: the default deployment's template (synthesize's), cached apart. Processes sharing
    `workdir` (the test workers, the benches) synthesize one at a time: the first under the lock
    synthesizes, the others wait for it and read its template."""
    options = f"{'deployed' if deployed else 'template'}-s{segments}-{'p' if allow_private_targets else 'n'}-"
    cached = workdir / f"{options}{template_key(segments, allow_private_targets)}.json"
    workdir.mkdir(parents=True, exist_ok=True)
    with open(workdir / ".synth-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if cached.is_file():
                progress("jobsched: the stack's template is unchanged since the last start (cached)")
                return json.loads(cached.read_text())
            progress("jobsched: synthesizing the stack with the CDK (the first start, or its code changed) ...")
            template = synthesize(workdir / ("cdk.out-deployed" if deployed else "cdk.out"), segments=segments,
                                  allow_private_targets=allow_private_targets, deployed=deployed)
            for old in workdir.glob(f"{options}*.json"):  # an older synthesis with the same options
                old.unlink()
            partial = cached.with_suffix(".partial")  # never a half-written cache to a reader
            partial.write_text(json.dumps(template))
            partial.replace(cached)
            return template
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)

if __name__ == "__main__":
    synthesize_here(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "true", sys.argv[4:] == ["deployed"])
