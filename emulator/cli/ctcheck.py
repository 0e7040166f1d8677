"""``pkasim ct-check FW.elf --secret SYMBOL ... --inputs DIR | --random N``: does the
firmware's timing depend on its secrets?

Runs the firmware once per input, each time with the secret symbols filled from that
input (as ``--load`` fills them), with emulator/native/cthash.c hashing the run's control flow
(blocks, idle loops, sleeps, exceptions), its memory access addresses and its PKA
operations (opcode, length, busy cycles). All runs agreeing (and ending at the same
cycle) means exit 0. Otherwise the first input that disagrees with the first one is
run again beside it, both recording only the window of events where their
checkpoints first differ, and the first differing event is reported: the instruction
(symbol+offset, source line from DWARF), what each run did there, and the two inputs.
Exit 1. docs/ct-check.md has the details and measured costs. With ``--apdus FILE`` a
run is a card session over USB instead of a run to exit (emulator/cli/ctsession.py).
"""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capstone import CS_ARCH_ARM, CS_MODE_THUMB, Cs
from rich.console import Console
from rich.table import Table

from pkasim.analysis import ctinputs
from pkasim.analysis.cthash import CK_SHIFT, STREAMS, CtHash, Digest, Event, Rec
from pkasim.analysis.srclines import SourceLines
from pkasim.base.errors import InputMissingError, LoadError, PkasimError, UsageError
from pkasim.chip.config import DEFAULT_CHIP, ChipConfig, load_config
from pkasim.chip.loader import Image, load_image
from pkasim.cli.common import DEFAULT_BUDGET_SECONDS, parse_int, read_file, setup_semihosting, symbol_file, write_text
from pkasim.cli.ctsession import read_apdus, run_session
from pkasim.cli.report import exit_code_for
from pkasim.core.machine import Machine
from pkasim.core.results import Stop, StopReason
from pkasim.rsa.rsakey import KEY_SIZE
from pkasim.usb.session import STATE_SYMBOL, read_state_file

STREAM_TITLES = {"flow": "control flow", "mem": "memory addresses", "pka": "PKA operations"}
STREAM_UNITS = {"flow": "events", "mem": "accesses", "pka": "operations"}
PKA_OPS = {1: "MONTMUL", 2: "MODADD", 3: "MODSUB", 4: "ADD", 5: "SUB"}


class RunDidNotFinish(PkasimError):
    """A run that did not end by itself: its own exit code (124 budget, 125 lockup)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.exit_code = code


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ct-check", help="check that control flow, memory addresses and PKA timing do not depend "
                                        "on secret inputs")
    p.add_argument("firmware", help="the ELF image to run")
    p.add_argument("--secret", metavar="SYMBOL[+OFFSET][=KIND:N]", type=ctinputs.parse_secret, action="append",
                   default=[], required=True,
                   help="an ELF symbol that holds a secret, from byte OFFSET of it (repeatable); KIND says how "
                        "--random fills it: bytes:N, rsa-key:BITS, rsa-msg:BITS (default: random bytes, the "
                        f"symbol's size); {ctinputs.TRNG}: the TRNG's seed (secrets the firmware draws from it)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--inputs", metavar="DIR",
                     help="one input per file of DIR (one secret) or per subdirectory holding a file per secret")
    src.add_argument("--random", metavar="N", type=int, help="N random inputs")
    p.add_argument("--seed", type=int, default=None, help="seed of the random bytes and messages (RSA keys "
                                                          "are always fresh)")
    p.add_argument("--save-inputs", metavar="DIR", help="write the inputs (--inputs layout) to DIR")
    p.add_argument("--config", default=None, help="chip file (YAML) or bundled chip name; default: "
                                                   f"{DEFAULT_CHIP}")
    p.add_argument("--max-cycles", type=parse_int, default=None,
                   help=f"stop each run after this many cycles (default: {DEFAULT_BUDGET_SECONDS} modeled seconds; "
                        "0 = no limit)")
    p.add_argument("--load", metavar="SYMBOL=FILE", type=symbol_file, action="append", default=[],
                   help="before each run, fill the object SYMBOL names with the bytes of FILE (repeatable)")
    p.add_argument("--host-dir", metavar="DIR", help="the firmware's host directory, as for run")
    p.add_argument("--apdus", metavar="FILE",
                   help="a card image: each run is a USB card session (enumeration, IccPowerOn, then these "
                        "APDUs, one hex line each) ending at the last answer, not a run to exit")
    p.add_argument("--state", metavar="FILE",
                   help="with --apdus: the card's state file (as pkasim card, apdu and sign write it), loaded "
                        "before each run; a secret at an offset in card_state is written over it")
    p.add_argument("--json", metavar="FILE", help="write the verdict as JSON ('-' for stdout)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only a divergence or an error")


@dataclass
class Run:
    """One run's outcome; a run stopped where it first differed from the reference is
    not ``complete`` (its counts are up to that point, its exit code unknown)."""

    input: ctinputs.Input
    digest: Digest
    cycles: int
    instructions: int
    exit_code: int | None
    status_words: list[int] | None = None  # a card session's (--apdus)

    @property
    def complete(self) -> bool:
        return self.digest.complete

    def agrees(self, other: Run) -> bool:
        return (self.complete and other.complete and
                (self.digest.hashes[3], self.digest.counts[3], self.cycles, self.status_words) ==
                (other.digest.hashes[3], other.digest.counts[3], other.cycles, other.status_words))


class Checker:
    """The runs of one ct-check: the image, the chip, the fixed inputs, the budget."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.config: ChipConfig = load_config(args.config) if args.config else load_config()
        self.image: Image = load_image(args.firmware, self.config)
        self.fixed: list[tuple[str, bytes]] = []
        if args.state is not None:
            if not args.apdus:
                raise UsageError("--state is the state file of a card image: give the session with --apdus")
            if not Path(args.state).exists():
                raise InputMissingError(f"{args.state}: no such file")
            size = self.image.extent(STATE_SYMBOL, self.config)[1]
            magic = Machine(self.config)
            magic.load(self.image)
            self.fixed.append((STATE_SYMBOL, read_state_file(Path(args.state), size,
                                                             magic.read_symbol(STATE_SYMBOL, 4, initial=True))))
        for symbol, path in args.load:
            _, room, _ = self.image.extent(symbol, self.config)
            self.fixed.append((symbol, read_file(path, room, f"the size of '{symbol}'")))
        if args.apdus and args.max_cycles is not None:
            raise UsageError("--max-cycles: a card session (--apdus) has its own limit, 10 s of host time a command")
        self.apdus: list[bytes] | None = read_apdus(args.apdus) if args.apdus else None
        self.rooms: dict[str, int] = {}
        for secret in args.secret:
            if secret.symbol == ctinputs.TRNG:
                if not any(hasattr(dev, "set_seed") for dev in Machine(self.config).peripherals.values()):
                    raise UsageError(f"--secret {ctinputs.TRNG}: the chip ({self.config.source}) has no random "
                                     "number generator")
                self.rooms[secret.name] = ctinputs.TRNG_SEED_BYTES
                continue
            _, size, _ = self.image.extent(secret.symbol, self.config)
            if secret.offset >= size:
                raise LoadError(f"{args.firmware}: --secret {secret}: offset {secret.offset:,} is past the end of "
                                f"'{secret.symbol}' ({size:,} bytes)")
            room = size - secret.offset
            self.rooms[secret.name] = room
            sec = self.image.section_of(self.image.symbol(secret.symbol).address)
            if sec is not None and sec.nobits:
                raise LoadError(f"{args.firmware}: '{secret.symbol}' is in {sec.name}, which the startup code "
                                "zeroes at reset: a secret must be initialised data (.data)")
            want = secret.size if secret.kind == "bytes" else (
                KEY_SIZE if secret.kind == "rsa-key" else (secret.size or 0) // 8)
            if want and want > room:
                where = f"'{secret.symbol}'" if not secret.offset else \
                    f"'{secret.symbol}' from offset {secret.offset:,}"
                raise LoadError(f"{args.firmware}: --secret {secret}: {want:,} bytes do not fit in "
                                f"{where} ({room:,} bytes)")
        budget = args.max_cycles
        if budget is None:
            budget = DEFAULT_BUDGET_SECONDS * self.config.core.clock_hz
        self.budget = budget or None
        self.lines: SourceLines | None = None

    def machine(self, inp: ctinputs.Input) -> Machine:
        m = Machine(self.config, stdout=io.BytesIO(), stderr=io.BytesIO(), stdin=None)
        m.load(self.image)
        setup_semihosting(m, self.args)
        for symbol, data in self.fixed:
            m.write_symbol(symbol, data)
        for secret in self.args.secret:
            data = inp.values[secret.name]
            if len(data) > self.rooms[secret.name]:
                raise LoadError(f"input {inp.name}: {len(data):,} bytes do not fit in '{secret.name}' "
                                f"({self.rooms[secret.name]:,} bytes)")
            if secret.symbol == ctinputs.TRNG:
                for dev in m.peripherals.values():
                    if hasattr(dev, "set_seed"):
                        dev.set_seed(int.from_bytes(data, "little"))
            elif secret.offset:  # into the object, over what --load put there
                whole = bytearray(m.read_symbol(secret.symbol, initial=True))
                whole[secret.offset:secret.offset + len(data)] = data
                m.write_symbol(secret.symbol, bytes(whole))
            else:
                m.write_symbol(secret.symbol, data)
        return m

    def run(self, inp: ctinputs.Input, reference: Digest | None = None) -> Run:
        """One hashed run; with a reference, stopped soon after its first checkpoint
        that differs from the reference's."""
        m = self.machine(inp)
        if self.apdus is not None:  # a card session (short: never stopped early), compared up to its answer
            h = CtHash(m)
            cut: list[tuple[Digest, int, int]] = []
            try:
                words = run_session(m, self.apdus, inp.name,
                                    lambda: cut.append((h.result(complete=True), m.clock.now, m.instructions)))
            finally:
                h.close()
            digest, cycles, instructions = cut[0]
            return Run(inp, digest, cycles, instructions, None, words)
        h = CtHash(m, reference=reference)
        stopped = False

        def tick(_cycles: int) -> None:
            nonlocal stopped
            if h.diverged:
                stopped = True
                raise Stop(StopReason.UNTIL, "differs from the reference run")

        # Every run, hashed or recorded, takes the same progress stops (every 2^24
        # cycles), which end idle-loop skips and sleeps at the same cycles in all of them.
        result = m.run(max_cycles=self.budget, progress=tick)
        digest = h.result(complete=not stopped)
        h.close()
        if stopped:
            return Run(inp, digest, result.cycles, result.instructions, None)
        if result.reason != StopReason.EXIT:
            raise RunDidNotFinish(f"input {inp.name}: the run did not end: {result.message or result.reason.value}",
                                  exit_code_for(result))
        return Run(inp, digest, result.cycles, result.instructions, exit_code_for(result))

    def record(self, run: Run, window: tuple[int, int]) -> tuple[list[Event], Machine]:
        """The events of ``window`` of this input's run, run again until the first
        progress stop after the window (the same stops as the hashed run's)."""
        m = self.machine(run.input)
        h = CtHash(m, record=window)
        if self.apdus is not None:
            try:
                run_session(m, self.apdus, run.input.name, lambda: None)
                upto = run.digest.counts[3]  # the events up to the answer (the hashed run's cut)
                return [e for e in h.events() if e.index < upto], m
            finally:
                h.close()

        def tick(_cycles: int) -> None:
            if h.recorded:
                raise Stop(StopReason.UNTIL, "recorded")

        m.run(max_cycles=self.budget, progress=tick)
        events = h.events()
        h.close()
        return events, m

    # ------------------------------------------------------------------ naming things
    def where(self, machine: Machine, addr: int) -> str:
        """``symbol+0xoff (file:line) `insn``` for a code address."""
        if self.lines is None:
            self.lines = SourceLines(self.args.firmware)
        text = machine.describe(addr)
        line = self.lines.describe(addr)
        insn = disassemble(machine, addr)
        return f"{text}" + (f" ({line})" if line else "") + (f": {insn}" if insn else "")


def data_name(machine: Machine, addr: int) -> str:
    """The object an address falls in (``name+0xoff``), else its memory region's name."""
    for sym in machine.image.symbols.values():
        if sym.kind == "object" and sym.size and sym.address <= addr < sym.address + sym.size:
            off = addr - sym.address
            return f"{sym.name}+0x{off:x}" if off else sym.name
    region = machine.config.region_at(addr)
    return region.name if region is not None else "unmapped"


def disassemble(machine: Machine, addr: int) -> str:
    try:
        code = machine.read_memory(addr & ~1, 4)
    except PkasimError:
        return ""
    for insn in Cs(CS_ARCH_ARM, CS_MODE_THUMB).disasm(code, addr & ~1):
        return f"{insn.mnemonic} {insn.op_str}".strip()
    return ""


def last_instruction(machine: Machine, start: int, size: int) -> int:
    """The address of the last instruction of the block [start, start + size)."""
    try:
        code = machine.read_memory(start, size)
    except PkasimError:
        return start + size - 2
    last = start
    for insn in Cs(CS_ARCH_ARM, CS_MODE_THUMB).disasm(code, start):
        last = insn.address
    return last


# ---------------------------------------------------------------------- comparing

def first_window(a: Digest, b: Digest) -> tuple[int, int]:
    """The window of events where two runs first differ, from their checkpoints."""
    n = min(len(a.checkpoints), len(b.checkpoints))
    k = next((i for i in range(n) if a.checkpoints[i][0] != b.checkpoints[i][0]), n)
    return k << CK_SHIFT, (k + 1) << CK_SHIFT


def describe_event(checker: Checker, m: Machine, e: Event | None) -> str:
    if e is None:
        return "ended (no further event in the window)"
    if e.kind == Rec.BLOCK:
        return f"ran the block at {checker.where(m, e.addr)}"
    if e.kind in (Rec.READ, Rec.WRITE):
        verb = "read" if e.kind == Rec.READ else "wrote"
        return f"{verb} {e.arg} bytes at 0x{e.addr:08x} ({data_name(m, e.addr)})"
    if e.kind == Rec.PKA:
        op = PKA_OPS.get(e.addr & 0xFF, f"opcode {e.addr & 0xFF}")
        return f"started a PKA {op} of {e.addr >> 8} words busy for {e.arg:,} cycles"
    if e.kind == Rec.SPIN:
        return f"waited {e.arg:,} cycles in an idle loop"
    if e.kind == Rec.SLEEP:
        return f"slept {e.arg:,} cycles"
    if e.kind == Rec.EXC:
        return f"took exception {e.addr}"
    return f"returned from exception {e.addr}"


def divergence(checker: Checker, ra: Run, rb: Run) -> dict[str, Any]:
    """Run both inputs again, recording the first window where they differ; the report."""
    window = first_window(ra.digest, rb.digest)
    ea, ma = checker.record(ra, window)
    eb, mb = checker.record(rb, window)
    j = next((i for i in range(min(len(ea), len(eb))) if not ea[i].same(eb[i])), min(len(ea), len(eb)))
    a = ea[j] if j < len(ea) else None
    b = eb[j] if j < len(eb) else None
    doc: dict[str, Any] = {"event": window[0] + j, "inputs": [ra.input.name, rb.input.name]}
    if a is None and b is None:
        doc.update(kind="cycles", message=(f"the same events, but the runs end at different cycles: "
                                           f"{ra.cycles:,} and {rb.cycles:,}"))
        return doc
    cycle = (a or b).cycle
    prev = ea[j - 1] if j > 0 else None
    if a is not None and b is not None and a.kind == b.kind == Rec.BLOCK:
        blocks = [e for e in ea[:j] if e.kind == Rec.BLOCK]
        if blocks:
            last = blocks[-1]
            at = last_instruction(ma, last.addr, last.arg)
            what = "control flow"
            head = f"the branch at {checker.where(ma, at)}"
        else:
            at, what, head = a.pc, "control flow", "the first block of the window"
        doc.update(kind=what, pc=at, paths=[checker.where(ma, a.addr), checker.where(mb, b.addr)])
        text = (f"{head} went to {doc['paths'][0]} for input {ra.input.name} and to {doc['paths'][1]} "
                f"for input {rb.input.name}")
    elif a is not None and b is not None and a.kind in (Rec.READ, Rec.WRITE) and b.kind == a.kind:
        at = a.pc
        doc.update(kind="memory address", pc=at, addresses=[a.addr, b.addr])
        verb = "read" if a.kind == Rec.READ else "wrote"
        text = (f"the instruction at {checker.where(ma, at)} {verb} "
                f"0x{a.addr:08x} ({data_name(ma, a.addr)}) for input {ra.input.name} and 0x{b.addr:08x} "
                f"({data_name(mb, b.addr)}) for input {rb.input.name}")
    elif a is not None and b is not None and a.kind == b.kind == Rec.PKA:
        at = a.pc
        doc.update(kind="PKA operation", pc=at, operations=[describe_event(checker, ma, a),
                                                              describe_event(checker, mb, b)])
        text = (f"the PKA operation started by {checker.where(ma, at)}: input {ra.input.name} "
                f"{doc['operations'][0]}, input {rb.input.name} {doc['operations'][1]}")
    else:
        at = prev.pc if prev is not None else (a or b).pc
        doc.update(kind="control flow", pc=at, paths=[describe_event(checker, ma, a), describe_event(checker, mb, b)])
        text = (f"after {checker.where(ma, at)}, input {ra.input.name} {doc['paths'][0]}; input {rb.input.name} "
                f"{doc['paths'][1]}")
    if checker.lines is not None:
        where = checker.lines.at(at)
        if where is not None:
            doc["source"] = {"file": where[0], "line": where[1]}
    doc["symbol"] = ma.describe(at)
    doc["cycle"] = cycle
    doc["message"] = text
    return doc


# ---------------------------------------------------------------------- the command

def main(args: argparse.Namespace, console: Console) -> int:
    symbols = [s.name for s in args.secret]
    if len(set(symbols)) != len(symbols):
        raise UsageError("--secret: each symbol (and offset) once")
    if args.random is not None and not 2 <= args.random <= ctinputs.MAX_INPUTS:
        raise UsageError(f"--random: between 2 and {ctinputs.MAX_INPUTS:,} inputs")
    if args.inputs is not None and any((s.kind != "bytes" or s.size is not None) and s.symbol != ctinputs.TRNG
                                       for s in args.secret):
        raise UsageError("--secret SYMBOL=KIND:N says how --random fills a secret; with --inputs give SYMBOL only")
    checker = Checker(args)
    if args.random is not None:
        count = args.random
        inputs: Iterable[ctinputs.Input] = ctinputs.random_inputs(args.secret, count, checker.rooms, args.seed)
    else:
        listed = ctinputs.read_inputs(args.inputs, args.secret, checker.rooms)
        if len(listed) < 2:
            layout = ("a file per input" if len(args.secret) == 1 else
                      "a subdirectory per input, holding a file named after each secret")
            raise UsageError(f"--inputs {args.inputs}: {len(listed)} input(s) ({layout}); "
                             "ct-check compares at least two")
        count, inputs = len(listed), listed

    runs: list[Run] = []
    for number, inp in enumerate(inputs, 1):
        if args.save_inputs:
            ctinputs.save(inp, args.save_inputs, number, count)
        runs.append(checker.run(inp, runs[0].digest if runs else None))
        if not runs[-1].agrees(runs[0]):
            break  # the first disagreement is reported; the rest need not run
    first = runs[0]
    odd = next((r for r in runs if not r.agrees(first)), None)
    doc: dict[str, Any] = {
        "schema": "pkasim-ct-check/1",
        "firmware": args.firmware,
        "chip": checker.config.chip,
        "secrets": [str(s) for s in args.secret],
        "inputs": count,
        "runs": [{"input": r.input.name, "complete": r.complete, "cycles": r.cycles,
                  "instructions": r.instructions, "exit_code": r.exit_code,
                  **({"status_words": [f"{sw:04X}" for sw in r.status_words]} if r.status_words is not None else {}),
                  **{s: r.digest.counts[i] for i, s in enumerate(STREAMS)}}
                 for r in runs],
    }
    doc["identical"], doc["compared_to_event"] = verdicts(runs, odd)
    if odd is not None:
        doc["divergence"] = divergence(checker, first, odd)
    doc["verdict"] = "divergence" if odd is not None else "identical"
    if args.json:
        write_text(args.json, json.dumps(doc, indent=2) + "\n", "the ct-check JSON")
    if not args.quiet or odd is not None:
        report(console, doc, runs, odd)
    return 1 if odd is not None else 0


def verdicts(runs: list[Run], odd: Run | None) -> tuple[dict[str, bool | None], int | None]:
    """Per stream (and cycles): the same in every run? For a run stopped soon after its
    first checkpoint unlike the first run's, the streams are compared at that checkpoint
    (up to the event number returned) and the cycles not at all (None)."""
    first = runs[0]
    if odd is None or odd.complete:
        out: dict[str, bool | None] = {s: len({r.digest.stream_key(i) for r in runs}) == 1
                                       for i, s in enumerate(STREAMS)}
        out["cycles"] = len({r.cycles for r in runs}) == 1
        return out, None
    k = first_window(first.digest, odd.digest)[0] >> CK_SHIFT  # the first checkpoint that differs
    mine = odd.digest.checkpoints[k] if k < len(odd.digest.checkpoints) else None
    theirs = first.digest.checkpoints[k] if k < len(first.digest.checkpoints) else None
    out = {s: mine is not None and theirs is not None and mine[2 + i] == theirs[2 + i]
           for i, s in enumerate(STREAMS)}
    out["cycles"] = None
    return out, (k + 1) << CK_SHIFT


def report(console: Console, doc: dict[str, Any], runs: list[Run], odd: Run | None) -> None:
    first = runs[0]
    console.print(f"ct-check {doc['firmware']} on {doc['chip']}: secrets {', '.join(doc['secrets'])}; "
                  f"{len(runs)} of {doc['inputs']} inputs run")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for name, justify in (("what", "left"), ("verdict", "left"), ("first input", "right")):
        table.add_column(name, justify=justify)
    upto = doc["compared_to_event"]
    scope = f" to event {upto:,}" if upto is not None else ""
    for i, s in enumerate(STREAMS):
        same = doc["identical"][s]
        table.add_row(STREAM_TITLES[s], f"identical{scope}" if same else f"[red]differs[/red]{scope}",
                      f"{first.digest.counts[i]:,} {STREAM_UNITS[s]}")
    same = doc["identical"]["cycles"]
    table.add_row("cycles", "not compared (a run was stopped)" if same is None else
                  "identical" if same else "[red]differs[/red]", f"{first.cycles:,}")
    if first.status_words is not None:
        words = {tuple(r.status_words or ()) for r in runs}
        table.add_row("status words", "identical" if len(words) == 1 else "[red]differs[/red]",
                      " ".join(f"{sw:04X}" for sw in first.status_words))
    else:
        codes = sorted({r.exit_code for r in runs if r.exit_code is not None})
        table.add_row("firmware exit code", "identical" if len(codes) == 1 else "differs",
                      ", ".join(map(str, codes)))
    console.print(table)
    if odd is None:
        console.print(f"[green]all {len(runs)} runs agree[/green]: no difference in control flow, memory "
                      "addresses or PKA timing for these inputs")
        return
    d = doc["divergence"]
    console.print(f"[red]divergence[/red] ({d['kind']}) at event {d['event']:,}, cycle {d['cycle']:,}:",
                  highlight=False)
    console.print(f"  {d['message']}", markup=False, highlight=False, soft_wrap=True)
    for r in (first, odd):
        origin = f" ({r.input.origin})" if r.input.origin else ""
        console.print(f"  input {r.input.name}{origin}:", markup=False, highlight=False)
        for sym, data in r.input.values.items():
            console.print(f"    {sym} = {ctinputs.preview(data)}", markup=False, highlight=False)
