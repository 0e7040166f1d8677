"""``python -m pkasim``: the ``pkasim`` command."""

from pkasim.cli.main import main

raise SystemExit(main())
