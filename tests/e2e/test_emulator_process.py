"""The emulator's own process: it keeps the state even when the local stack is killed."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

PARENT = textwrap.dedent("""
    import sys, time
    import boto3
    from jobsched.local.emulator_process import EmulatorProcess
    from jobsched.local.fake_aws import use_local_aws_env

    use_local_aws_env()
    emulator = EmulatorProcess().start()
    dynamodb = emulator.credentials.session().client("dynamodb", endpoint_url=emulator.url)
    dynamodb.create_table(TableName="jobs-physical", KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                          AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                          BillingMode="PAY_PER_REQUEST")
    emulator.keep_state(sys.argv[1], {"JobsTable": "jobs-physical"}, reset=False)
    dynamodb.put_item(TableName="jobs-physical", Item={"k": {"S": "acknowledged"}})
    print(emulator._process.pid, flush=True)
    time.sleep(600)
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent's init) is gone too
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_a_killed_stack_leaves_its_emulator_to_save_and_stop(tmp_path):
    workdir = tmp_path / "local"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(workdir)], stdout=subprocess.PIPE, text=True)
    try:
        emulator_pid = int(parent.stdout.readline())
        assert _alive(emulator_pid)
        parent.send_signal(signal.SIGKILL)  # no clean stop: the emulator must notice by itself
        parent.wait(10)
        deadline = time.time() + 20
        while time.time() < deadline and _alive(emulator_pid):
            time.sleep(0.1)
        assert not _alive(emulator_pid), "the emulator outlived the stack"
        state = json.loads((workdir / "state.json").read_text())
        assert state["tables"]["JobsTable"] == [{"k": {"S": "acknowledged"}}]
    finally:
        parent.kill()
