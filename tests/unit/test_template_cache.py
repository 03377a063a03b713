"""`make run` synthesizes the stack once; later starts reuse the template while its inputs hold."""
from jobsched.local import synth


def test_the_template_is_synthesized_once_while_its_inputs_hold(tmp_path, monkeypatch):
    calls = []

    def fake_synthesize(outdir, segments=4, allow_private_targets=True):
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
