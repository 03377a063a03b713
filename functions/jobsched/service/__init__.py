"""Use cases: the scheduler's behaviour, written against the stores and a clock."""
