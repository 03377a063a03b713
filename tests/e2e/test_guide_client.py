"""docs/guide/client.md runs as written: its Python blocks, in order, in one namespace, against a
local stack of their own (real HTTP on loopback, the wall clock), as a reader would paste them."""
import contextlib
import io
import pathlib
import re

from .test_local_stack import local_stack  # noqa: F401 - a stack for this module alone (its own jobs)

GUIDE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "guide" / "client.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def test_the_client_guide_runs_as_written_against_the_local_stack(local_stack, monkeypatch):  # noqa: F811
    runtime, _ = local_stack
    monkeypatch.setenv("JOBSCHED_URL", runtime.api_url)
    monkeypatch.setenv("JOBSCHED_API_KEY", "e2e-key")
    blocks = python_blocks(GUIDE.read_text())
    assert len(blocks) >= 8
    namespace: dict = {}
    out = io.StringIO()
    for number, block in enumerate(blocks, start=1):
        with contextlib.redirect_stdout(out):
            exec(compile(block, f"{GUIDE.name} block {number}", "exec"), namespace)  # noqa: S102
    # What the blocks print (the stack, in this process, prints its metric lines to stdout too)
    printed = "".join(line for line in out.getvalue().splitlines(keepends=True) if not line.startswith('{"_aws"'))
    assert printed.startswith("ok\n"), printed
    assert "[201, 201, 201]" in printed and "422 " in printed and "'schedule'" in printed, printed
    assert "404 NOT_FOUND" in printed and "0 4 * * *" in printed, printed
    assert namespace["run"].status == "SUCCEEDED" and namespace["run"].output == {"rows": 42}, printed
    assert namespace["run"].progress == {"percent": 75}
    reminders = [line for line in printed.splitlines() if re.fullmatch(r"job_\S+ reminder-\d", line)]
    assert len(reminders) == 3  # every page of the iterator
    assert namespace["window"].count == 3
    assert "NOT_FOUND no job job_x" in printed  # the offline transport
