"""The engine's exception path (engine patches 25 and 27, docs/engine.md): the M-profile
registers an exception entry or return changes, read and written in one call; how a run
goes on after a hook writes PC or stops it, and after a CPS. Each engine runs in its own
process (the engine is chosen once per process, by PKASIM_ENGINE)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ENGINE_PROBLEM = r"""
from pkasim.native import engine
engine.require()
"""


def _engine_problem() -> str | None:
    """Why pkasim's engine cannot be used here (not built, refused), or None."""
    done = subprocess.run([sys.executable, "-c", ENGINE_PROBLEM], env={**os.environ, "PKASIM_ENGINE": "patched"},
                          capture_output=True, text=True, check=False)
    return done.stderr.strip().splitlines()[-1] if done.returncode else None


def _child(code: str, choice: str) -> dict:
    if choice == "patched" and (problem := _engine_problem()):
        pytest.skip(f"pkasim's engine is not available here: {problem}")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PKASIM_ENGINE": choice},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# A Cortex-M0 engine, initialised, with uc_arm_m_exc_read/_write declared.
M_EXC_SETUP = r"""
import ctypes, json
from pkasim.core import cpu  # chooses the engine (PKASIM_ENGINE) before Unicorn is used
from unicorn import Uc, UC_ARCH_ARM, UC_MODE_THUMB, UC_MODE_MCLASS
from unicorn import arm_const as A
from unicorn.unicorn_py3 import unicorn as binding
class MExc(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in ("xpsr", "control", "primask", "msp", "psp", "pc")]
lib = binding.uclib
for fn in (lib.uc_arm_m_exc_read, lib.uc_arm_m_exc_write):
    fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(MExc)]
uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
uc.ctl_set_cpu_model(A.UC_CPU_ARM_CORTEX_M0)
uc.mem_map(0, 0x1000)
NAMES = {"xpsr": A.UC_ARM_REG_XPSR, "control": A.UC_ARM_REG_CONTROL, "primask": A.UC_ARM_REG_PRIMASK,
         "msp": A.UC_ARM_REG_MSP, "psp": A.UC_ARM_REG_PSP, "pc": A.UC_ARM_REG_PC, "sp": A.UC_ARM_REG_SP,
         "ipsr": A.UC_ARM_REG_IPSR}
def regs():
    return {name: uc.reg_read(regid) for name, regid in NAMES.items()}
def write(**fields):
    m = MExc(**fields)
    assert lib.uc_arm_m_exc_write(uc._uch, ctypes.byref(m)) == 0
def read():
    m = MExc()
    assert lib.uc_arm_m_exc_read(uc._uch, ctypes.byref(m)) == 0
    return {name: getattr(m, name) for name, _ in MExc._fields_}
"""

# Written at once, the state reads back register by register as the architecture
# places it: thread mode with SPSEL set runs on PSP, handler mode on MSP whatever
# SPSEL held; MSP and PSP ignore bits [1:0]; PC's bit 0 is the Thumb state.
M_EXC_WRITE = M_EXC_SETUP + r"""
out = {}
write(xpsr=0x81000000, control=2, msp=0x20000803, psp=0x20000402, pc=0x101)
out["thread_psp"] = regs()
write(xpsr=0x01000005, control=0, msp=0x200007E0, psp=0x20000400, pc=0x201)
out["handler"] = regs()
write(xpsr=0x41000000, control=0, msp=0x20000800, psp=0x20000400, pc=0x301)
out["thread_msp"] = regs()
print(json.dumps(out))
"""


def test_exception_registers_written_at_once_read_back_as_the_architecture_places_them():
    got = _child(M_EXC_WRITE, "patched")
    assert got["thread_psp"] == {"xpsr": 0x81000000, "control": 2, "primask": 0, "msp": 0x20000800,
                                 "psp": 0x20000400, "pc": 0x100, "sp": 0x20000400, "ipsr": 0}
    assert got["handler"] == {"xpsr": 0x01000005, "control": 0, "primask": 0, "msp": 0x200007E0,
                              "psp": 0x20000400, "pc": 0x200, "sp": 0x200007E0, "ipsr": 5}
    assert got["thread_msp"] == {"xpsr": 0x41000000, "control": 0, "primask": 0, "msp": 0x20000800,
                                 "psp": 0x20000400, "pc": 0x300, "sp": 0x20000800, "ipsr": 0}


# Read at once, the registers are what uc_reg_read returns for each (set register by
# register, in thread mode on PSP with PRIMASK set).
M_EXC_READ = M_EXC_SETUP + r"""
uc.reg_write(A.UC_ARM_REG_MSP, 0x20000800)
uc.reg_write(A.UC_ARM_REG_CONTROL, 2)
uc.reg_write(A.UC_ARM_REG_PSP, 0x20000400)
uc.reg_write(A.UC_ARM_REG_PRIMASK, 1)
uc.reg_write(A.UC_ARM_REG_XPSR, 0x61000000)
uc.reg_write(A.UC_ARM_REG_PC, 0x41)
r = regs()
print(json.dumps({"at_once": read(), "one_by_one": {k: r[k] for k in ("xpsr", "control", "primask", "msp", "psp", "pc")}}))
"""


def test_exception_registers_read_at_once_are_what_reading_them_one_by_one_gives():
    got = _child(M_EXC_READ, "patched")
    assert got["at_once"] == got["one_by_one"]
    assert (got["at_once"]["control"], got["at_once"]["primask"], got["at_once"]["psp"]) == (2, 1, 0x20000400)



# A Cortex-M0 core with ``code`` at address 0, for the children below.
BARE_CORE = r"""
import json
from pkasim.core import cpu  # chooses the engine (PKASIM_ENGINE) before Unicorn is used
from pkasim.native import engine
from unicorn import Uc, UC_ARCH_ARM, UC_MODE_THUMB, UC_MODE_MCLASS, UC_HOOK_BLOCK, UC_HOOK_CODE
from unicorn import arm_const as A

def bare(code):
    uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
    uc.ctl_set_cpu_model(A.UC_CPU_ARM_CORTEX_M0)
    uc.mem_map(0, 0x1000)
    uc.mem_write(0, code)
    return uc
"""

# uc_emu_stop from a code hook, with no PC written: the exit check after the hook ends
# the run before the hooked instruction, PC restored to it.
STOP_CHILD = BARE_CORE + r"""
code = bytes.fromhex(
    "0120"  # 0x00 movs r0, #1
    "0221"  # 0x02 movs r1, #2   <- the code hook stops the run here
    "0322"  # 0x04 movs r2, #3
    "00bf"  # 0x06 nop (the end of the run)
)
uc = bare(code)
def stop(uc, address, size, user):
    uc.emu_stop()
uc.hook_add(UC_HOOK_CODE, stop, begin=2, end=2)
uc.emu_start(1, 0x06)
print(json.dumps({"engine": engine.selected(), "pc": uc.reg_read(A.UC_ARM_REG_PC),
                  "r": [uc.reg_read(A.UC_ARM_REG_R0), uc.reg_read(A.UC_ARM_REG_R1), uc.reg_read(A.UC_ARM_REG_R2)]}))
"""


@pytest.mark.parametrize("choice", ["stock", "patched"])
def test_an_emu_stop_from_a_code_hook_ends_the_run_before_the_hooked_instruction(choice):
    got = _child(STOP_CHILD, choice)
    assert (got["engine"], got["pc"], got["r"]) == (choice, 2, [1, 0, 0])


# A PC written from a block hook: the block does not run, the run goes on at the new PC
# (the exit check at the block's start leaves it; patch 21 keeps the run going).
BLOCK_PC_CHILD = BARE_CORE + r"""
code = bytes.fromhex(
    "0120"  # 0x00 movs r0, #1
    "01e0"  # 0x02 b 0x08        (ends the block)
    "00bf00bf"
    "0221"  # 0x08 movs r1, #2   <- the block hook sends PC to 0x10
    "00bf00bf00bf"
    "0322"  # 0x10 movs r2, #3
    "00bf"  # 0x12 nop (the end of the run)
)
uc = bare(code)
seen = []
def block(uc, address, size, user):
    seen.append(address)
    if address == 8:
        uc.reg_write(A.UC_ARM_REG_PC, 0x10 | 1)
uc.hook_add(UC_HOOK_BLOCK, block)
uc.emu_start(1, 0x12)
print(json.dumps({"engine": engine.selected(), "pc": uc.reg_read(A.UC_ARM_REG_PC), "blocks": seen,
                  "r": [uc.reg_read(A.UC_ARM_REG_R0), uc.reg_read(A.UC_ARM_REG_R1), uc.reg_read(A.UC_ARM_REG_R2)]}))
"""


@pytest.mark.parametrize("choice", ["stock", "patched"])
def test_a_pc_written_from_a_block_hook_skips_the_block_and_goes_on_at_the_new_pc(choice):
    got = _child(BLOCK_PC_CHILD, choice)
    assert (got["engine"], got["pc"], got["blocks"], got["r"]) == (choice, 0x12, [0, 8, 0x10], [1, 0, 3])


# CPSID and CPSIE end their block and the run goes on at the next instruction with the
# new PRIMASK, its next block looked up (from the generated code since patch 27, unless
# an interrupt request is pending): the same blocks, registers and PRIMASK on both
# engines.
CPS_CHILD = BARE_CORE + r"""
code = bytes.fromhex(
    "72b6"  # 0x00 cpsid i
    "0120"  # 0x02 movs r0, #1
    "62b6"  # 0x04 cpsie i
    "0221"  # 0x06 movs r1, #2
    "72b6"  # 0x08 cpsid i
    "00bf"  # 0x0a nop (the end of the run)
)
uc = bare(code)
seen = []
def block(uc, address, size, user):
    seen.append([address, uc.reg_read(A.UC_ARM_REG_PRIMASK)])
uc.hook_add(UC_HOOK_BLOCK, block)
uc.emu_start(1, 0x0a)
print(json.dumps({"engine": engine.selected(), "pc": uc.reg_read(A.UC_ARM_REG_PC), "blocks": seen,
                  "primask": uc.reg_read(A.UC_ARM_REG_PRIMASK),
                  "r": [uc.reg_read(A.UC_ARM_REG_R0), uc.reg_read(A.UC_ARM_REG_R1)]}))
"""


@pytest.mark.parametrize("choice", ["stock", "patched"])
def test_a_cps_ends_its_block_and_the_run_goes_on_with_the_new_primask(choice):
    got = _child(CPS_CHILD, choice)
    assert (got["engine"], got["pc"], got["blocks"], got["primask"], got["r"]) == (
        choice, 0x0a, [[0, 0], [2, 1], [6, 0]], 1, [1, 2])
