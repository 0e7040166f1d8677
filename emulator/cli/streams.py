"""The standard streams of the ``pkasim`` command: writes that fail (a closed pipe, a
full disk) become one OutputError (exit 74), and one-line messages that never end in a
traceback. A light module: the command's entry point imports it before any model code.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any

from pkasim.base.errors import OutputError


def _output_problem(what: str, exc: OSError) -> OutputError:
    if exc.errno == errno.EPIPE:
        return OutputError(f"{what}: the reading end of the pipe was closed; the run was stopped")
    return OutputError(f"{what}: cannot write: {exc.strerror or exc}")


class Guarded:
    """A standard stream whose write failures (EPIPE, ENOSPC...) become one OutputError,
    raised where the write happens (the firmware's semihosted output stops the run)."""

    def __init__(self, stream: Any, what: str) -> None:
        self._stream = stream
        self._what = what

    def write(self, data: Any) -> int:
        try:
            return self._stream.write(data)
        except OSError as exc:
            raise _output_problem(self._what, exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise _output_problem(self._what, exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def say(text: str) -> None:
    """One unwrapped line on stderr: error lines are for scripts as much as people.
    If stderr itself cannot be written, the exit code is all that is left to say it."""
    try:
        sys.stderr.write(" ".join(text.split("\n")) + "\n")
        sys.stderr.flush()
    except OSError:
        quiet_broken_streams()


def quiet_broken_streams() -> None:
    """Point stdout and stderr at /dev/null where writing them fails, so the interpreter's
    final flush does not print a traceback about a pipe that is already gone."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stream.fileno())
                os.close(devnull)
            except (OSError, ValueError):
                pass
