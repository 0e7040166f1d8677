"""Running a script on the stock Unicorn wheel: the engine is chosen once per process,
so the tests that look at the stock wheel's own paths run a child with
``PKASIM_ENGINE=stock`` and read what it prints last, a JSON object."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import pytest


def on_stock_wheel(script: str, *args: object, timeout: float = 300) -> dict:
    """The JSON object ``script`` prints last, run with ``args`` on the stock wheel;
    the child's failure or another engine fails the test that asked."""
    done = subprocess.run([sys.executable, "-c", script, *map(str, args)],
                          env={**os.environ, "PKASIM_ENGINE": "stock"}, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["engine"] == "stock"
    return out


def per_engine(script: str, *args: object, timeout: float = 300) -> Callable[[str], dict]:
    """``get(choice)``: the JSON object ``script`` prints last, run with ``args`` and
    ``PKASIM_ENGINE=choice`` (``stock`` or ``patched``), once per choice."""
    seen: dict[str, dict] = {}

    def get(choice: str) -> dict:
        if choice not in seen:
            done = subprocess.run([sys.executable, "-c", script, *map(str, args)],
                                  env={**os.environ, "PKASIM_ENGINE": choice},
                                  capture_output=True, text=True, timeout=timeout, check=False)
            assert done.returncode == 0, done.stderr[-2000:]
            seen[choice] = json.loads(done.stdout.strip().splitlines()[-1])
        return seen[choice]
    return get


def on_engine(results: Callable[[str], dict], choice: str) -> dict:
    """``results(choice)``, or a skip where pkasim's engine could not be used (the
    child ran on the stock wheel when ``patched`` was asked)."""
    out = results(choice)
    if out["engine"] != choice:
        pytest.skip(f"pkasim's engine is not available here (the run used {out['engine']})")
    return out
