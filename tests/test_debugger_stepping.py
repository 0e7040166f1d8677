"""One instruction forwards and backwards from any stop (docs/debugger.md, "Stepping
one instruction"): ``stepi`` executes exactly one instruction (or one exception
entry) even on code a run has already translated, and ``reverse-stepi`` comes back
to exactly the boundary before the last instruction, with the registers, memory and
cycle count a fresh run has there. The references are fresh machines that run (never
step) and note the state when they pass the position in question."""

from __future__ import annotations

import io
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stepping_util import loop_branch, passes, starts_after

from pkasim.chip.config import load_config
from pkasim.core.machine import Machine
from pkasim.debugger.engine import Debugger

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


# ---------------------------------------------------------------------------------------------- the property

IMAGES = {  # image: (cycles the scenarios stay within, a symbol its code writes often)
    "rsa_soft": (1_000_000, "rr"),
    "xrsa": (2_000_000, "pka_done"),
    "systick": (300_000, "systick_count"),
    "spin": (140_000, "spin_flag"),
}
_VISITED: dict[str, list[int]] = {}


def visited(path: Path, name: str) -> list[int]:
    """Addresses the image executes within its horizon (run to random cycles, then a
    few steps at each: block starts and instructions inside blocks)."""
    if name not in _VISITED:
        rng = random.Random(name)
        m = fresh(path)
        found: set[int] = set()
        for at in sorted(rng.randrange(100, IMAGES[name][0] // 2) for _ in range(24)):
            if at > m.cycles and m.run(max_cycles=at - m.cycles).reason.value != "budget":
                break
            for _ in range(rng.randrange(1, 12)):
                found.add(m.pc)
                m.step()
        _VISITED[name] = sorted(found)
    return _VISITED[name]


class Session:
    """A debugger over a fresh machine, driven by (command, slices before the
    interrupt) pairs; the same pairs give the same history."""

    def __init__(self, path: Path, interval: int, watch_stop: str = "after") -> None:
        self.m = fresh(path)
        self.d = Debugger(self.m, interval_cycles=interval)
        self.m.watchpoint_stop = watch_stop  # "before": as the gdb server has it

    def do(self, command: str, interrupt_after: int = 0) -> list[str]:
        asked = [0]

        def interrupted() -> bool:
            asked[0] += 1
            return bool(interrupt_after) and asked[0] >= interrupt_after

        self.d.interrupted = interrupted
        try:
            return self.d.execute(command)
        finally:
            self.d.interrupted = lambda: False


def passing(path: Path, interval: int, watch_stop: str, commands: list, position: tuple[int, int],
            pc: int) -> dict | None:
    """The state a fresh session doing the same commands has when it passes
    ``position`` (noted, never stopped at: a hook at ``pc`` notes instruction starts,
    wrappers around the machine's step and run note where they begin and end)."""
    s = Session(path, interval, watch_stop)
    m = s.m
    seen: list[dict] = []

    def note(n: int, cycle: int) -> None:
        if (n, cycle) == position and not seen:
            seen.append(dict(state(m), position=position))

    step, run = m.step, m.run

    def noting_step():
        note(m.instructions, m.cycles)
        r = step()
        note(m.instructions, m.cycles)
        return r

    def noting_run(*args, **kwargs):
        note(m.instructions, m.cycles)
        r = run(*args, **kwargs)
        note(m.instructions, m.cycles)
        return r

    m.step, m.run = noting_step, noting_run
    hook = m.on_instructions(pc, pc + 2, lambda a, size, cycle, n: note(n, cycle))
    for command, k in commands:
        s.do(command, k)
    m.remove_instruction_hook(hook)
    return seen[0] if seen else None


def run_to(path: Path, interval: int, watch_stop: str, commands: list, pc: int, max_cycles: int) -> dict:
    """A fresh session does the same commands, then a plain run stopped before ``pc``."""
    s = Session(path, interval, watch_stop)
    for command, k in commands:
        s.do(command, k)
    s.m.run(max_cycles=max_cycles, until=pc)
    return state(s.m)


@st.composite
def scenarios(draw, elf) -> tuple:
    name = draw(st.sampled_from(sorted(IMAGES)))
    path = elf(name)
    horizon, written = IMAGES[name]
    interval = draw(st.sampled_from([10_000, 100_000, 1_000_000]))
    watch_stop = draw(st.sampled_from(["after", "before"]))
    commands: list[tuple[str, int]] = []
    if draw(st.booleans()):  # some code already run and stepped before the stop
        commands += [(f"cycle {draw(st.integers(100, horizon // 4))}", 0), ("stepi", 0)]
    kind = draw(st.sampled_from(["break", "watch", "cycle", "interrupt"]))
    if kind == "break":
        commands += [(f"break *0x{draw(st.sampled_from(visited(path, name))):x}", 0), ("continue", 0)]
    elif kind == "watch":
        commands += [(f"watch {written}", 0)] + [("continue", 0)] * draw(st.integers(1, 3))
    elif kind == "cycle":
        commands.append((f"cycle {draw(st.integers(horizon // 4 + 1, horizon))}", 0))
    else:  # the user's Ctrl-C, asked between the run's slices
        commands.append(("continue", draw(st.integers(1, max(1, horizon // interval)))))
    return path, interval, watch_stop, commands


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_stepi_and_reverse_stepi_move_exactly_one_instruction_from_any_stop(elf, data):
    path, interval, watch_stop, commands = data.draw(scenarios(elf))
    a = Session(path, interval, watch_stop)
    for command, k in commands:
        out = a.do(command, k)
        assert not out[0].startswith("error") or "not ahead" in out[0], (command, out)
    m = a.m
    stop = state(m)
    pc0 = stop["registers"]["pc"]

    out = a.do("stepi")
    if "nothing runs from here" in out[0]:
        return  # the firmware has ended
    after = state(m)
    n0, n1 = stop["position"][0], after["position"][0]
    entry = n1 == n0 and (after["registers"]["xpsr"] & 0x3F) != (stop["registers"]["xpsr"] & 0x3F)
    assert n1 == n0 + 1 or entry or stop["sleeping"], f"stepi from {stop['position']} to {after['position']}"
    if after["registers"]["pc"] != pc0:  # (a run to the PC it starts at would go round the loop first)
        ref = run_to(path, interval, watch_stop, commands, after["registers"]["pc"],
                     after["position"][1] - stop["position"][1] + 100)
        if int.from_bytes(m.read_memory(pc0, 2), "little") in (WFI, WFE) and not stop["sleeping"]:
            ref["sleeping"] = after["sleeping"]  # a run that stops right after a WFI is not asleep
        assert differences(after, ref) == [], "stepi differs from a run"

    a.do("reverse-stepi")
    assert differences(state(m), stop) == [], "reverse-stepi after stepi"

    a.do("reverse-stepi")
    back = state(m)
    n, cycles = back["position"]
    assert n in (n0 - 1, n0) and (n, cycles) < stop["position"], f"back from {stop['position']} to {(n, cycles)}"
    ref = passing(path, interval, watch_stop, commands, back["position"], back["registers"]["pc"])
    assert ref is not None, f"the history never passed {back['position']}"
    assert differences(back, ref) == [], "reverse-stepi differs from the history"

    a.do("stepi")
    if m.core.sleeping and not back["sleeping"]:
        return  # a WFI: the next step sleeps and wakes and executes, where the run stopped awake
    if state(m)["position"][0] == n0 and state(m)["position"] < stop["position"]:
        a.do("stepi")  # the instruction, then the exception entry the run took after it
    if not stop["sleeping"]:
        assert differences(state(m), stop) == [], "stepi after reverse-stepi"
