"""The errors pkasim reports to its users, and the process exit codes that go with them.

Every error a user can cause (a bad config, a bad ELF, a budget that ran out) is one of
these classes; the CLI prints its one-line message and exits with its code. Anything
else reaching the CLI is a bug in pkasim and is reported as such.

Exit codes (documented in README.md and docs/json-schema.md):

* 0-255 from the firmware itself (semihosting SYS_EXIT / SYS_EXIT_EXTENDED) when
  the run ends normally; the emulator never changes them.
* the codes below when the emulator ends the run. They sit in the sysexits range and
  after it (like ``timeout(1)``'s 124) so scripts can tell them apart from common
  firmware codes.
"""

from __future__ import annotations

EXIT_USAGE = 64  # command line misuse (also argparse's own errors, remapped)
EXIT_BAD_INPUT = 65  # a malformed or unfitting ELF, a bad --load/--dump
EXIT_NO_INPUT = 66  # a file that does not exist or cannot be read
EXIT_UNAVAILABLE = 69  # something pkasim needs is not there: a Dask scheduler, an optional package, its native library
EXIT_INTERNAL = 70  # a bug in pkasim: please report it
EXIT_OS = 71  # the host ran out of memory (sysexits EX_OSERR)
EXIT_IO = 74  # output that cannot be written (a full disk, a pipe closed by its reader)
EXIT_CONFIG = 78  # a bad chip description (YAML)
EXIT_BUDGET = 124  # --max-cycles reached before the firmware exited
EXIT_LOCKUP = 125  # the core locked up (a fault inside HardFault)
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + the signal's number, as a shell reports it
EXIT_TERMINATED = 143  # SIGTERM (kill PID): 128 + 15


class PkasimError(Exception):
    """Base class: a user-facing error with a one-line message and an exit code."""

    exit_code = EXIT_INTERNAL


class ConfigError(PkasimError):
    """A chip description that cannot be used; the message names file, key and line."""

    exit_code = EXIT_CONFIG


class LoadError(PkasimError):
    """An ELF (or data file) that cannot be loaded onto the configured chip."""

    exit_code = EXIT_BAD_INPUT


class InputMissingError(PkasimError):
    """A file named on the command line that cannot be opened."""

    exit_code = EXIT_NO_INPUT


class UnavailableError(PkasimError):
    """What a command needs is not installed or does not answer (sysexits EX_UNAVAILABLE):
    the optional package behind an extra (``pip install 'pkasim[sweep]'``), pkasim's own
    native library in a broken installation, a Dask scheduler."""

    exit_code = EXIT_UNAVAILABLE


class UsageError(PkasimError):
    """A command line or API call that does not make sense."""

    exit_code = EXIT_USAGE


class OutputError(PkasimError):
    """Output that could not be written: stdout or stderr closed or full, a --dump or
    --json file on a full disk. The run stops, since what it produces is lost."""

    exit_code = EXIT_IO


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (pkasim's handler raises it). A KeyboardInterrupt, so that
    whatever cleans up after Ctrl-C (a sweep keeps its finished points) does the same
    here; the command line then ends with one line and EXIT_TERMINATED."""
