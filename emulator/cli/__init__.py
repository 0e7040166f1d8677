"""The ``pkasim`` command: ``main`` parses and dispatches; one module per subcommand.

Each subcommand module offers ``add_parser(subparsers)`` and ``main(args, console) -> int``.
"""
