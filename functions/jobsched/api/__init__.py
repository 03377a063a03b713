"""The HTTP API's boundary: request models, their mapping to the domain, response shapes."""
