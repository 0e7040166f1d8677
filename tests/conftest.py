"""Shared fixtures: the repository, the default chip, the firmware images, a Machine factory.

Names other test files rely on: ``repo``, ``config``, ``build_dir``, ``elf``, ``make_machine``.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from pkasim.chip.config import ChipConfig, load_config
from pkasim.core.machine import Machine

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture(scope="session")
def config() -> ChipConfig:
    """The default chip description (configs/ciu98320b.yaml)."""
    return load_config()


@pytest.fixture(scope="session")
def build_dir(repo: Path) -> Path:
    """firmware/build, brought up to date once per session (make is incremental)."""
    build = repo / "firmware" / "build"
    subprocess.run(["make", "-s", "-C", str(repo / "firmware"), f"PYTHON={sys.executable}"], check=True,
                   stdout=subprocess.DEVNULL)
    return build


@pytest.fixture(scope="session")
def elf(build_dir: Path):
    """``elf("hello")`` (or ``elf("hello.elf")``): the path of a built firmware image."""

    def path(name: str) -> Path:
        p = build_dir / (name if name.endswith(".elf") else f"{name}.elf")
        if not p.exists():
            pytest.fail(f"firmware image {p} was not built")
        return p

    return path


@pytest.fixture
def make_machine(config: ChipConfig):
    """``make_machine(config=None)``: a Machine whose semihosted output goes to BytesIO
    (read it back from ``m.stdout.getvalue()`` / ``m.stderr.getvalue()``)."""

    def make(cfg: ChipConfig | None = None) -> Machine:
        return Machine(cfg if cfg is not None else config, stdout=io.BytesIO(), stderr=io.BytesIO())

    return make
