"""Device registers (a region of uc_mmio_map) as the engine serves them: an aligned
access that no memory hook watches goes straight to the region's callback (engine
patch 29, docs/engine.md), any other access takes Unicorn's full path. Either way the
callback sees the same offsets, sizes and values, and a memory hook sees every access
it covers. Each engine runs in its own process (PKASIM_ENGINE is read once)."""

from __future__ import annotations

import pytest
from test_engine_exception_path import BARE_CORE, _child

# A device at 0x40000000: reads return 0x11223344 >> (8 * (offset % 4)), masked to the
# access size; writes are logged. The code stores a word, a halfword and a byte, loads
# a word, a halfword and a byte, then stops.
DEVICE = BARE_CORE + r"""
import sys
from unicorn import UC_HOOK_MEM_READ, UC_HOOK_MEM_WRITE, UC_HOOK_MEM_READ_PROT, UcError
code = bytes.fromhex(
    "0a4c"      # 0x00 ldr r4, [pc, #40]   (0x40000000)
    "2560"      # 0x02 str r5, [r4, #0]
    "a580"      # 0x04 strh r5, [r4, #4]
    "a571"      # 0x06 strb r5, [r4, #6]
    "2068"      # 0x08 ldr r0, [r4, #0]
    "a188"      # 0x0a ldrh r1, [r4, #4]
    "a279"      # 0x0c ldrb r2, [r4, #6]
    "00bf"      # 0x0e nop (the end of the run)
) + bytes(0x2C - 0x10) + (0x40000000).to_bytes(4, "little")
log = []
def read(uc, offset, size, user):
    log.append(["read", offset, size])
    return (0x11223344 >> (8 * (offset % 4))) & ((1 << (8 * size)) - 1)
def write(uc, offset, size, value, user):
    log.append(["write", offset, size, value])
uc = bare(code)
mode = sys.argv[1]
uc.mmio_map(0x40000000, 0x1000, None if mode == "write-only" else read, None, write, None)
hooks = []
if mode == "hooked":
    uc.hook_add(UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE,
                lambda uc, kind, addr, size, value, user: hooks.append([addr, size]), begin=0x40000000, end=0x40000fff)
uc.reg_write(A.UC_ARM_REG_R5, 0xA1B2C3D4)
error = None
try:
    uc.emu_start(1, 0x0e)
except UcError as exc:
    error = str(exc)
print(json.dumps({"engine": engine.selected(), "log": log, "hooks": hooks, "error": error,
                  "r": [uc.reg_read(A.UC_ARM_REG_R0), uc.reg_read(A.UC_ARM_REG_R1), uc.reg_read(A.UC_ARM_REG_R2)]}))
"""

CALLS = [["write", 0, 4, 0xA1B2C3D4], ["write", 4, 2, 0xC3D4], ["write", 6, 1, 0xD4],
         ["read", 0, 4], ["read", 4, 2], ["read", 6, 1]]


def _run(choice: str, mode: str) -> dict:
    return _child(DEVICE.replace("sys.argv[1]", repr(mode)), choice)


@pytest.mark.parametrize("choice", ["stock", "patched"])
def test_a_device_callback_sees_each_access_with_its_offset_size_and_value(choice):
    got = _run(choice, "plain")
    assert (got["engine"], got["log"], got["error"]) == (choice, CALLS, None)
    assert got["r"] == [0x11223344, 0x3344, 0x22]


@pytest.mark.parametrize("choice", ["stock", "patched"])
def test_a_memory_hook_over_a_device_sees_every_access_and_the_device_still_serves_it(choice):
    got = _run(choice, "hooked")
    assert (got["log"], got["error"]) == (CALLS, None)
    assert got["hooks"] == [[0x40000000, 4], [0x40000004, 2], [0x40000006, 1],
                            [0x40000000, 4], [0x40000004, 2], [0x40000006, 1]]


@pytest.mark.parametrize("choice", ["stock", "patched"])
def test_a_read_of_a_device_without_a_read_callback_faults_as_a_protection_error(choice):
    got = _run(choice, "write-only")
    assert got["log"] == CALLS[:3]
    assert "UC_ERR_READ_PROT" in got["error"]
