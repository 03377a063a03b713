"""Benchmarks that print figures. `make bench` runs them all; `python -m bench NAME` runs one.

They are not timed tests and are not part of `make test` (a smoke test runs each on a tiny
input). Figures and the commands that made them are recorded in docs/performance.md."""
