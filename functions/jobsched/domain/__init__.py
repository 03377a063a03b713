"""The scheduler's domain: plain Python, no AWS, time always passed in."""
