"""The functions' AWS SDK is the one the suite tested: boto3 and botocore are bundled in the
dependency layer at pinned versions (the functions switch botocore's parameter validation off,
store/aws.py, so a runtime's newer or older botocore would build requests no test has seen)."""
import re
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PINNED = ("boto3", "botocore")


def _pins(lines) -> dict[str, str]:
    """name -> exact version of each `name==version` requirement (other forms are not pins)."""
    pins = {}
    for line in lines:
        match = re.fullmatch(r'\s*"?([A-Za-z0-9_.-]+)\s*==\s*([0-9][0-9A-Za-z.]*)"?,?\s*', line)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def test_the_layer_pins_boto3_and_botocore_to_the_versions_the_suite_runs():
    layer = _pins(line.split("#", 1)[0] for line in (ROOT / "layers" / "requirements.txt").read_text().splitlines())
    project = _pins((ROOT / "pyproject.toml").read_text().splitlines())
    for name in PINNED:
        assert name in layer, f"layers/requirements.txt must pin {name} (name==version)"
        assert layer[name] == project.get(name), (name, layer[name], project.get(name))
        assert version(name) == layer[name], f"the suite runs {name} {version(name)}, the layer ships {layer[name]}"
