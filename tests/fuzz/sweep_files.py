"""Sweep files as a careless or hostile user writes them (`pkasim sweep`).

Each case is a sweep file drawn from the schema (docs/sweep.md) with values swapped
for wrong types and awkward numbers (floats for sizes, 20-digit integers, NaN,
strings, lists where a mapping goes, booleans), keys dropped or misspelt, chip axes
with hostile values and preset files (/dev/zero, a FIFO, missing, a directory), and
images that are not images. No point ever runs: every image is missing or not a file,
so a file that passes the schema ends at "not built" (65) before the first key is
made; what is exercised is the reading, the checking and the expansion of the grid,
chips included (each chip of the grid is resolved and its models built first).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import yaml
from fuzzing import REPO, mutate

HOSTILE = (0, -1, 1, 2048.0, 4096.5, 12345678901234567890, -(1 << 70), float("nan"), float("inf"), True, None, "",
           "x", "2048", [], [1], {}, {"a": 1}, "9" * 1100, "é", "/dev/zero")
CHIP_KEYS = ("pka.maxlen", "pka.digit_bits", "pka.max_words", "pka.ram_size", "core.clock_hz", "core.muls_cycles",
             "memory.flash.wait_states", "memory.sram.size", "pka.timing.montmul", "preset", "preset_b",
             "peripherals.pka.base", "core.irqs", "nonsense.key", "pka..x", "1bad")
GOOD_VALUES = {"pka.maxlen": [2048, 4096], "pka.digit_bits": [32, 64], "core.clock_hz": ["48 MHz", 96_000_000],
               "core.muls_cycles": [1, 32], "memory.flash.wait_states": [0, 1], "pka.max_words": [64, 128],
               "memory.sram.size": ["16 KiB", "32 KiB"], "pka.ram_size": ["3 KiB", "6 KiB"],
               "pka.timing.montmul": [[0.3523, 3, 16], [0.25, 3, 16]], "peripherals.pka.base": [0x40010000],
               "core.irqs": [32, 8]}


def files(workdir: Path) -> dict[str, str]:
    """Paths a case may name: presets good and bad, images that are not images."""
    (workdir / "sweep-dir").mkdir(exist_ok=True)
    fifo = workdir / "sweep-fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    (workdir / "sweep-text.yaml").write_text("core: [unclosed\n")
    return {"preset": str(REPO / "configs" / "presets" / "fdfm-radix17.yaml"), "missing": str(workdir / "none.yaml"),
            "dir": str(workdir / "sweep-dir"), "fifo": str(fifo), "zero": "/dev/zero", "text": str(workdir / "sweep-text.yaml"),
            "chip": str(REPO / "configs" / "ciu98320b.yaml")}


def sweep(rng: random.Random, pool: dict[str, str], workdir: Path) -> Any:
    """One sweep document (plain values; the caller dumps it): a valid file, bent by a
    few mutations."""
    images = [str(workdir / "not-built.elf"), "/dev/zero", pool["dir"], pool["fifo"], pool["missing"]]
    axes: dict[str, Any] = {"firmware": rng.sample(images, rng.randint(1, 2))}
    if rng.random() < 0.7:
        axes["key_bits"] = rng.sample([2048, 4096], rng.randint(1, 2))
    for key in ("keys", "messages"):
        if rng.random() < 0.4:
            axes[key] = rng.randint(1, 3)
    if rng.random() < 0.8:
        chip: dict[str, Any] = {}
        for name in rng.sample(CHIP_KEYS, rng.randint(1, 3)):
            if name.startswith("preset"):
                chip[name] = [None, pool[rng.choice(["preset"] * 3 + ["missing", "dir", "fifo", "zero", "text"])]]
            else:
                chip[name] = GOOD_VALUES.get(name, [1, 2])[:rng.randint(1, 2)]
        axes["chip"] = chip
    doc: dict[str, Any] = {"axes": axes}
    if rng.random() < 0.5:
        doc["chip"] = pool[rng.choice(["chip"] * 4 + ["missing", "dir", "fifo", "zero", "text"])]
    if rng.random() < 0.3:
        doc["build_dir"] = str(workdir)
    if rng.random() < 0.5:
        doc["metrics"] = rng.sample(["cycles", "ms", "ops_per_s", "pka_ops", "busy_share"], 2)
    if rng.random() < 0.4:
        doc["functions"] = ["pka_run", "crt_exp"]
    if rng.random() < 0.4:
        doc["goal"] = {"ops_per_s": 10, "key_bits": 4096}
    if rng.random() < 0.3 and "chip" in axes:
        doc["plot"] = {"x": next(iter(axes["chip"]))}
    if rng.random() < 0.2:
        doc["name"] = "fuzz"
    return mutate(rng, doc, HOSTILE, rng.choice([0, 0, 1, 1, 2]))


def case(rng: random.Random, pool: dict[str, str], workdir: Path) -> tuple[list[str], str]:
    """(argv, what): a sweep file written to the work directory and the command to read it."""
    path = workdir / "sweep.yaml"
    text = yaml.safe_dump(sweep(rng, pool, workdir), allow_unicode=True)
    if rng.random() < 0.05:  # bends of the YAML itself
        text = rng.choice(["axes: &a [*a]\n", "axes: " + "[" * 40 + "]" * 40 + "\n", "axes: !!python/none ~\n",
                           text[: len(text) // 2], "axes: \udcff\udcfe\n"])
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    argv = ["sweep", str(path), "--cache", str(workdir / "sweep-cache.sqlite"), "--out", str(workdir / "sweep-out"),
            "--jobs", "1", "-q"]
    return argv, text.replace("\n", " ")[:200]
