"""Adapters to the outside world other than our own tables and queues (targets)."""
