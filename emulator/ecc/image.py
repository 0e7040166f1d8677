"""Driving the ECC firmware (firmware/images/ecc.c; docs/ecc.md) from Python.

The image reads its inputs from ELF symbols and runs one operation per call of
``ecc_dispatch``. ``EccImage`` loads it once into a machine, runs the start-up code,
then calls ``ecc_dispatch`` for each operation it is given: hundreds of operations cost
one image load, which is what the tests' cross-checks against ``cryptography`` need.

Byte strings are the standards' (SEC 1 big-endian numbers and uncompressed points for
P-256; RFC 7748/8032 little-endian strings for Curve25519), so results compare directly
with ``cryptography``'s.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path

from pkasim.base.errors import LoadError, PkasimError
from pkasim.chip.config import ChipConfig
from pkasim.core.machine import Machine, StopReason

MSG_MAX = 1024  # ecc.c's ECC_MSG_MAX
CALL_BUDGET = 10**9  # cycles one operation may take (20 modeled seconds at 48 MHz)
SYMBOLS = ("ecc_op", "ecc_key", "ecc_peer", "ecc_msg", "ecc_msg_len", "ecc_sig", "ecc_out", "ecc_out_len",
           "ecc_status", "ecc_dispatch")


class Op(IntEnum):
    """ecc.c's ECC_OP_* (the value of ``ecc_op``)."""

    P256_PUBLIC = 1
    P256_SIGN = 2
    P256_VERIFY = 3
    P256_ECDH = 4
    X25519 = 5
    ED25519_PUBLIC = 6
    ED25519_SIGN = 7
    ED25519_VERIFY = 8
    RANDOM = 9
    P256_KEYGEN = 10
    ED25519_KEYGEN = 11


# ecc.h's return values (and pka.h's, which the ECC code passes on).
STATUS = {
    0: "ok",
    -2: "the PKA refused an operation (OPERRF)",
    -3: "a PKA operand outside PKA RAM (ADDRERRF)",
    -4: "PKA RAM touched while busy (RAMERRF)",
    -10: "private key out of range",
    -11: "public point not on the curve or badly encoded",
    -12: "the point at infinity",
    -13: "signature value out of range",
    -14: "signature does not verify",
    -15: "non-canonical point encoding",
    -16: "all-zero shared secret",
    -17: "message too long",
    -20: "the TRNG's health test failed again after a reseed",
}
ERR_KEY, ERR_POINT, ERR_INFINITY, ERR_RANGE, ERR_SIGNATURE, ERR_ENCODING, ERR_ZERO, ERR_LENGTH = (
    -10, -11, -12, -13, -14, -15, -16, -17)
ERR_TRNG = -20


@dataclass
class EccResult:
    """One call of ecc_dispatch: its status, output and cost."""

    op: Op
    status: int
    out: bytes
    cycles: int
    pka_operations: dict[str, int] = field(default_factory=dict)
    pka_busy_cycles: int = 0

    @property
    def ok(self) -> bool:
        return self.status == 0

    @property
    def reason(self) -> str:
        return STATUS.get(self.status, f"status {self.status}")


class EccImage:
    """ecc.elf (or ecc_soft.elf) loaded once on ``config``; ``run`` one operation after
    another."""

    def __init__(self, config: ChipConfig, image: str | Path) -> None:
        self.machine = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
        m = self.machine
        m.load(image)
        for sym in SYMBOLS:
            m.image.symbol(sym)  # a clear error if this is not the ECC image
        m.write_symbol("ecc_check", bytes(4))
        first = m.run(until="main", max_cycles=CALL_BUDGET)
        if first.reason != StopReason.UNTIL:
            raise PkasimError(f"{image}: never reached main ({first.message or first.reason.value})")

    def run(self, op: Op, *, key: bytes = b"", peer: bytes = b"", msg: bytes = b"", sig: bytes = b"") -> EccResult:
        """Run ``op`` on these inputs (each padded with zeros to its symbol's size)."""
        m = self.machine
        if len(msg) > MSG_MAX:
            raise LoadError(f"a message of {len(msg)} bytes is longer than the image's {MSG_MAX}")
        m.write_symbol("ecc_op", int(op).to_bytes(4, "little"))
        m.write_symbol("ecc_key", key.ljust(32, b"\0"))
        m.write_symbol("ecc_peer", peer.ljust(65, b"\0"))
        m.write_symbol("ecc_msg", msg)
        m.write_symbol("ecc_msg_len", len(msg).to_bytes(4, "little"))
        m.write_symbol("ecc_sig", sig.ljust(64, b"\0"))
        pka = m.peripherals.get("pka")
        ops0 = dict(pka.operations) if pka is not None else {}
        busy0 = pka.busy_total if pka is not None else 0
        cycles = m.call("ecc_dispatch", max_cycles=CALL_BUDGET)
        status = int.from_bytes(m.read_symbol("ecc_status"), "little", signed=True)
        length = int.from_bytes(m.read_symbol("ecc_out_len"), "little")
        out = m.read_symbol("ecc_out")[:length] if status == 0 else b""
        ops = {k: v - ops0.get(k, 0) for k, v in pka.operations.items()} if pka is not None else {}
        return EccResult(op, status, out, cycles, {k: v for k, v in ops.items() if v},
                         (pka.busy_total - busy0) if pka is not None else 0)
