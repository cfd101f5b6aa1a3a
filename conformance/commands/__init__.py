"""The ``retryproof`` subcommands, one module each, every one exposing ``main(args)``."""
