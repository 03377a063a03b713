"""Lambda entry points: parse the event, build dependencies once, call one use case, map the result."""
