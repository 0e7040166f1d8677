"""Which loops the idle check follows, and for how long (docs/engine.md, "Idle loops").

A loop that can never be idle (a register changed by a constant once per iteration) is
not followed at all; a loop that made progress (two iterations in a row with different
registers) is trusted until the trust epoch ends (PK_TRUST_CYCLES = 2**20 cycles) and is
not checked again meanwhile; on pkasim's engine the blocks of either kind run without
the native hook. None of it changes a count: a loop emulated instead of fast-forwarded
ends at the same cycle, and a trusted loop that gets stuck is still reported stuck,
at most an epoch (and a few of its iterations) later.

Each image is a few instructions of assembly, built here with the firmware's
assembler, and run on both engines where pkasim's engine is available.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import unaligned_cases as U

TRUST_CYCLES = 2**20  # PK_TRUST_CYCLES (emulator/native/pkstate.h)

HEAD = """
    .syntax unified
    .cpu cortex-m0
    .thumb
    .section .vectors, "a"
    .word 0x20001000
    .word reset
    .rept 13
    .word other
    .endr
    .word systick
    .text
    .thumb_func
other:
    b other
    .thumb_func
systick:
    ldr r0, =ticks
    ldr r1, [r0]
    adds r1, #1
    str r1, [r0]
    bx lr
    .thumb_func
done:
    movs r0, #0x18
    ldr r1, =0x20026
    bkpt 0xab
    .ltorg
"""

# A loop entered 20 times: each time it counts r1 down from 8 (progress: trusted after
# the first entry), then polls the tick counter (idle) until SysTick (every 1,000
# cycles) moves it.
POLL_AFTER_PROGRESS = HEAD + """
    .thumb_func
reset:
    ldr r0, =0xE000E014
    ldr r1, =999
    str r1, [r0]
    ldr r0, =0xE000E018
    movs r1, #0
    str r1, [r0]
    ldr r0, =0xE000E010
    movs r1, #7
    str r1, [r0]
    ldr r4, =ticks
    movs r5, #0
    movs r6, #0
outer:
    movs r1, #8
loop:
    ldr r2, [r4]
    cmp r2, r5
    bne left
    cmp r1, #0
    beq 1f
    subs r1, #1
1:  b loop
left:
    mov r5, r2
    adds r6, #1
    cmp r6, #20
    bne outer
    b done
    .ltorg
    .bss
    .balign 4
ticks: .space 4
"""

# A loop that counts r1 down from 40 (progress: trusted), then spins with nothing
# left to change and no interrupt enabled: stuck.
STUCK_AFTER_PROGRESS = HEAD + """
    .thumb_func
reset:
    movs r1, #40
loop:
    cmp r1, #0
    beq 1f
    subs r1, #1
1:  b loop
    .bss
    .balign 4
ticks: .space 4
"""

# A loop that can never be idle: r1 changes by -1 at every iteration.
COUNTER = HEAD + """
    .thumb_func
reset:
    ldr r1, =200000
loop:
    subs r1, #1
    bne loop
    b done
    .ltorg
    .bss
    .balign 4
ticks: .space 4
"""

CHILD = r"""
import io, json, sys
from pkasim.chip.config import load_config
from pkasim.core.machine import Machine
from pkasim.native import engine
out = []
for path, fast in json.loads(sys.argv[1]):
    m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(path)
    m.fast_paths = fast
    r = m.run(max_cycles=10**8)
    out.append({"reason": r.reason.value, "exit": r.exit_code, "cycles": r.cycles, "insns": r.instructions,
                "message": r.message, "taken": m.exceptions_taken, "hooked": int(m.core.state.blocks)})
print(json.dumps({"engine": engine.selected(), "runs": out}))
"""


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> dict[str, Path]:
    if U.assembler() is None:
        pytest.skip("no ARM assembler (pip package ziglang, or arm-none-eabi-gcc)")
    d = tmp_path_factory.mktemp("trust")
    return {name: U.assemble(source, d, name)
            for name, source in (("poll", POLL_AFTER_PROGRESS), ("stuck", STUCK_AFTER_PROGRESS), ("counter", COUNTER))}


def _engine_available() -> bool:
    done = subprocess.run([sys.executable, "-c", "from pkasim.native import engine; engine.require()"],
                          env={**os.environ, "PKASIM_ENGINE": "patched"}, capture_output=True, check=False)
    return done.returncode == 0


@pytest.fixture(scope="module")
def runs(images) -> dict[str, dict[tuple[str, bool], dict]]:
    """Every image on each engine, with the native fast paths on and off."""
    jobs = [(str(images[name]), fast) for name in images for fast in (True, False)]
    engines = ["stock"] + (["patched"] if _engine_available() else [])
    out: dict[str, dict[tuple[str, bool], dict]] = {}
    for engine in engines:
        done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(jobs)], capture_output=True, text=True,
                              env={**os.environ, "PKASIM_ENGINE": engine}, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["engine"] == engine
        out[engine] = {(name, fast): run for (name, fast), run in
                       zip([(n, f) for n in images for f in (True, False)], result["runs"])}
    return out


def _counts(run: dict) -> tuple:
    return run["reason"], run["exit"], run["cycles"], run["insns"], run["taken"]


def test_a_trusted_loop_that_polls_later_ends_at_the_same_counts_as_without_fast_forward(runs):
    for engine in runs:
        fast, slow = runs[engine][("poll", True)], runs[engine][("poll", False)]
        assert fast["reason"] == "exit" and fast["exit"] == 0
        assert _counts(fast) == _counts(slow)


def test_a_trusted_loop_that_polls_later_counts_the_same_on_both_engines(runs):
    if "patched" not in runs:
        pytest.skip("pkasim's engine is not available here")
    assert _counts(runs["patched"][("poll", True)]) == _counts(runs["stock"][("poll", True)])


def test_a_loop_that_made_progress_then_spins_forever_is_reported_stuck_within_the_trust_epoch(runs):
    for engine in runs:
        run = runs[engine][("stuck", True)]
        assert run["reason"] == "stuck", run
        assert "no interrupt can fire" in run["message"]
        # counted down by cycle ~300, checked again when the epoch that began at the
        # first block ends: at most 2**20 cycles and three iterations later
        assert run["cycles"] <= TRUST_CYCLES + 1000


def test_a_loop_stuck_after_progress_stops_at_the_same_cycle_on_both_engines(runs):
    if "patched" not in runs:
        pytest.skip("pkasim's engine is not available here")
    assert runs["patched"][("stuck", True)] | {"hooked": 0} == runs["stock"][("stuck", True)] | {"hooked": 0}


def test_a_loop_that_can_never_be_idle_counts_the_same_with_and_without_fast_paths(runs):
    for engine in runs:
        assert _counts(runs[engine][("counter", True)]) == _counts(runs[engine][("counter", False)])


def test_on_pkasim_engine_a_loop_that_can_never_be_idle_runs_without_the_hook(runs):
    if "patched" not in runs:
        pytest.skip("pkasim's engine is not available here")
    run = runs["patched"][("counter", True)]
    assert run["insns"] > 400_000  # 200,000 iterations of two instructions
    assert run["hooked"] < 100  # block starts that called the native hook


def test_on_pkasim_engine_a_trusted_loop_runs_without_the_hook(runs):
    if "patched" not in runs:
        pytest.skip("pkasim's engine is not available here")
    run = runs["patched"][("poll", True)]
    iterations = run["insns"] // 7  # the loop's iterations dominate the run
    assert run["hooked"] < iterations // 10
