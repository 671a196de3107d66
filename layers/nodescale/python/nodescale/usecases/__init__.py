"""The use-cases: each reads the world, asks the core, acts and records; the handlers and the CLI call them."""
