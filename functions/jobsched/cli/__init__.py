"""The `jobsched` command line client."""
