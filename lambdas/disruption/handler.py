"""The disruption function: a thin Powertools handler around nodescale's disruption use-case."""
