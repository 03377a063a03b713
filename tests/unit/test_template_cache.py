"""`make run` synthesizes the stack once; later starts reuse the template while its inputs hold."""
import fcntl

import pytest

from jobsched.local import synth


def test_the_template_is_synthesized_once_while_its_inputs_hold(tmp_path, monkeypatch):
    calls = []

    def fake_synthesize(outdir, segments=4, allow_private_targets=True, deployed=False):
        calls.append(segments)
        return {"Resources": {"n": segments}}

    monkeypatch.setattr(synth, "synthesize", fake_synthesize)
    said = []
    first = synth.cached_template(tmp_path, segments=3, progress=said.append)
    again = synth.cached_template(tmp_path, segments=3, progress=said.append)
    assert first == again == {"Resources": {"n": 3}} and calls == [3]
    assert "synthesizing" in said[0] and "cached" in said[1]
    synth.cached_template(tmp_path, segments=5, progress=said.append)  # other options: a template of their own
    assert calls == [3, 5] and len(list(tmp_path.glob("template-*.json"))) == 2
    monkeypatch.setattr(synth, "template_key", lambda *a: "changed")  # the infrastructure code changed
    synth.cached_template(tmp_path, segments=3, progress=said.append)
    assert calls == [3, 5, 3] and len(list(tmp_path.glob("template-*.json"))) == 2  # it replaced its older one


def test_the_default_deployments_template_is_cached_apart_from_the_local_stacks(tmp_path, monkeypatch):
    """`bench cost` prices the default deployment's template: cached beside the local stack's (same
    segments), each synthesized once, into an output directory of its own."""
    calls = []

    def fake_synthesize(outdir, segments=4, allow_private_targets=True, deployed=False):
        calls.append((outdir.name, deployed))
        return {"Resources": {"deployed": deployed}}

    monkeypatch.setattr(synth, "synthesize", fake_synthesize)
    for _ in range(2):
        assert synth.cached_template(tmp_path, progress=print) == {"Resources": {"deployed": False}}
        assert synth.cached_template(tmp_path, progress=print, deployed=True) == {"Resources": {"deployed": True}}
    assert calls == [("cdk.out", False), ("cdk.out-deployed", True)]


def test_one_process_synthesizes_while_the_others_sharing_the_cache_wait(tmp_path, monkeypatch):
    """The test workers share one cache: while one synthesizes, it holds the cache's lock, so that
    another waits for its template instead of synthesizing the same (into the same directory)."""
    held = []

    def fake_synthesize(outdir, segments=4, allow_private_targets=True, deployed=False):
        with open(tmp_path / ".synth-lock", "w") as other:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(segments)
        return {}

    monkeypatch.setattr(synth, "synthesize", fake_synthesize)
    synth.cached_template(tmp_path, segments=3, progress=print)
    assert held == [3]


def test_the_key_follows_the_infrastructure_code(tmp_path, monkeypatch):
    fake_root = tmp_path / "root"
    (fake_root / "infra").mkdir(parents=True)
    (fake_root / "infra" / "stack.py").write_text("A = 1\n")
    monkeypatch.setattr(synth, "ROOT", fake_root)
    before = synth.template_key(4, True)
    assert synth.template_key(4, True) == before
    (fake_root / "infra" / "stack.py").write_text("A = 2\n")
    assert synth.template_key(4, True) != before
    assert synth.template_key(4, False) != synth.template_key(4, True)


def test_the_key_follows_the_function_constants_the_app_reads(tmp_path, monkeypatch):
    """The CDK app reads constants of the functions' modules (sizing, store indexes, routes): a
    change there is a change of the template."""
    fake_root = tmp_path / "root"
    (fake_root / "functions" / "jobsched").mkdir(parents=True)
    (fake_root / "functions" / "jobsched" / "sizing.py").write_text("TICK_MEMORY_MB = 512\n")
    monkeypatch.setattr(synth, "ROOT", fake_root)
    before = synth.template_key(4, True)
    (fake_root / "functions" / "jobsched" / "sizing.py").write_text("TICK_MEMORY_MB = 1024\n")
    assert synth.template_key(4, True) != before
