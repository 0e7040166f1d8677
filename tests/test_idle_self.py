"""Self-contained polls (docs/cycle-model.md, "Idle loops"; emulator/native/idle.c).

A loop whose iterations are self-contained (straight-line code; every register and flag
it writes written before it is read: cycles.loop_self_contained, VERDICT_SELF) does the
same in every iteration until a device event, whatever its registers were when it was
entered. The idle check skips it after one whole iteration from its start, without
comparing registers, and to the same counts as before. Each image here starts a PKA
MONTMUL 12 times and polls SR.BUSY in a loop unrolled four times (four blocks, as
clang compiles pkp_wait), entered through the block holding the START write (the
loop's first instructions are in that block) or otherwise; the PKA's busy reads
(Kind.PKA_POLL) before each fast-forward count the iterations that ran.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import unaligned_cases as U
from hypothesis import given, settings
from hypothesis import strategies as st

from pkasim.core.cycles import idle_ok16, loop_self_contained
from pkasim.core.machine import StopReason
from pkasim.core.observe import Kind, Observer
from pkasim.native import load

OPS = 12  # PKA operations each image starts and polls for
ITERATION_BLOCKS = 4  # blocks of the unrolled poll, one busy SR read each

HEAD = U.BARE_START + f"""
    ldr r4, =0x40010000     @ PKA CR
    ldr r5, =0x40010004     @ PKA SR
    ldr r6, =0x10000        @ SR.BUSY
    ldr r0, =0x40010400     @ PKA RAM: N = 3 (odd) at word 0, A = B = 0 at word 32
    movs r1, #3
    str r1, [r0]
    ldr r0, =0x4001000C     @ LEN = 32 words (a 1024-bit MONTMUL)
    movs r1, #32
    str r1, [r0]
    ldr r0, =0x40010010     @ APTR, BPTR = 0x80; RPTR = 0x100
    movs r1, #0x80
    str r1, [r0]
    str r1, [r0, #4]
    lsls r1, r1, #1
    str r1, [r0, #12]
    ldr r7, =0x103          @ CR: EN, opcode 1 (MONTMUL), START
    movs r1, #1
    movs r2, #0
    movs r3, #{OPS}
"""

TAIL = """
done1:
    subs r3, #1
    bne again
    ldr r0, =turns
    str r2, [r0]
    movs r0, #0x18
    ldr r1, =0x20026
    bkpt 0xab
    .ltorg
    .bss
    .balign 4
    .global turns
turns: .space 4
"""


def _poll(first_extra: str = "") -> str:
    """The unrolled poll at ``poll`` (``first_extra`` after its first load)."""
    return f"""
poll:
    ldr r0, [r5]
    {first_extra}
    tst r0, r6
    beq done1
    ldr r0, [r5]
    tst r0, r6
    beq done1
mid:
    ldr r0, [r5]
    tst r0, r6
    beq done1
    ldr r0, [r5]
    tst r0, r6
    bne poll
"""


IMAGES = {
    # START, then on into the poll in the same block
    "self": HEAD + "again:\n    str r7, [r4]\n" + _poll() + TAIL,
    # the same poll reads r2 before writing it (mov r2, r2): its registers are compared
    "reads-first": HEAD + "again:\n    str r7, [r4]\n" + _poll("mov r2, r2") + TAIL,
    # the same poll counts its turns in r2 (written from its own value each iteration)
    "counter": HEAD + "again:\n    str r7, [r4]\n" + _poll("adds r2, r2, r1") + TAIL,
    # START, then a jump into the poll's third block
    "mid-entry": HEAD + "again:\n    str r7, [r4]\n    b mid\n" + _poll() + TAIL,
    # the poll's first block reads SysTick's CVR (served by Python: it counts down by
    # itself) and leaves when it falls 100 below its value at START (45 the first time),
    # long before the PKA is done; the block that holds START also holds that first
    # block's instructions
    "python-read": HEAD + """
    ldr r0, =0xE000E014     @ SysTick: RVR = 2^24 - 1, CVR = 0, CSR = ENABLE | CLKSOURCE
    ldr r1, =0xFFFFFF
    str r1, [r0]
    movs r1, #0
    str r1, [r0, #4]
    ldr r0, =0xE000E010
    movs r1, #5
    str r1, [r0]
    ldr r2, =0xE000E018     @ CVR
    movs r0, #45            @ the first operation: left after 3 iterations, as the loop's
    mov r9, r0              @ verdict is made (before two iterations differ: not trusted)
again:
    ldr r1, [r2]            @ the bound: CVR now, less r9
    mov r0, r9
    subs r1, r1, r0
    mov r8, r1
    str r7, [r4]
poll:
    ldr r1, [r2]
    cmp r1, r8
    blo left
    ldr r0, [r5]
    tst r0, r6
    beq done1
    ldr r0, [r5]
    tst r0, r6
    beq done1
    ldr r0, [r5]
    tst r0, r6
    bne poll
left:
    ldr r0, [r5]            @ the rest of the operation
    tst r0, r6
    bne left
    movs r0, #100           @ the later ones: after about 5
    mov r9, r0
""" + TAIL,
}


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> dict[str, Path]:
    if U.assembler() is None:
        pytest.skip("no ARM assembler (pip package ziglang, or arm-none-eabi-gcc)")
    d = tmp_path_factory.mktemp("selfpoll")
    return {name: U.assemble(source, d, name.replace("-", "_")) for name, source in IMAGES.items()}


class _Waits(Observer):
    """The PKA's busy SR reads before the first fast-forward of each operation (every
    busy read of it when it is not fast-forwarded)."""

    def __init__(self) -> None:
        self.waits: list[int] = []
        self._open = False

    def events(self, batch) -> None:
        for e in batch:
            if e.kind == Kind.PKA_START:
                self.waits.append(0)
                self._open = True
            elif e.kind == Kind.PKA_POLL and self._open:
                self.waits[-1] += 1
            elif e.kind == Kind.SPIN:
                self._open = False


def _run(make_machine, path: Path, fast: bool = True, observe: bool = True) -> tuple[tuple, list[int]]:
    m = make_machine()
    m.load(path)
    m.fast_paths = fast
    waits = _Waits()
    if observe:
        m.observe(waits)
    r = m.run(max_cycles=10**7)
    turns = int.from_bytes(m.read_symbol("turns", 4), "little")
    pka = next(dev.stats() for dev in m.peripherals.values() if "busy_cycles" in dev.stats())
    return (r.reason, r.exit_code, r.cycles, r.instructions, turns, pka["operations"]), waits.waits


# ------------------------------------------------------------------ the verdict


def _code(*halfwords: int) -> bytes:
    return b"".join(h.to_bytes(2, "little") for h in halfwords)


# ldr r0, [r5]; tst r0, r6; beq +n (out): one block of the unrolled poll
_LDR, _TST = 0x6828, 0x4230


def test_unrolled_poll_is_self_contained():
    # four blocks, the exits forward past the loop, the last block's bne back to the start
    code = _code(_LDR, _TST, 0xD008, _LDR, _TST, 0xD005, _LDR, _TST, 0xD002, _LDR, _TST, 0xD1F3)
    assert loop_self_contained(code)


def test_poll_whose_exits_branch_back_before_its_start_is_self_contained():
    # clang's other shape (xrsa_win crt_exp): beq to code before the loop, bne back
    code = _code(_LDR, _TST, 0xD0B1, _LDR, _TST, 0xD0AE, _LDR, _TST, 0xD0AB, _LDR, _TST, 0xD1F3)
    assert loop_self_contained(code)


def test_loop_that_counts_in_a_register_is_not_self_contained():
    assert not loop_self_contained(_code(0x3901, 0xD1FD))  # subs r1, #1; bne start


def test_loop_that_reads_a_flag_before_writing_it_is_not_self_contained():
    # ldr r0, [r5]; adcs r0, r0 (reads C); cmp r0, #1 (writes C); bne start
    assert not loop_self_contained(_code(_LDR, 0x4140, 0x2801, 0xD1FB))


def test_loop_with_a_branch_inside_its_code_is_not_self_contained():
    # ldr r0, [r5]; tst r0, r6; beq +0 (to the bne, inside the loop); bne start
    assert not loop_self_contained(_code(_LDR, _TST, 0xD0FF, 0xD1FB))


def test_loop_that_writes_pc_is_not_self_contained():
    assert not loop_self_contained(_code(_LDR, 0x4687, 0xD1FC))  # ldr; mov pc, r0; bne start


_LOOP_OPS = [h for h in range(0x10000) if h >> 11 < 0x1D and idle_ok16(h) and not 0xD000 <= h < 0xE800]


@settings(max_examples=400, deadline=None)
@given(body=st.lists(st.sampled_from(_LOOP_OPS) | st.sampled_from([_LDR, _TST, 0x6800, 0x4008, 0x2800]),
                     min_size=0, max_size=10),
       exits=st.lists(st.tuples(st.integers(0, 10), st.integers(0, 13), st.integers(-128, 127)), max_size=3),
       last_cond=st.integers(0, 14))
def test_native_verdict_on_self_contained_loops_equals_pythons(body, exits, last_cond):
    """idle.c self_contained (pk_self_contained) and cycles.loop_self_contained give one
    answer on any loop of 16-bit idle instructions with B<cond> exits and a back edge."""
    hws = list(body)
    for at, cond, off in exits:
        hws.insert(min(at, len(hws)), 0xD000 | cond << 8 | (off & 0xFF))
    n = len(hws) + 1
    back = -(2 * (n - 1) + 4) // 2  # to the start
    hws.append((0xE000 | (back & 0x7FF)) if last_cond == 14 else (0xD000 | last_cond << 8 | (back & 0xFF)))
    arr = (ctypes.c_uint16 * n)(*hws)
    native = load().pk_self_contained(arr, ctypes.c_uint32(n))
    assert bool(native) == loop_self_contained(_code(*hws))


def test_native_verdict_equals_pythons_on_every_idle_instruction_in_a_loop_of_its_own():
    """Each 16-bit instruction an idle loop may hold, alone before a back edge (b, then
    bne, which reads Z) and twice: one answer from idle.c and from Python."""
    lib = load()
    for hw in _LOOP_OPS:
        for hws in ([hw, 0xE7FD], [hw, 0xD1FD], [hw, hw, 0xE7FC]):
            arr = (ctypes.c_uint16 * len(hws))(*hws)
            assert bool(lib.pk_self_contained(arr, ctypes.c_uint32(len(hws)))) == loop_self_contained(_code(*hws)), \
                [hex(h) for h in hws]


# ------------------------------------------------------------------ the runs


def test_self_contained_poll_entered_mid_block_is_skipped_after_one_iteration(make_machine, images):
    """The first iteration is the entry block's load (after START) and the three blocks
    after it: the loop is skipped when it comes round to its start, 4 busy reads."""
    outcome, waits = _run(make_machine, images["self"])
    assert outcome[:2] == (StopReason.EXIT, 0)
    assert len(waits) == OPS
    assert waits[2:] == [ITERATION_BLOCKS] * (OPS - 2)  # (the first two: the loop's first encounter)


def test_poll_that_reads_a_register_before_writing_it_is_skipped_only_after_its_registers_compare(
        make_machine, images):
    """Not self-contained: skipped as before, when the registers at two visits of its
    entry point are equal, one block later than the self-contained poll."""
    _, waits = _run(make_machine, images["reads-first"])
    assert waits[2:] == [ITERATION_BLOCKS + 1] * (OPS - 2)


def test_poll_that_counts_its_turns_is_not_skipped(make_machine, images):
    fast, waits = _run(make_machine, images["counter"])
    slow, _ = _run(make_machine, images["counter"], fast=False)
    assert fast == slow
    assert fast[4] > 10 * OPS  # turns counted: every iteration ran
    assert sum(waits) > fast[4]


def test_poll_entered_in_its_middle_is_not_skipped_after_the_partial_iteration(make_machine, images):
    """Jumped into at its third block: the two blocks to its end are no whole iteration;
    the one from its start after them is."""
    _, waits = _run(make_machine, images["mid-entry"])
    assert waits[2:] == [2 + ITERATION_BLOCKS] * (OPS - 2)


def test_poll_whose_first_block_reads_a_python_device_is_not_skipped_from_its_entry_block(make_machine, images):
    """The entry block made a read served by Python (the loop's own, in its first
    instructions): the iteration seen from there is not taken as whole, and the loop,
    which reads CVR in every iteration, is never skipped: it leaves when CVR falls, at
    the same cycle as without fast paths."""
    fast, _ = _run(make_machine, images["python-read"])
    slow, _ = _run(make_machine, images["python-read"], fast=False)
    assert fast[:2] == (StopReason.EXIT, 0)
    assert fast == slow


@pytest.mark.parametrize("image", sorted(IMAGES))
def test_poll_image_counts_the_same_with_and_without_fast_paths(make_machine, images, image):
    fast, _ = _run(make_machine, images[image], observe=False)
    slow, _ = _run(make_machine, images[image], fast=False, observe=False)
    assert fast[:2] == (StopReason.EXIT, 0)
    assert fast == slow


CHILD = r"""
import io, json, sys
from pkasim.chip.config import load_config
from pkasim.core.machine import Machine
from pkasim.native import engine
out = []
for path in json.loads(sys.argv[1]):
    m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(path)
    r = m.run(max_cycles=10**7)
    out.append([r.reason.value, r.exit_code, r.cycles, r.instructions,
                int.from_bytes(m.read_symbol("turns", 4), "little")])
print(json.dumps({"engine": engine.selected(), "runs": out}))
"""


def test_poll_images_count_the_same_on_the_stock_engine(images):
    """The same counts on the stock wheel (PKASIM_ENGINE=stock) as on pkasim's engine."""
    paths = [str(images[name]) for name in sorted(IMAGES)]
    got = {}
    for engine in ("stock", "auto"):
        done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(paths)], capture_output=True, text=True,
                              env={**os.environ, "PKASIM_ENGINE": engine}, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
        got[engine] = result["runs"]
    assert got["stock"] == got["auto"]
