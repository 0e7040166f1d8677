"""Ctrl-C and SIGTERM to a running ``pkasim run`` (README, exit codes): one line on
stderr, 130 or 143, no traceback, even in a loop that never stops for an event
(spin.elf mode 4 counts for ever with nothing enabled: the run loop still returns to
Python every 2^24 cycles, emulator/core/runloop.py PROGRESS_EVERY)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest


def _sigint_default() -> None:
    """A test started in the background of a non-interactive shell inherits SIGINT
    ignored; the command under test gets the terminal's default, as a user's does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def counting(elf, tmp_path):
    """``pkasim run spin.elf`` in mode 4 with no cycle budget, once it has printed its
    first line (so the signal reaches the run, not Python's start-up)."""
    mode = tmp_path / "mode.bin"
    mode.write_bytes((4).to_bytes(4, "little"))
    procs = []

    def start() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "pkasim.cli.main", "run", str(elf("spin")), "--load",
                                 f"spin_mode={mode}", "--max-cycles", "0"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_sigint_default)
        procs.append(proc)
        assert proc.stdout.readline() == "spin: counting\n"
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize(("sig", "code", "line"), [(signal.SIGINT, 130, "pkasim: interrupted"),
                                                   (signal.SIGTERM, 143, "pkasim: terminated")])
def test_a_signal_ends_a_run_with_one_line_and_its_exit_code(counting, sig, code, line):
    proc = counting()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert err.splitlines() == [line]  # no summary, no traceback
    assert out == ""
