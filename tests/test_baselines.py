"""The firmware images still take exactly the cycles recorded in traces/baselines.json."""

from __future__ import annotations

import json

import pytest


def test_cycle_counts_match_the_recorded_baselines(repo, build_dir):
    if "ziglang" not in (build_dir / "toolchain.sig").read_text():
        pytest.skip("baselines are for the pinned zig clang build; this build used another compiler")
    import sys

    sys.path.insert(0, str(repo / "traces"))
    from baselines import measure

    recorded = json.loads((repo / "traces" / "baselines.json").read_text())
    assert measure(build_dir) == recorded
