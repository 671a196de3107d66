"""Interruption events, parsed into the few intents the interruption function acts on."""
