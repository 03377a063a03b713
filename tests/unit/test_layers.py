"""The layers import downwards only: the use cases (service), the domain and the data layer never
import the HTTP boundary (api/), so that a use case takes domain values and the handler maps."""
import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "functions" / "jobsched"


def imported_modules(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("layer", ["service", "domain", "store"])
def test_no_layer_below_the_handlers_imports_the_api_boundary(layer):
    offenders = {
        path.name: sorted(n for n in imported_modules(path) if n == "jobsched.api" or n.startswith("jobsched.api."))
        for path in sorted((PACKAGE / layer).glob("*.py"))
    }
    assert {name: found for name, found in offenders.items() if found} == {}
