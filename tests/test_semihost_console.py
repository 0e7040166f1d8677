"""Semihosting's console output without a stop (docs/semihosting.md, "Console output
in the engine"): SYS_WRITEC and SYS_WRITE0 are kept natively during a run and written
out when it stops, before anything else reaches the console, so the bytes, their order
and every count are those of the path through Python (which a debugger's runs take).

The image writes, in this order: a line through SYS_WRITE0, a character through
SYS_WRITEC, a line through SYS_WRITE to handle 1 (Python's path), a string longer than
the native buffer through SYS_WRITE0 (Python's path), and a last line through
SYS_WRITE0; then exits through SYS_EXIT.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import unaligned_cases as U

from pkasim.chip.config import load_config
from pkasim.core.machine import Machine

LONG = 5000  # more than PK_SH_BUF (4096)

SOURCE = U.BARE_START + f"""    movs r0, #4
    ldr r1, =first
    bkpt 0xab
    movs r0, #3
    ldr r1, =char
    bkpt 0xab
    movs r0, #5
    ldr r1, =block
    bkpt 0xab
    movs r0, #4
    ldr r1, =long
    bkpt 0xab
    movs r0, #4
    ldr r1, =last
    bkpt 0xab
    movs r0, #0x18
    ldr r1, =0x20026
    bkpt 0xab
    b .
    .ltorg
    .balign 4
block: .word 1, middle, 7
first: .asciz "first\\n"
char: .ascii "c"
middle: .ascii "middle\\n"
last: .asciz "last\\n"
long: .fill {LONG}, 1, 0x78
    .byte 0
"""


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Path:
    return U.assemble_or_skip(SOURCE, tmp_path_factory.mktemp("console"), "console")


def _run(path: Path, *, debugger: bool) -> tuple[bytes, int, int, str]:
    out = io.BytesIO()
    m = Machine(load_config(), stdout=out, stderr=io.BytesIO())
    m.load(path)
    m.debugger_attached = debugger  # Python's path for every semihosting call
    r = m.run(max_cycles=10**7)
    return out.getvalue(), r.cycles, r.instructions, r.reason.value


def test_console_output_arrives_whole_and_in_order_with_what_python_writes(image):
    out, _, _, reason = _run(image, debugger=False)
    assert reason == "exit"
    assert out == b"first\nc" + b"middle\n" + b"x" * LONG + b"last\n"


def test_console_output_kept_natively_counts_as_the_path_through_python(image):
    assert _run(image, debugger=False) == _run(image, debugger=True)
