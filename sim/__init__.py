"""Local stand-ins for AWS and a Kubernetes API server, used by tests, the demo and benchmarks."""
