"""Argument types shared by the commands: whole numbers within bounds, each refused
with one line that says what was expected (argparse turns it into exit 64).

Kept apart from pkasim.cli.common, which imports the machine: the commands that use
only these load nothing more for them."""

from __future__ import annotations

import argparse


def whole_number(text: str, lo: int, hi: int | None, expected: str) -> int:
    """``text`` as an int in [lo, hi] (no upper bound when ``hi`` is None); ``expected``
    is the message for a number outside, formatted with ``value``."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text[:40]!r}") from None
    if value < lo or (hi is not None and value > hi):
        raise argparse.ArgumentTypeError(expected.format(value=value))
    return value
