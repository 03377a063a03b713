"""jobsched: a serverless distributed job scheduler on AWS."""
