"""One module per `nodescale` subcommand; each exposes ``register(subparsers)`` and ``run(args) -> int``."""
