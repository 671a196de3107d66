"""Kubernetes adapters: EKS token and client, listing, nodes, PDB-aware drain, events."""
