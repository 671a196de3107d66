"""Node simulation: EC2 instances join the local Kubernetes API the way real nodes do."""
