"""The guest fuzzer: firmware/images/fuzz.c run with random seeds through --load.

The image drives the PKA, SysTick, the NVIC, the SCB and semihosting with random values
and takes random faults (see its header); the seed and the number of steps are loaded
into ``fuzz_seed`` and ``fuzz_steps``, so every run is reproducible from its seed.
"""

from __future__ import annotations

import random
from pathlib import Path

from fuzzing import BUILD

IMAGE = BUILD / "fuzz.elf"


def case(rng: random.Random, workdir: Path, max_cycles: int, steps: int) -> tuple[list[str], str]:
    """The command line of one seeded run, and its seed for the record."""
    seed = rng.getrandbits(32) or 1
    (workdir / "seed.bin").write_bytes(seed.to_bytes(4, "little"))
    (workdir / "steps.bin").write_bytes(steps.to_bytes(4, "little"))
    argv = ["run", str(IMAGE), "-q", "--max-cycles", str(max_cycles),
            "--load", f"fuzz_seed={workdir / 'seed.bin'}", "--load", f"fuzz_steps={workdir / 'steps.bin'}",
            "--json", str(workdir / "run.json")]
    return argv, f"seed 0x{seed:08x}"
