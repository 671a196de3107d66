"""The provisioner: pending pods to EC2 Fleet launches, the Nodes they become, and why a pod waits."""
