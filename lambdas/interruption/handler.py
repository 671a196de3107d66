"""The interruption function: a thin Powertools handler around nodescale's interruption use-case."""
