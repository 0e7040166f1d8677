"""Cycle baselines of the firmware images: record them, or check a build against them.

Cycle counts are deterministic (same ELF and config, same count, on every machine),
and the pinned zig clang makes the ELF the same on every machine too. So a change in
these numbers is a fact about a change in the firmware or in the cycle model, never
noise: CI fails on it, and the commit that changes them says why.

    .venv/bin/python traces/baselines.py check    # exit 1 and a diff if anything moved
    .venv/bin/python traces/baselines.py update   # rewrite traces/baselines.json
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from emulator import Machine, load_config  # noqa: E402

BASELINES = Path(__file__).resolve().parent / "baselines.json"
IMAGES = ("hello", "systick", "nested", "fault", "compute")


def measure(build: Path = ROOT / "firmware" / "build") -> dict[str, dict[str, int]]:
    config = load_config()
    out = {}
    for name in IMAGES:
        m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
        m.load(build / f"{name}.elf")
        r = m.run(max_cycles=10**9)
        out[name] = {"cycles": r.cycles, "instructions": r.instructions, "exit_code": r.exit_code}
    return out


def main(argv: list[str]) -> int:
    if argv[1:] not in (["check"], ["update"]):
        print(__doc__)
        return 64
    now = measure()
    if argv[1] == "update":
        BASELINES.write_text(json.dumps(now, indent=2) + "\n")
        print(f"wrote {BASELINES}")
        return 0
    recorded = json.loads(BASELINES.read_text())
    moved = [(k, recorded.get(k), v) for k, v in now.items() if recorded.get(k) != v]
    for name, old, new in moved:
        print(f"{name}: baseline {old} -> now {new}")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
