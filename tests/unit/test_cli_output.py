"""The CLI's output for scripts and people: `jobs trigger` prints the bare execution id on stdout
(its status on stderr), and a list that stops at a page says on stderr that more exist."""
from io import StringIO

from jobsched.cli import main as cli

from .api_answers import EXECUTION, JOB, FakeApi

def run(argv, answers):
    out = StringIO()
    args = cli.build_parser().parse_args(argv)
    code = cli.run_command(args, FakeApi(answers).client, out)
    return code, out.getvalue()


def test_trigger_prints_the_bare_id_on_stdout_and_its_status_on_stderr(capsys):
    execution = {**EXECUTION, "executionId": "job_1.0000000001000.manual", "status": "PENDING"}
    code, out = run(["jobs", "trigger", "job_1"], lambda *a: execution)
    assert (code, out) == (0, "job_1.0000000001000.manual\n")
    assert capsys.readouterr().err == "jobsched: PENDING\n"


def test_a_list_that_stops_at_a_page_says_so_on_stderr(capsys):
    jobs = [{**JOB, "jobId": f"job_{n}", "name": "n", "type": "RATE", "state": "ACTIVE"} for n in range(20)]
    code, out = run(["jobs", "list"], lambda m, p, q: {"items": jobs, "nextCursor": None if q.get("cursor") else "c2"})
    assert code == 0 and len(out.splitlines()) == 21
    assert capsys.readouterr().err == "jobsched: 20 shown and more exist; --all reads every page (or --limit up to 100)\n"
    code, out = run(["jobs", "list", "--all"], lambda m, p, q: {"items": jobs, "nextCursor": None if q.get("cursor") else "c2"})
    assert code == 0 and len(out.splitlines()) == 41 and capsys.readouterr().err == ""
