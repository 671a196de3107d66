"""The interruption core, pure: events parsed into intents, and the action for each.

    events      the entry: envelope checks, then the parser registered for (source, detail-type)
    parsers/    one module per event kind, and the registry keyed by (source, detail-type)
    intents     Intent / Ignored and their enums (what an event asks, per instance)
    actions     action_for(intent, node, pool) -> Action: the whole policy, and the summary's words

The use-case that carries the actions out is ``usecases/interrupt/handle.py`` (with ``interrupt_actions.py``).
"""
