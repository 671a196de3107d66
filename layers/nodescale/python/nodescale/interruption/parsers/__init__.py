"""EventBridge event parsers, one module per event kind; registry.py maps (source, detail-type) to them.
No re-exports here: a module that needs one helper (base.parse_time) must not load every parser (#32, cold
start).
"""
