"""``pkasim bench``'s elliptic-curve jobs (docs/ecc.md): one operation of the ECC
firmware per job, on the PKA (ecc.elf) or in software (ecc_soft.elf, the ``-soft``
jobs), measured as the RSA jobs are (``pkasim.rsa.bench``):

* exactly, from the model: cycles from the entry of ``ecc_dispatch`` to its return,
  the PKA's operations and busy cycles in between;
* the hash's share: cycles inside the firmware's SHA-256 / SHA-512 block function
  (RFC 6979's HMAC for ECDSA, RFC 8032's SHA-512 for Ed25519), counted in a third,
  observed call of the same operation (the model is deterministic: the same cycles);
* the host's wall time, which says how fast the emulator is, not the chip: of the whole
  run, reset to exit, on a new machine (as the RSA jobs: it includes translating the
  image's code, a few milliseconds that weigh on operations this short), and of the
  operation alone called again on the same machine (``op_wall_seconds``, the
  emulator's steady speed; its ratio to the modeled time is the bench's "wall / modeled").

Inputs are fixed (derived from fixed strings, so every run is the same) and every
result is checked against the ``cryptography`` package before it is reported.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, x25519
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed, decode_dss_signature

from pkasim.base import resources
from pkasim.base.errors import PkasimError
from pkasim.base.kinds import Kind
from pkasim.chip.config import ChipConfig
from pkasim.core.machine import Machine, StopReason
from pkasim.core.measure import JobResult, measure_call
from pkasim.core.observe import Event, ObservedImage, Observer
from pkasim.ecc.image import Op

BUILD_DIR = resources.build_dir()  # the bundled images (firmware/build in a checkout)
BUDGET_SECONDS = 100  # modeled seconds one job may take before it is called stuck
CURVE_BITS = 256  # both curves: 256-bit field elements and scalars, for the efficiency column
P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
RAW = (serialization.Encoding.Raw, serialization.PublicFormat.Raw)
X962 = (serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


@dataclass(frozen=True)
class EccJob:
    key: str
    label: str
    image: str
    op: Op
    engine: str  # "pka" or "software"
    hash_function: str  # the firmware's block function whose cycles are reported apart ("" for none)


def _jobs() -> tuple[EccJob, ...]:
    base = (
        ("p256-sign", "P-256 ECDSA sign (RFC 6979)", Op.P256_SIGN, "sha256_block"),
        ("p256-verify", "P-256 ECDSA verify", Op.P256_VERIFY, ""),
        ("p256-ecdh", "P-256 ECDH", Op.P256_ECDH, ""),
        ("x25519", "X25519", Op.X25519, ""),
        ("ed25519-sign", "Ed25519 sign", Op.ED25519_SIGN, "sha512_block"),
        ("ed25519-verify", "Ed25519 verify", Op.ED25519_VERIFY, "sha512_block"),
    )
    jobs = [EccJob(key, f"{label}, PKA", "ecc.elf", op, "pka", h) for key, label, op, h in base]
    jobs += [EccJob(f"{key}-soft", f"{label}, software", "ecc_soft.elf", op, "software", h)
             for key, label, op, h in base]
    return tuple(jobs)


ECC_JOBS: tuple[EccJob, ...] = _jobs()


@dataclass
class EccJobResult(JobResult):
    """A bench row (efficiency: curve bits per 1000 cycles, as the RSA rows'), with the
    operation's own host time and the hash's share."""

    op_wall_seconds: float = 0.0  # host time of the operation alone, called again on the same machine
    hash_function: str = ""
    hash_cycles: int = 0  # cycles inside hash_function during the operation
    status: int = 0  # ecc_dispatch's return value


@dataclass(frozen=True)
class EccInputs:
    """The bench's fixed inputs and the results ``cryptography`` gives for them."""

    key: bytes = b""
    peer: bytes = b""
    msg: bytes = b""
    sig: bytes = b""
    expected: bytes = b""  # the output, or b"" for a verification (status 0 expected)


def _seeded(label: str) -> bytes:
    return hashlib.sha256(f"pkasim bench {label}".encode()).digest()


def _p256_key(label: str) -> ec.EllipticCurvePrivateKey:
    d = int.from_bytes(_seeded(label), "big") % (P256_N - 1) + 1
    return ec.derive_private_key(d, ec.SECP256R1())


def _p256_sig(key: ec.EllipticCurvePrivateKey, digest: bytes) -> bytes:
    der = key.sign(digest, ec.ECDSA(Prehashed(hashes.SHA256()), deterministic_signing=True))
    r, s = decode_dss_signature(der)
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def inputs(op: Op) -> EccInputs:
    """The fixed inputs of ``op`` and the expected output."""
    if op in (Op.P256_SIGN, Op.P256_VERIFY, Op.P256_ECDH, Op.P256_PUBLIC):
        key = _p256_key("p256 key")
        d = key.private_numbers().private_value.to_bytes(32, "big")
        digest = hashlib.sha256(b"pkasim bench message").digest()
        if op == Op.P256_SIGN:
            return EccInputs(key=d, msg=digest, expected=_p256_sig(key, digest))
        if op == Op.P256_VERIFY:
            return EccInputs(peer=key.public_key().public_bytes(*X962), msg=digest, sig=_p256_sig(key, digest))
        if op == Op.P256_PUBLIC:
            return EccInputs(key=d, expected=key.public_key().public_bytes(*X962))
        peer = _p256_key("p256 peer")
        return EccInputs(key=d, peer=peer.public_key().public_bytes(*X962),
                         expected=key.exchange(ec.ECDH(), peer.public_key()))
    if op == Op.X25519:
        a = x25519.X25519PrivateKey.from_private_bytes(_seeded("x25519 key"))
        b = x25519.X25519PrivateKey.from_private_bytes(_seeded("x25519 peer"))
        return EccInputs(key=a.private_bytes_raw(), peer=b.public_key().public_bytes(*RAW),
                         expected=a.exchange(b.public_key()))
    seed = _seeded("ed25519 key")
    key25519 = ed25519.Ed25519PrivateKey.from_private_bytes(seed)
    msg = hashlib.sha256(b"pkasim bench message").digest()  # what an OpenPGP card signs: a digest
    if op == Op.ED25519_SIGN:
        return EccInputs(key=seed, msg=msg, expected=key25519.sign(msg))
    if op == Op.ED25519_PUBLIC:
        return EccInputs(key=seed, expected=key25519.public_key().public_bytes(*RAW))
    return EccInputs(peer=key25519.public_key().public_bytes(*RAW), msg=msg, sig=key25519.sign(msg))


def _load_inputs(m: Machine, op: Op, given: EccInputs) -> None:
    m.write_symbol("ecc_op", int(op).to_bytes(4, "little"))
    m.write_symbol("ecc_key", given.key.ljust(32, b"\0"))
    m.write_symbol("ecc_peer", given.peer.ljust(65, b"\0"))
    m.write_symbol("ecc_msg", given.msg)
    m.write_symbol("ecc_msg_len", len(given.msg).to_bytes(4, "little"))
    m.write_symbol("ecc_sig", given.sig.ljust(64, b"\0"))
    m.write_symbol("ecc_check", bytes(4))


class _FunctionCycles(Observer):
    """Inclusive cycles spent in one function (its calls from entry to return)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.index = -1
        self.cycles = 0
        self._entered: int | None = None

    def start(self, info: ObservedImage) -> None:
        self.index = info.functions.index(self.name) if self.name in info.functions else -1

    def events(self, batch: Sequence[Event]) -> None:
        for e in batch:
            if e.kind == Kind.CALL and e.a == self.index:
                self._entered = e.cycle
            elif e.kind == Kind.RETURN and e.a == self.index and self._entered is not None:
                self.cycles += e.cycle - self._entered
                self._entered = None


def run_ecc_job(config: ChipConfig, job: EccJob, build_dir: Path = BUILD_DIR,
                progress: Callable[[int], None] | None = None,
                attach: Callable[[Machine], None] | None = None) -> EccJobResult:
    """One operation of ``job`` on ``config``, measured and checked against
    ``cryptography``. ``attach`` adds observers (a profiler) to the timed run."""
    given = inputs(job.op)
    path = resources.image(job.image, None if build_dir == BUILD_DIR else build_dir)
    m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(path)
    for sym in ("ecc_op", "ecc_key", "ecc_out", "ecc_status", "ecc_dispatch"):
        m.image.symbol(sym)  # a clear error if the image is not the ECC image
    _load_inputs(m, job.op, given)
    if attach is not None:
        attach(m)
    budget = BUDGET_SECONDS * config.core.clock_hz

    call = measure_call(m, "ecc_dispatch", job.image, budget, progress)
    end, wall, busy, ops = call.end, call.wall_seconds, call.pka_busy_cycles, call.pka_operations

    status = int.from_bytes(m.read_symbol("ecc_status"), "little", signed=True)
    length = int.from_bytes(m.read_symbol("ecc_out_len"), "little")
    out = m.read_symbol("ecc_out")[:length]
    verified = end.reason == StopReason.EXIT and status == 0 and out == given.expected
    cycles = call.cycles

    # The operation again on the warm machine: the emulator's steady speed.
    op_wall = time.perf_counter()
    again = m.call("ecc_dispatch", max_cycles=budget)
    op_wall = time.perf_counter() - op_wall
    if again != cycles or m.read_symbol("ecc_out")[:length] != out:
        raise PkasimError(f"{job.image}: the operation called again took {again:,} cycles, the first {cycles:,}")
    hash_cycles = 0
    if job.hash_function:
        counter = _FunctionCycles(job.hash_function)
        m.observe(counter)
        m.call("ecc_dispatch", max_cycles=budget)
        m.unobserve(counter)
        hash_cycles = counter.cycles

    seconds = cycles / config.core.clock_hz
    return EccJobResult(
        job=job.key, label=job.label, image=job.image, nbits=CURVE_BITS, engine=job.engine, verified=verified,
        cycles=cycles, instructions=call.instructions, modeled_ms=seconds * 1e3,
        ops_per_second=1 / seconds if seconds else 0.0, firmware_ms=None,
        pka_operations={k: v for k, v in ops.items() if v}, pka_busy_cycles=busy,
        pka_busy_share=busy / cycles if cycles else 0.0, cpu_only_share=1 - busy / cycles if cycles else 1.0,
        wall_seconds=wall, op_wall_seconds=op_wall, efficiency=CURVE_BITS * 1000 / cycles if cycles else 0.0,
        hash_function=job.hash_function, hash_cycles=hash_cycles, status=status,
    )


# Published Cortex-M0 software figures the docs compare with (docs/ecc.md).
PUBLISHED_M0 = {
    "x25519": (3_229_950, "Pornin, x25519-cm0 (2018): X25519 on ARM Cortex-M0+"),
    "p256-sign": (30_797_760, "SEGGER emCrypt, STM32F072 at 48 MHz: P-256 ECDSA sign 641.62 ms"),
}


def ecc_ratios(jobs: Sequence[EccJobResult]) -> dict[str, float]:
    """Software vs PKA for each operation, and the published M0 figures vs the PKA."""
    by = {j.job: j for j in jobs}
    out: dict[str, float] = {}
    for j in jobs:
        soft = by.get(f"{j.job}-soft")
        if soft is not None and j.cycles:
            out[f"{j.job}_software_vs_pka"] = soft.cycles / j.cycles
        if j.job in PUBLISHED_M0 and j.cycles:
            out[f"{j.job}_published_m0_vs_pka"] = PUBLISHED_M0[j.job][0] / j.cycles
    return out
