"""The bin-packer: where pending pods go, and which NodeClaims to launch for them (solve in scheduler.py,
its result types in plan.py). No re-exports here: importing one scheduling module must not load the scheduler
(#32, cold start).
"""
