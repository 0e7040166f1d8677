"""Fault models: what one fault does to the machine, and where it can happen.

Each model turns a point of the golden run (an executed instruction, or a PKA
operation) into a number of faults, and applies one of them to a machine stopped at
that point. docs/faults.md gives each model's physical meaning; in short:

============  ===========  =======================================================
model         where        what
============  ===========  =======================================================
skip, skip:K  before n     instruction n (and the K-1 after it in memory) runs as
                           NOP: 1 cycle each, nothing else (two for a 32-bit one)
instr-flip    before n     one bit of its opcode flipped, for that execution only
reg-flip      after n      one bit of a register instruction n wrote
reg-zero      after n      that register all zeros
reg-ones      after n      that register all ones
flag-flip     after n      N, Z, C or V, after an instruction that sets flags
load-flip     after n      one bit of a word a load returned (its width: 8, 16, 32)
pka-result    PKA op k     its result: a bit flipped (``:flip``), a word zeroed
                           (``:zero``) or replaced by a random word (``:random``)
pka-skip      PKA op k     the START does nothing (no operation, flag or interrupt)
none          before n     nothing: checks that injection alone changes nothing
============  ===========  =======================================================

"before n" faults stop the machine before instruction number n executes; "after n"
faults stop it before instruction n + 1 (the next one the golden run executed).
A fault is named by a key that holds everything needed to make it again from the same
golden run: ``reg-flip@1234/r3/b7``, ``pka-result:zero@op5/w3``, ``skip:2@88``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from capstone import CS_ARCH_ARM, CS_MODE_MCLASS, CS_MODE_THUMB, Cs

from pkasim.base.errors import UsageError

BEFORE, AFTER, PKA = "before", "after", "pka"
NOP = b"\x00\xbf"  # Thumb NOP (T1): 1 cycle
FLAGS = {"N": 31, "Z": 30, "C": 29, "V": 28}
MAX_SKIP = 16
_CS_REG = {"sb": "r9", "sl": "r10", "fp": "r11", "ip": "r12"}


@dataclass(frozen=True)
class Insn:
    """What the models need to know of one instruction (decoded once per address)."""

    address: int
    size: int
    text: str
    dest: tuple[str, ...]  # registers it writes (not PC, not the flags)
    flags: bool  # it sets N, Z, C, V
    loads: tuple[tuple[str, int, bool], ...]  # (register, width in bits, sign-extended) per loaded word


@dataclass(frozen=True)
class Point:
    """An instruction of the golden run: its number (counted from load), address,
    start cycle; ``next_pc`` is the address of instruction n + 1 in the golden run
    (None when the trace does not show it: an "after" fault cannot go there)."""

    n: int
    pc: int
    cycle: int
    next_pc: int | None


@dataclass(frozen=True)
class PkaOp:
    """A PKA operation of the golden run: its index k in the run (from 0), name,
    LEN and start cycle; ``pc`` the instruction the run was at when it started."""

    k: int
    name: str
    words: int
    start: int
    pc: int


@dataclass(frozen=True)
class Injection:
    """One fault: ``model`` (a sub-model for pka-result: ``pka-result:flip``), where
    (instruction ``n``, or PKA operation ``op``) and its parameters."""

    model: str
    n: int = -1
    op: int = -1
    reg: str = ""
    bit: int = -1
    word: int = -1
    flag: str = ""

    @property
    def key(self) -> str:
        where = f"op{self.op}" if self.op >= 0 else str(self.n)
        parts = [f"{self.model}@{where}"]
        if self.reg:
            parts.append(self.reg)
        if self.flag:
            parts.append(self.flag)
        if self.word >= 0:
            parts.append(f"w{self.word}")
        if self.bit >= 0:
            parts.append(f"b{self.bit}")
        return "/".join(parts)

    @property
    def detail(self) -> str:
        """The parameters in words, for tables."""
        out = []
        if self.reg:
            out.append(self.reg)
        if self.flag:
            out.append(f"flag {self.flag}")
        if self.word >= 0:
            out.append(f"word {self.word}")
        if self.bit >= 0:
            out.append(f"bit {self.bit}")
        return " ".join(out)

    @property
    def family(self) -> str:
        """The model name without its parameter (``skip:2`` -> ``skip``)."""
        return self.model.split(":", 1)[0]

    @property
    def when(self) -> str:
        return model_of(self.model).when


_KEY = re.compile(r"^(?P<model>[a-z-]+(?::[a-z0-9]+)?)@(?:op(?P<op>\d+)|(?P<n>\d+))(?P<rest>(?:/[A-Za-z0-9]+)*)$")


def parse_key(key: str) -> Injection:
    """The Injection a key names (UsageError if it names none)."""
    m = _KEY.match(key)
    if m is None:
        raise UsageError(f"not a fault key: {key!r}")
    model_of(m["model"])
    kw: dict = {"model": m["model"]}
    if m["op"] is not None:
        kw["op"] = int(m["op"])
    else:
        kw["n"] = int(m["n"])
    for part in m["rest"].split("/")[1:]:
        if part in FLAGS:
            kw["flag"] = part
        elif re.fullmatch(r"b\d+", part):
            kw["bit"] = int(part[1:])
        elif re.fullmatch(r"w\d+", part):
            kw["word"] = int(part[1:])
        else:
            kw["reg"] = part
    return Injection(**kw)


# ---------------------------------------------------------------------- decoding

@lru_cache(maxsize=1)
def _cs() -> Cs:
    cs = Cs(CS_ARCH_ARM, CS_MODE_THUMB | CS_MODE_MCLASS)
    cs.detail = True
    return cs


def _reg(cs_insn, r: int) -> str:  # noqa: ANN001 - capstone's instruction
    name = cs_insn.reg_name(r)
    return _CS_REG.get(name, name)


def decode(address: int, code: bytes) -> Insn:
    """The instruction at ``address`` from its bytes (at least 4 when available)."""
    for ins in _cs().disasm(code, address, 1):
        _, written = ins.regs_access()
        dest = tuple(r for r in (_reg(ins, w) for w in written) if r not in ("pc", "cpsr", "apsr", "itstate"))
        loads: list[tuple[str, int, bool]] = []
        mnem = ins.mnemonic.split(".")[0]
        if mnem.startswith("ldr") or mnem.startswith("ldm") or mnem == "pop":
            width = 8 if mnem in ("ldrb", "ldrsb") else 16 if mnem in ("ldrh", "ldrsh") else 32
            signed = mnem in ("ldrsb", "ldrsh")
            ops = [_reg(ins, op.reg) for op in ins.operands if op.type == 1]  # ARM_OP_REG
            if mnem.startswith("ldm"):
                ops = ops[1:]  # the base register comes first
            elif mnem.startswith("ldr"):
                ops = ops[:1]
            loads = [(r, width, signed) for r in ops]
        text = f"{ins.mnemonic} {ins.op_str}".strip()
        return Insn(address, ins.size, text, dest, bool(ins.update_flags), tuple(loads))
    size = 4 if len(code) >= 2 and (int.from_bytes(code[:2], "little") >> 11) >= 0x1D else 2
    return Insn(address, size, "(undefined)", (), False, ())


# ---------------------------------------------------------------------- models

@dataclass(frozen=True)
class Model:
    """A fault model: ``count(insn or op)`` faults at a point, ``make(point, j)`` the
    j-th of them."""

    name: str
    when: str
    count: Callable[..., int]
    make: Callable[..., Injection]
    about: str = ""
    params: dict = field(default_factory=dict)


def _flip_bits(insn: Insn) -> int:
    return 8 * insn.size


def _make_reg(kind: str) -> Callable[[Point, Insn, int], Injection]:
    def make(p: Point, insn: Insn, j: int) -> Injection:
        if kind == "reg-flip":
            return Injection(kind, n=p.n, reg=insn.dest[j // 32], bit=j % 32)
        return Injection(kind, n=p.n, reg=insn.dest[j])
    return make


def _load_bits(reg: str, width: int) -> int:
    """Bits of a loaded word a load-flip may hit: not bit 0 of a popped PC (the Thumb
    bit, which the core never keeps in PC)."""
    return width - 1 if reg == "pc" else width


def _load_make(p: Point, insn: Insn, j: int) -> Injection:
    for reg, width, _ in insn.loads:
        bits = _load_bits(reg, width)
        if j < bits:
            return Injection("load-flip", n=p.n, reg=reg, bit=j + (width - bits))
        j -= bits
    raise IndexError(j)


def _pka_kinds() -> dict[str, Model]:
    return {
        "pka-result:flip": Model("pka-result:flip", PKA, lambda op: 32 * op.words,
                                 lambda op, j: Injection("pka-result:flip", op=op.k, bit=j)),
        "pka-result:zero": Model("pka-result:zero", PKA, lambda op: op.words,
                                 lambda op, j: Injection("pka-result:zero", op=op.k, word=j)),
        "pka-result:random": Model("pka-result:random", PKA, lambda op: op.words,
                                   lambda op, j: Injection("pka-result:random", op=op.k, word=j)),
    }


def _models() -> dict[str, Model]:
    out = {
        "none": Model("none", BEFORE, lambda insn: 1, lambda p, insn, j: Injection("none", n=p.n)),
        "instr-flip": Model("instr-flip", BEFORE, _flip_bits,
                            lambda p, insn, j: Injection("instr-flip", n=p.n, bit=j)),
        "reg-flip": Model("reg-flip", AFTER, lambda insn: 32 * len(insn.dest), _make_reg("reg-flip")),
        "reg-zero": Model("reg-zero", AFTER, lambda insn: len(insn.dest), _make_reg("reg-zero")),
        "reg-ones": Model("reg-ones", AFTER, lambda insn: len(insn.dest), _make_reg("reg-ones")),
        "flag-flip": Model("flag-flip", AFTER, lambda insn: 4 if insn.flags else 0,
                           lambda p, insn, j: Injection("flag-flip", n=p.n, flag="NZCV"[j])),
        "load-flip": Model("load-flip", AFTER, lambda insn: sum(_load_bits(r, w) for r, w, _ in insn.loads),
                           _load_make),
        "pka-skip": Model("pka-skip", PKA, lambda op: 1, lambda op, j: Injection("pka-skip", op=op.k)),
    }
    out.update(_pka_kinds())
    for k in range(1, MAX_SKIP + 1):
        name = "skip" if k == 1 else f"skip:{k}"
        out[name] = Model(name, BEFORE, lambda insn: 1,
                          lambda p, insn, j, name=name: Injection(name, n=p.n), params={"k": k})
    return out


MODELS = _models()
MODEL_NAMES = ("skip", "skip:K", "instr-flip", "reg-flip", "reg-zero", "reg-ones", "flag-flip", "load-flip",
               "pka-result", "pka-result:flip", "pka-result:zero", "pka-result:random", "pka-skip", "none")


def model_of(name: str) -> Model:
    try:
        return MODELS[name]
    except KeyError:
        raise UsageError(f"unknown fault model '{name}' (known: {', '.join(MODEL_NAMES)}; K is 1..{MAX_SKIP})") from None


def parse_models(specs: list[str]) -> tuple[str, ...]:
    """The models a list of ``--model`` values names, in order, each once
    (``pka-result`` is its three kinds)."""
    out: list[str] = []
    for spec in specs:
        spec = spec.strip()
        if spec == "skip:1":
            spec = "skip"
        names = [k for k in MODELS if k.startswith("pka-result:")] if spec == "pka-result" else [spec]
        for name in names:
            model_of(name)
            if name not in out:
                out.append(name)
    if not out:
        raise UsageError("give at least one --model")
    return tuple(out)


def skip_count(model: str) -> int:
    return MODELS[model].params.get("k", 1)


def random_word(seed: int, op: int, word: int) -> int:
    """The random word of ``pka-result:random`` (the same for the same seed and fault)."""
    return random.Random(f"pka-random/{seed}/{op}/{word}").getrandbits(32)


def corrupt_result(inj: Injection, seed: int) -> Callable[[int, int], int]:
    """The function a PKA fault applies to the operation's result."""
    if inj.model == "pka-result:flip":
        return lambda result, words: result ^ (1 << inj.bit)
    mask = 0xFFFFFFFF << (32 * inj.word)
    if inj.model == "pka-result:zero":
        return lambda result, words: result & ~mask
    value = random_word(seed, inj.op, inj.word) << (32 * inj.word)
    return lambda result, words: (result & ~mask) | value
