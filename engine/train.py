"""The training run of the engine's profile-guided build (engine/build.py, docs/engine.md).

    python engine/train.py LIBRARY

Runs pkasim on LIBRARY (an engine built with ``-fprofile-generate``) over the work it
is built for, so that the compiler's second pass knows which paths are hot: the
translator (every job on a new machine: its blocks translated for the first time), the
generated code's helpers, device accesses, exceptions and WFI (the PKA jobs), plain
integer code (the kernels). Every run is deterministic, so the profile, and the
library built from it, are the same on every run of the build. Exit 0 when every run
ended as expected, 1 (with one line saying why) otherwise: the build then goes on
without the profile.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

RSA_JOBS = ("rsa2048-pka", "rsa2048-win", "rsa2048-pair", "rsa4096-xrsa", "rsa4096-xrsa-opt", "rsa4096-win",
            "rsa4096-pair", "rsa2048-soft")
ECC_JOBS = ("p256-verify", "x25519")
PROGRAMS = ("kernels.elf", "compute.elf", "systick.elf")
ROUNDS = 2  # each job twice on a new machine: first translations weigh as in short runs


def train() -> str | None:
    """Run the training work; None when all of it ran as expected, else why not."""
    from pkasim.chip.config import load_config
    from pkasim.core.machine import Machine
    from pkasim.core.results import StopReason
    from pkasim.ecc.bench import ECC_JOBS as ECC
    from pkasim.ecc.bench import run_ecc_job
    from pkasim.native import engine
    from pkasim.rsa.bench import BUILD_DIR, JOBS, run_job

    if engine.selected() != "patched":
        return f"pkasim did not take {engine.LIBRARY}"
    config = load_config()
    runs = instructions = 0
    rsa = {j.key: j for j in JOBS}
    ecc = {j.key: j for j in ECC}
    for _ in range(ROUNDS):
        for key in RSA_JOBS:
            result = run_job(config, rsa[key], reuse=False)
            if not result.verified:
                return f"{key} did not verify"
            runs, instructions = runs + 1, instructions + result.instructions
        for key in ECC_JOBS:
            result = run_ecc_job(config, ecc[key])
            if not result.verified:
                return f"{key} did not verify"
            runs, instructions = runs + 1, instructions + result.instructions
        for name in PROGRAMS:
            m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
            m.load(BUILD_DIR / name)
            end = m.run(max_cycles=2_000_000_000)
            if end.reason != StopReason.EXIT or end.exit_code != 0:
                return f"{name} ended {end.reason.value} ({end.message or end.exit_code})"
            runs, instructions = runs + 1, instructions + m.instructions
    print(f"training run: {runs} runs, {instructions:,} instructions")
    return None


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        from pkasim.native import engine
        engine.LIBRARY = Path(sys.argv[1]).resolve()  # before pkasim.core selects the library
        why = train()
    except Exception as exc:  # noqa: BLE001 - any failure means: build without the profile
        why = f"{type(exc).__name__}: {exc}"
    if why:
        print(f"training run: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
