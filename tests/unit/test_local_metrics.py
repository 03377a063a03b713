"""The local stack's EMF lines and their summary (`jobsched stats`)."""
import io
import json

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from jobsched.cli.main import main as cli
from jobsched.local.metrics import EmfTee, summarize


def emf_line(name, values, unit=MetricUnit.Count):
    metrics = EphemeralMetrics(namespace="Jobsched", service="jobsched-worker")
    for value in values:
        metrics.add_metric(name=name, unit=unit, value=value)
    return json.dumps(metrics.serialize_metric_set())


def test_summary_reads_lateness_percentiles_and_outcome_counts():
    # (Powertools flushes a metric by itself at 100 values: 99 make one line)
    lines = [emf_line("FireLatenessMs", list(range(1, 100)), MetricUnit.Milliseconds),
             emf_line("Succeeded", [1, 1, 1]), emf_line("Dead", [1]), "not json", '{"level": "INFO"}']
    summary = summarize(lines)
    assert summary["lateness"]["count"] == 99
    assert summary["lateness"]["p50"] == 50 and summary["lateness"]["p99"] == 98
    assert summary["lateness"]["max"] == 99
    assert summary["counts"] == {"Dead": 1, "Succeeded": 3}


def test_tee_keeps_emf_lines_and_shows_them_only_when_verbose(tmp_path):
    line = emf_line("Succeeded", [1])
    for verbose, shown in ((True, "hello\n" + line + "\nbye\n"), (False, "hello\nbye\n")):
        console = io.StringIO()
        tee = EmfTee(console, tmp_path / "m.jsonl", echo_metrics=verbose)
        tee.write("hello\n" + line[:10])
        tee.write(line[10:] + "\nbye\n")
        assert console.getvalue() == shown
        assert (tmp_path / "m.jsonl").read_text() == line + "\n"


def test_tee_flush_shows_a_line_still_being_written(tmp_path):
    console = io.StringIO()
    tee = EmfTee(console, tmp_path / "m.jsonl")
    tee.write("progress ...")
    tee.flush()
    assert console.getvalue() == "progress ..."


def test_stats_command_prints_a_table(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(emf_line("FireLatenessMs", [5, 15], MetricUnit.Milliseconds) + "\n")
    out = io.StringIO()
    assert cli(["stats", "--file", str(path)], out=out) == 0
    assert "fire lateness ms" in out.getvalue() and "15" in out.getvalue()
    assert cli(["stats", "--file", str(tmp_path / "none")], out=io.StringIO()) == 3
