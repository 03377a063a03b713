"""The e2e modules that share one local stack (a `local_stack` fixture: the runtime and its echo
endpoint) keep it under its strict AWS layer in every test: the suite's conftest turns the layer
off after each test, and the stack turned it on only once, at its start."""
import pytest

from jobsched.local import strict_aws


@pytest.fixture(autouse=True)
def _shared_stack_keeps_its_strict_layer(request):
    if "local_stack" in request.fixturenames:
        runtime, _ = request.getfixturevalue("local_stack")
        strict_aws.activate(runtime.strict)
    yield
