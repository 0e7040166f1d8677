"""Where a peripheral access falls in its block (docs/cycle-model.md, "Peripheral
accesses"): the access lists of the blocks are cached, direct-mapped by start address
(codecache.c pk_code_accesses), and a block with more accesses than a list holds must
leave the list of the block sharing its slot as it was.

The image reads SysTick's current value in a small function A (four NOPs, then the
read: the read is seen four cycles into its block), calls a function B with more
register-addressed accesses than a list holds (70 stores, then a SysTick read), then
calls A again. B sits either where its list slot is A's (start 2 KiB above A's) or one
slot further; the instruction streams are otherwise the same, so A's two reads must be
the same number of cycles apart in both images.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import unaligned_cases as U

from pkasim.chip.config import load_config
from pkasim.core.machine import Machine

SOURCE = U.BARE_START + """    ldr r1, =0xE000E010     @ SysTick
    ldr r0, =0x00FFFFFF
    str r0, [r1, #4]        @ RVR
    movs r0, #5
    str r0, [r1, #0]        @ CSR: enabled, core clock
    ldr r3, =0x20000100
    bl fa
    mov r4, r0
    bl fb
    bl fa
    mov r5, r0
    .thumb_func
    .global done
done:
    b done
    .ltorg

    .balign 1024
    .thumb_func
fa:
    nop
    nop
    nop
    nop
    ldr r0, [r1, #8]        @ CVR, four cycles into the block
    bx lr

    .balign 1024
    .space 1024 + {shift}
    .thumb_func
fb:
    .rept 70
    str r2, [r3]
    .endr
    ldr r0, [r1, #8]
    bx lr
"""


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("access")
    # shift 0: B's start is A's + 2 KiB (the same slot); 4: the next slot but one
    return {shift: U.assemble_or_skip(SOURCE.replace("{shift}", str(shift)), d, f"access{shift}") for shift in (0, 4)}


def _reads(path: Path) -> tuple[int, int]:
    m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(path)
    m.run(until="done", max_cycles=10**6)
    return m.reg("r4"), m.reg("r5")


def test_a_block_with_more_accesses_than_a_list_holds_leaves_its_slot_neighbours_list_intact(images):
    first, second = _reads(images[0])
    first_apart, second_apart = _reads(images[4])
    assert first - second == first_apart - second_apart
