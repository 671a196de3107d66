"""The disruption function: one pass of expiry, drift, emptiness and consolidation, read, decided, acted on."""
