"""docs/robustness.md states every limit of emulator/base/limits.py, with its value."""

from __future__ import annotations

from pathlib import Path

from pkasim.base import limits


def test_every_limit_is_in_the_robustness_doc(repo: Path) -> None:
    doc = (repo / "docs" / "robustness.md").read_text()
    names = [n for n in vars(limits) if n.isupper() and n not in ("KiB", "MiB")]
    assert names
    missing = [n for n in names if f"`{n}`" not in doc]
    assert not missing, f"docs/robustness.md does not state {missing}"


def test_the_doc_gives_the_values_the_code_enforces(repo: Path) -> None:
    doc = (repo / "docs" / "robustness.md").read_text()
    for shown in (f"{limits.CLOCK_HZ_MAX:,} Hz", f"0 to {limits.WAIT_STATES_MAX:,}", f"{limits.CONFIG_MAX_NODES:,}",
                  f"{limits.CONFIG_MAX_DEPTH} levels", f"{limits.CONFIG_MAX_EXTENDS} files",
                  f"{limits.MEMORY_MAX_BYTES >> 20} MiB",
                  f"{limits.EXCEPTION_CYCLES_MAX:,}", f"{limits.CONFIG_MAX_SCALAR_CHARS:,} characters"):
        assert shown in doc, shown
