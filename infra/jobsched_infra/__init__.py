"""Infrastructure as code for jobsched (AWS CDK v2)."""
