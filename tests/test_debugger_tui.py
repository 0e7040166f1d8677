"""The real TUI in a real terminal (tmux): it opens, steps, shows the PKA pane, and
quits with the terminal restored. Skipped where tmux is missing (.ci/run installs it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")

PKASIM = Path(sys.executable).with_name("pkasim")


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def screen(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session)


def wait_for(session: str, text: str, timeout: float = 30.0) -> str:
    """The screen once ``text`` is on it (the time limit only ends a hung test)."""
    end = time.monotonic() + timeout
    shown = ""
    while time.monotonic() < end:
        shown = screen(session)
        if text in shown:
            return shown
        time.sleep(0.2)
    raise AssertionError(f"'{text}' never appeared; the screen was:\n{shown}")


@pytest.fixture
def session(elf, tmp_path):
    name = f"pkasim-{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "stty"
    # Record the terminal mode before and after: quitting must give it back.
    cmd = (f"stty -g > {marker}.before; {PKASIM} debug {elf('xrsa')}; echo EXIT=$?; stty -g > {marker}.after; "
           "sleep 60")
    tmux("new-session", "-d", "-s", name, "-x", "80", "-y", "24", cmd)
    try:
        yield name, marker
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def test_the_tui_opens_steps_shows_the_pka_and_quits_restoring_the_terminal(session):
    name, marker = session
    first = wait_for(name, "registers")
    assert "Reset_Handler" in first and "PKA" in first and "cycles 0" in first
    assert all(len(line) <= 80 for line in first.splitlines()) and len(first.splitlines()) <= 24
    tmux("send-keys", "-t", name, "break rsa_private", "Enter")
    wait_for(name, "Breakpoint 1 at")
    tmux("send-keys", "-t", name, "F5")  # continue
    shown = wait_for(name, "Breakpoint 1, ")
    assert "rsa.c:409" in shown and "cycles 5,254" in shown
    tmux("send-keys", "-t", name, "F12")  # stepi
    shown = wait_for(name, "cycles 5,260")
    assert "rsa_private+0x2" in shown
    tmux("send-keys", "-t", name, "finish", "Enter")
    shown = wait_for(name, "Value returned")
    assert "PKA idle" in shown and "ops 12,324" in shown  # the PKA pane after RSA-4096
    tmux("send-keys", "-t", name, "quit", "Enter")
    shown = wait_for(name, "EXIT=0")
    assert "registers" not in shown  # the alternate screen is gone
    end = time.monotonic() + 10
    while not Path(f"{marker}.after").exists() and time.monotonic() < end:
        time.sleep(0.1)
    assert Path(f"{marker}.after").read_text() == Path(f"{marker}.before").read_text()


def test_the_tui_redraws_at_a_new_size(session):
    name, _ = session
    wait_for(name, "registers")
    tmux("resize-window", "-t", name, "-x", "120", "-y", "40")
    end = time.monotonic() + 20
    while time.monotonic() < end:
        lines = screen(name).splitlines()
        if any(len(line) > 100 and "registers" in line for line in lines):
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the TUI did not redraw at 120 columns:\n" + screen(name))
    tmux("send-keys", "-t", name, "quit", "Enter")
    wait_for(name, "EXIT=0")
