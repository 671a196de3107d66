"""nodescale: Karpenter-style node autoscaling for Amazon EKS, run on AWS Lambda."""

from .kubernetes_package import install as _light_kubernetes

__version__ = "0.1.0"

# Before any module of the product imports kubernetes: see kubernetes_package.
_light_kubernetes()
