"""The data-access layer: every DynamoDB and SQS call lives here, and nowhere else."""
