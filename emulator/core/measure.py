"""One function call measured inside a whole run: what the bench jobs of every workload
(pkasim.rsa, pkasim.ecc) report.

The firmware runs from reset to its end in one run; a call probe (Machine.probe_call)
marks the function's first instruction and the address it returns to without stopping
there. The cycles, instructions, PKA busy time and PKA operations between the two marks
are the function's; the run goes on to the end so the firmware can check and report its
result.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pkasim.base.errors import PkasimError
from pkasim.core.machine import Machine
from pkasim.core.results import ProbeState, RunResult, StopReason


@dataclass
class JobResult:
    """One bench job's row, whatever the workload: what the bench table, its JSON and
    its chart read (pkasim.rsa.bench and pkasim.ecc.bench fill it; the ECC row adds
    its own fields)."""

    job: str
    label: str
    image: str
    nbits: int
    engine: str
    verified: bool
    cycles: int
    instructions: int
    modeled_ms: float
    ops_per_second: float
    firmware_ms: int | None
    pka_operations: dict[str, int] = field(default_factory=dict)
    pka_busy_cycles: int = 0
    pka_busy_share: float = 0.0
    cpu_only_share: float = 1.0
    wall_seconds: float = 0.0  # host time of the whole run, reset to exit (not the image load)
    efficiency: float = 0.0  # bits of result per 1000 cycles (Victor's measure): nbits * 1000 / cycles


@dataclass
class CallMeasure:
    cycles: int
    instructions: int
    pka_busy_cycles: int
    pka_operations: dict[str, int]
    end: RunResult  # how the whole run ended
    wall_seconds: float  # host time of the whole run, from reset to its end


def measure_call(m: Machine, function: str, image: str, max_cycles: int,
                 progress: Callable[[int], None] | None = None) -> CallMeasure:
    """Run a loaded machine to its end, measuring the first call of ``function``;
    ``image`` names the firmware in errors. One run with a call probe
    (Machine.probe_call): the counts and the PKA's at the call's entry and return are
    taken there without a stop. A call the probe cannot follow to its return stops the
    run at its entry; that call is measured as before the probe, with a breakpoint at
    the return address and two runs more. ``max_cycles`` bounds each run (the one run,
    or each of those three)."""
    pka = m.peripherals.get("pka")
    wall = time.perf_counter()
    counts: list[tuple[int, dict[str, int]]] = []

    def at_mark(_: int) -> None:
        counts.append((pka.busy_total, dict(pka.operations)) if pka is not None else (0, {}))

    m.probe_call(function, at_mark)
    try:
        end = m.run(max_cycles=max_cycles, progress=progress)
        probe = m.call_probe()
    finally:
        m.end_probe()
    if probe.state == ProbeState.DONE:
        (busy0, ops0), (busy1, ops1) = counts
        return CallMeasure(probe.return_cycles - probe.entry_cycles,
                           probe.return_instructions - probe.entry_instructions, busy1 - busy0,
                           {k: v - ops0.get(k, 0) for k, v in ops1.items()}, end, time.perf_counter() - wall)
    if probe.state == ProbeState.WAITING:
        raise PkasimError(f"{image}: never reached {function} ({end.message or end.reason.value})")
    if probe.state == ProbeState.IN_CALL:
        raise PkasimError(f"{image}: {function} did not return ({end.message or end.reason.value})")
    # ProbeState.STOPPED: at the entry, as a run with until=function stops there
    c0, i0 = m.cycles, m.instructions
    busy0 = pka.busy_total if pka is not None else 0
    ops0 = dict(pka.operations) if pka is not None else {}
    ret = m.reg("lr") & ~1
    m.add_breakpoint(ret)
    done = m.run(max_cycles=max_cycles, progress=progress)
    if done.reason != StopReason.BREAKPOINT:
        raise PkasimError(f"{image}: {function} did not return ({done.message or done.reason.value})")
    c1, i1 = m.cycles, m.instructions
    busy = (pka.busy_total - busy0) if pka is not None else 0
    ops = {k: v - ops0.get(k, 0) for k, v in pka.operations.items()} if pka is not None else {}
    m.remove_breakpoint(ret)
    end = m.run(max_cycles=max_cycles, progress=progress)
    return CallMeasure(c1 - c0, i1 - i0, busy, ops, end, time.perf_counter() - wall)
