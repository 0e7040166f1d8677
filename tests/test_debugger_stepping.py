"""One instruction forwards and backwards from any stop (docs/debugger.md, "Stepping
one instruction"): ``stepi`` executes exactly one instruction (or one exception
entry) even on code a run has already translated, and ``reverse-stepi`` comes back
to exactly the boundary before the last instruction, with the registers, memory and
cycle count a fresh run has there. The references are fresh machines that run (never
step) and note the state when they pass the position in question."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from stepping_util import loop_branch, passes, starts_after

from emulator.config import load_config
from emulator.debugger.engine import Debugger
from emulator.machine import Machine

PKASIM = Path(sys.executable).with_name("pkasim")
WFI, WFE = 0xBF30, 0xBF20


def state(m: Machine) -> dict:
    """What a stop is compared on: position, registers, SRAM, PKA RAM, sleeping."""
    pka = m.peripherals.get("pka")
    sram = m.config.memory["sram"]
    return {"position": (m.instructions, m.cycles), "registers": m.registers(),
            "sram": bytes(m.read_memory(sram.base, sram.size)), "pka_ram": bytes(pka.ram) if pka else b"",
            "sleeping": m.core.sleeping}


def differences(got: dict, want: dict) -> list[str]:
    out = []
    for key, value in want.items():
        if got[key] == value:
            continue
        if key == "registers":
            out += [f"{r} 0x{got[key][r]:x} (want 0x{v:x})" for r, v in value.items() if got[key][r] != v]
        elif key in ("sram", "pka_ram"):
            at = next(i for i, (a, b) in enumerate(zip(got[key], value)) if a != b)
            out.append(f"{key} differs from offset 0x{at:x}")
        else:
            out.append(f"{key} {got[key]} (want {value})")
    return out


def fresh(elf_path: Path) -> Machine:
    m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(elf_path)
    return m


def scripted(elf_path: Path, commands: list[str]) -> list[tuple[str, int, int, int]]:
    """Each command's stop under ``pkasim debug --commands``: (command, PC, cycles,
    instructions)."""
    proc = subprocess.run([str(PKASIM), "debug", str(elf_path), "--commands", "-"], input="\n".join(commands) + "\n",
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stops, command, pc = [], None, None
    for line in proc.stdout.splitlines():
        if line.startswith("(pkasim) "):
            command, pc = line[9:], None
        elif (found := re.match(r"(?:Breakpoint \d+, )?0x([0-9a-f]{8}) in ", line)) and pc is None:
            pc = int(found.group(1), 16)
        elif found := re.match(r"cycles ([\d,]+) \([+-][\d,]+\)  instructions ([\d,]+)", line):
            stops.append((command, pc, int(found.group(1).replace(",", "")), int(found.group(2).replace(",", ""))))
    return stops


# ---------------------------------------------------------------------------------------------- the reported cases

@pytest.fixture(scope="module")
def loop_stop(elf):
    """rsa_soft at the first pass of bn_muladdc_thumb's loop branch (a run stopped at
    a breakpoint there), and the instructions a run executes next."""
    m = fresh(elf("rsa_soft"))
    addr = loop_branch(m)
    m.add_breakpoint(addr)
    assert m.run(max_cycles=10**8).reason.value == "breakpoint"
    m.remove_breakpoint(addr)
    stop = (m.instructions, m.cycles, m.pc)
    return addr, stop, starts_after(m, 40)


def test_stepi_after_a_continue_executes_one_instruction_of_code_the_run_translated(elf, loop_stop):
    addr, (n, cycles, _), nxt = loop_stop
    stops = scripted(elf("rsa_soft"), [f"break *0x{addr:x}", "continue", "stepi", "stepi"])
    assert [s[0] for s in stops] == ["continue", "stepi", "stepi"]
    assert stops[0][1:] == (addr, cycles, n)
    assert [s[1:] for s in stops[1:]] == [(a, c, k) for k, c, a in nxt[1:3]]


def test_reverse_stepi_after_cycle_n_goes_back_exactly_one_instruction(elf, loop_stop):
    """`cycle N` runs close to N, then steps: the steps go through the loop the run
    translated, and going back undoes one instruction, not one step's worth of loop."""
    _, (n, cycles, _), nxt = loop_stop
    target = cycles + 5
    first = next(i for i, (_, c, _) in enumerate(nxt) if c >= target)
    stops = scripted(elf("rsa_soft"), [f"cycle {target}", "reverse-stepi", "stepi"])
    want = [nxt[first], nxt[first - 1], nxt[first]]
    assert [s[1:] for s in stops] == [(a, c, k) for k, c, a in want]


def test_reverse_stepi_after_an_interrupt_in_a_fast_forwarded_loop_goes_back_one_iteration(elf):
    """spin.elf's `while (1);` is fast-forwarded (idle.c) between SysTick ticks; the
    user's Ctrl-C ends the run between slices, inside it. Going back re-executes the
    last slice with an instruction hook, which no fast-forward may skip."""
    m = fresh(elf("spin"))
    d = Debugger(m, interval_cycles=10_000)
    d.interrupted = lambda: True
    assert d.execute("continue")[0] == "Interrupted"
    stop = state(m)
    back = d.execute("reverse-stepi")
    assert not back[0].startswith("error"), back
    assert m.instructions == stop["position"][0] - 1
    previous = state(m)
    ref = fresh(elf("spin"))
    n, cycle, registers = passes(ref, previous["registers"]["pc"], stop["position"][1])[-1]
    assert ((n, cycle), registers) == (previous["position"], previous["registers"])
    d.execute("stepi")
    assert not differences(state(m), stop)
