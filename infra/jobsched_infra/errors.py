"""The error a deployment's context raises: apart, so that config.py and the modules it reads
(regions.py) import it one way."""


class ConfigError(ValueError):
    """A context value the stacks cannot be built from: the message names the context key."""
