"""The provisioner function: a thin Powertools handler around nodescale's provisioner use-case."""
