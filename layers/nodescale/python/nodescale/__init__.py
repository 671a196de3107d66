"""nodescale: Karpenter-style node autoscaling for Amazon EKS, run on AWS Lambda."""

__version__ = "0.1.0"
