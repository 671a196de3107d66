"""The pure core's vocabulary: quantities, resources, requirements, taints, pods, instance types, NodePools."""
