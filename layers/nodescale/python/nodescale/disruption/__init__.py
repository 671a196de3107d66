"""Disruption decisions: which nodes to remove or replace, and what may stop it. Pure, no I/O."""
