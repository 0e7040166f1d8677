"""The software RSA baseline (firmware/images/rsa_soft.c, src/bn.c, src/rsa_soft.c):
the xRSA paper's "naive method", Mbed TLS-style bignum with no PKA, constant time
like Mbed TLS 3.6's bignum core.

Checked like the PKA firmware: keys generated here with `cryptography` (e = 65537),
the output against pow(m, d, n) and pow(out, e, n) == m, for m = 0, 1, N-1, m < p,
m > p and random m; rsa_get_public_key against p*q. By default 20 keys of each size,
like the PKA firmware's tests, each key signing one message kind in turn (key 0 of
RSA-2048 signs them all); with PKASIM_FULL=1 every key signs every message kind.

Below the RSA level, the bignum core is checked against Python integers under
hypothesis through soft_rsa_bn_call (Montgomery multiplication, exponentiation,
reductions, the multiply-accumulate inner loop in assembly and in C), the whole
CRT path with small random keys, the Montgomery multiplication count against Mbed
TLS 3.6's fixed-window rule (the same for every key and message), and the inner
step's cycle cost.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import random
import re
import struct
import subprocess
import sys
from dataclasses import dataclass

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pkasim.core.machine import Machine, StopReason
from pkasim.rsa.rsakey import RsaKey as Key
from pkasim.rsa.rsakey import random_prime

FULL = os.environ.get("PKASIM_FULL") == "1"
KEYS_2048 = 20
KEYS_4096 = 20
KINDS = ("0", "1", "N-1", "m<p", "m>p", "random")
MAX_CYCLES = 4 * 10**9
RSA_ERR_NBITS, SOFT_RSA_ERR_KEY = -1, -6
# soft_rsa_bn_call operations (firmware/src/bn.h)
MONTMUL, EXP_MOD, MOD_WIDE, RR, MUL, MUL_HLP, MUL_HLP_C, MONT_INIT, MUL_HLP_LL = range(9)
SIZES_SMALL = (128, 192, 256, 320, 384, 512)


# --------------------------------------------------------------------------- keys (pkasim.rsa.rsakey.RsaKey)

@functools.cache
def keys(nbits: int, count: int) -> tuple[Key, ...]:
    out = []
    for _ in range(count):
        k = rsa.generate_private_key(public_exponent=65537, key_size=nbits).private_numbers()
        out.append(Key(nbits, k.public_numbers.e, k.p, k.q))
    return tuple(out)


def message(kind: str, key: Key, rng: random.Random) -> int:
    return {
        "0": lambda: 0,
        "1": lambda: 1,
        "N-1": lambda: key.n - 1,
        "m<p": lambda: rng.randrange(2, key.p),
        "m>p": lambda: rng.randrange(key.p + 1, key.n),
        "random": lambda: rng.randrange(key.n),
    }[kind]()


def small_key(nbits: int, rng: random.Random) -> Key:
    """A key of nbits (below cryptography's 1024-bit minimum) whose primes have exactly
    nbits/2 bits with the top two set, as OpenSSL makes them; p < q or p > q at random."""
    half = nbits // 2
    p = random_prime(half, rng)
    q = random_prime(half, rng)
    while q == p:
        q = random_prime(half, rng)
    return Key(nbits, 65537, p, q)


# --------------------------------------------------------------------------- running the image

@pytest.fixture(scope="module")
def soft_elf(repo, build_dir):
    path = build_dir / "rsa_soft.elf"
    if not path.exists():
        subprocess.run(["make", "-s", "-C", str(repo / "firmware"), f"PYTHON={sys.executable}", "build/rsa_soft.elf"],
                       check=True)
    return path


@dataclass
class Run:
    exit_code: int | None
    reason: StopReason
    stdout: str
    status: int
    output: bytes
    cycles: int
    ms: int
    montmuls: int


@pytest.fixture(scope="module")
def fw(config, soft_elf):
    """``fw(key=..., msg=..., op=0, expected=None, config=None)``: one run of rsa_soft.elf."""

    def run(*, key: Key | None = None, nbits: int | None = None, msg: int | None = None, op: int = 0,
            expected: bytes | None = None, blob: bytes | None = None, cfg=None) -> Run:
        m = Machine(cfg or config, stdout=io.BytesIO(), stderr=io.BytesIO())
        m.load(soft_elf)
        size = key.nbits if key else 4096
        if key is not None:
            m.write_symbol("rsa_input_key", blob or key.pack(nbits))
        if msg is not None:
            m.write_symbol("rsa_input_msg", msg.to_bytes(size // 8, "big"))
        if op:
            m.write_symbol("rsa_op", struct.pack("<I", op))
        if expected is not None:
            m.write_symbol("rsa_expected", expected)
        elif key is not None:
            m.write_symbol("rsa_check", struct.pack("<I", 0))
        r = m.run(max_cycles=MAX_CYCLES)
        return Run(r.exit_code, r.reason, m.stdout.getvalue().decode(),
                   struct.unpack("<i", m.read_symbol("rsa_status"))[0], m.read_symbol("rsa_output"),
                   r.cycles, struct.unpack("<I", m.read_symbol("rsa_ms"))[0],
                   struct.unpack("<I", m.read_symbol("rsa_montmuls"))[0])

    return run


def window_size(ebits: int, cap: int = 5) -> int:
    """Mbed TLS 3.6's exp_mod_get_window_size for MBEDTLS_MPI_WINDOW_SIZE = cap (bn.h's
    BN_WINDOW_SIZE, 5)."""
    rule = ((671, 6), (239, 5), (79, 4)) if cap >= 6 else ((239, 5), (79, 4)) if cap == 5 else ((79, cap),)
    return next((w for limit, w in rule if ebits > limit), 1) if cap > 1 else 1


def exp_montmuls(ebits: int) -> int:
    """Montgomery multiplications of one mbedtls_mpi_core_exp_mod (as bn_exp_mod) with
    an exponent of ebits bits, leading zeros included: W[0] = R mod N and W[1] = A R,
    W[2..2^w) one each, a squaring per bit, a multiplication per window (the last one
    possibly short), and the reduction out of the Montgomery domain. Nothing of it
    depends on the exponent's value."""
    w = window_size(ebits)
    return 2 ** w + ebits + -(-ebits // w) + 1


def private_montmuls(key: Key) -> int:
    """rsa_private: per prime one montmul of m mod p plus an exponentiation over the
    prime's length; two for h."""
    return 2 * (1 + exp_montmuls(key.nbits // 2)) + 2


def check_private(run: Run, key: Key, m: int) -> None:
    assert run.reason == StopReason.EXIT and run.exit_code == 0, run.stdout
    assert run.status == 0
    out = int.from_bytes(run.output[: key.nbits // 8], "big")
    assert out == pow(m, key.d, key.n)
    assert pow(out, key.e, key.n) == m % key.n
    assert run.montmuls == private_montmuls(key)


# --------------------------------------------------------------------------- RSA-2048 and RSA-4096

@pytest.mark.parametrize("index", range(KEYS_2048))
def test_rsa2048_private_matches_pow(fw, index):
    """Key 0 signs every edge message, the others one each in turn; 20 keys x all
    messages with PKASIM_FULL=1."""
    key = keys(2048, KEYS_2048)[index]
    rng = random.Random(index)
    kinds = KINDS if index == 0 or FULL else (KINDS[index % len(KINDS)],)
    for kind in kinds:
        m = message(kind, key, rng)
        expected = pow(m, key.d, key.n).to_bytes(256, "big")
        run = fw(key=key, msg=m, expected=expected)
        check_private(run, key, m)
        assert "software RSA-2048 private-key operation: signature OK" in run.stdout


def test_rsa4096_private_one_key(fw):
    """One RSA-4096 operation by default; the firmware's own SysTick figure agrees."""
    key = keys(4096, 1)[0]
    m = random.Random(4096).randrange(key.n)
    run = fw(key=key, msg=m, expected=pow(m, key.d, key.n).to_bytes(512, "big"))
    check_private(run, key, m)
    assert "software RSA-4096 private-key operation: signature OK" in run.stdout
    ms = int(re.search(r"firmware-measured: (\d+) ms", run.stdout).group(1))
    assert ms == run.ms and abs(ms - run.cycles / 48_000) < 2


@pytest.mark.parametrize("index", range(KEYS_4096))
def test_rsa4096_private_sweep(fw, index):
    key = keys(4096, KEYS_4096)[index]
    rng = random.Random(40960 + index)
    for kind in KINDS if FULL else (KINDS[index % len(KINDS)],):
        m = message(kind, key, rng)
        check_private(fw(key=key, msg=m), key, m)


def test_demo_run_signs_the_builtin_message(fw):
    run = fw()
    assert run.reason == StopReason.EXIT and run.exit_code == 0, run.stdout
    assert "software RSA-4096 private-key operation: signature OK" in run.stdout


@pytest.mark.parametrize("nbits", [2048, 4096])
def test_public_key_is_p_times_q(fw, nbits):
    for key in keys(nbits, KEYS_2048 if nbits == 2048 else 1):
        run = fw(key=key, op=1, expected=key.n.to_bytes(nbits // 8, "big"))
        assert run.status == 0 and run.exit_code == 0, run.stdout
        assert int.from_bytes(run.output[: nbits // 8], "big") == key.n
        assert "public key n = p*q: result OK" in run.stdout


def test_bad_sizes_and_keys_are_refused(fw):
    key = keys(2048, KEYS_2048)[0]
    for nbits in (0, 1000, 2047, 8192):
        run = fw(key=key, nbits=nbits, msg=0)
        assert (run.status, run.exit_code) == (RSA_ERR_NBITS, 2)
        assert "error -1" in run.stdout
    for field, byte, mask in (("p", 8 + 127, 0xFE), ("q", 264 + 127, 0xFE), ("p", 8, 0x7F)):
        blob = bytearray(key.pack())
        blob[byte] &= mask                      # an even prime, or one a bit short
        run = fw(key=key, msg=0, blob=bytes(blob))
        assert (run.status, run.exit_code) == (SOFT_RSA_ERR_KEY, 2), field


# --------------------------------------------------------------------------- the bignum core

class Probe:
    """soft_rsa_bn_call through Machine.call, operands in rsa_input_msg, result in
    rsa_output (word-aligned in this image)."""

    def __init__(self, machine, elf) -> None:
        self.m = machine
        image = machine.load(elf)
        self.inp = image.symbol("rsa_input_msg").address
        self.out = image.symbol("rsa_output").address

    def __call__(self, op: int, nl: int, a: int = 0, b: int = 0, n: int = 1, e: int = 0) -> int:
        def words(x: int, count: int) -> bytes:
            return x.to_bytes(4 * count, "little")

        block = struct.pack("<II", op, nl) + words(a, 2 * nl) + words(b, nl) + words(n, nl) + e.to_bytes(4 * nl, "big")
        self.m.write_memory(self.inp, block)
        self.m.reset()                          # call() leaves its caller frame on the stack
        self.m.call("soft_rsa_bn_call", self.inp, self.out)
        assert self.m.reg("r0") == 0
        return int.from_bytes(self.m.read_memory(self.out, 4 * (2 * nl + 2)), "little")


@pytest.fixture(scope="module")
def probe(soft_elf, config):
    return Probe(Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO()), soft_elf)


@st.composite
def modulus_and_operands(draw, top_bit: bool = False):
    nl = draw(st.integers(1, 8))
    R = 1 << (32 * nl)
    limb = st.one_of(st.sampled_from([0, 1, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF]),
                     st.integers(0, 2**32 - 1))

    def number(count: int) -> int:
        return sum(v << (32 * i) for i, v in enumerate(draw(st.lists(limb, min_size=count, max_size=count))))

    n = number(nl) | 1 | ((R >> 1) if top_bit else 0)
    if n == 1:
        n = 3
    return nl, R, n, number(nl), number(nl), number(2 * nl)


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(modulus_and_operands())
def test_montmul_and_products(probe, args):
    nl, R, n, a, b, wide = args
    b %= n
    assert probe(MONTMUL, nl, a, b, n) == a * b * pow(R, -1, n) % n
    assert probe(MUL, nl, a, b) == a * b
    k = n % 2**32
    assert probe(MUL_HLP, nl, wide, a, n) == wide + a * k
    assert probe(MUL_HLP_C, nl, wide, a, n) == wide + a * k
    assert probe(MUL_HLP_LL, nl, wide, a, n) == wide + a * k
    assert probe(MONT_INIT, nl, n=n) & 0xFFFFFFFF == (-pow(n, -1, 2**32)) % 2**32


@SETTINGS
@given(modulus_and_operands(top_bit=True), st.integers(0, 2**256 - 1))
@example((8, 2**256, 2**256 - 1, 2**256 - 2, 0, 2**512 - 1), 2**256 - 1)
@example((1, 2**32, 2**31 + 1, 2**31, 0, 2**64 - 1), 0)
def test_exponentiation_and_reductions(probe, args, e):
    nl, R, n, a, _, wide = args
    e %= R
    a %= n
    assert probe(EXP_MOD, nl, a, 0, n, e) == pow(a, e, n)
    assert probe(MOD_WIDE, nl, wide, 0, n) == wide % n
    assert probe(RR, nl, n=n) == R * R % n


@pytest.mark.parametrize("nl", [1, 2, 3, 7, 8, 16])
def test_exponentiation_follows_mbedtls_fixed_window_rule(probe, nl):
    """bn_exp_mod's Montgomery multiplications for exponent lengths either side of Mbed
    TLS 3.6's window thresholds (79 and 239 bits: windows 1, 4, 5; 32 nl bits here),
    the same for an exponent of zero, one, one bit at the top and all ones (RSA sizes
    are checked on every RSA run by check_private)."""
    n = (1 << (32 * nl - 1)) | random.Random(nl).getrandbits(32 * nl - 1) | 1
    for e in (0, 1, 1 << (32 * nl - 1), (1 << (32 * nl)) - 1, random.Random(-nl).getrandbits(32 * nl)):
        before = struct.unpack("<I", probe.m.read_symbol("bn_montmul_count"))[0]
        assert probe(EXP_MOD, nl, 12345, 0, n, e) == pow(12345, e, n)
        after = struct.unpack("<I", probe.m.read_symbol("bn_montmul_count"))[0]
        assert after - before == exp_montmuls(32 * nl)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(SIZES_SMALL), st.integers(0, 2**32 - 1), st.data())
def test_small_keys_through_the_whole_crt_path(probe, nbits, seed, data):
    """soft_rsa_private itself for keys of 128..512 bits (p < q or p > q), any input
    below 2^nbits (one >= n gives (m mod n)^d mod n), and soft_rsa_get_public_key."""
    key = small_key(nbits, random.Random(seed))
    m_in = data.draw(st.one_of(st.integers(0, key.n - 1), st.integers(0, 2**nbits - 1),
                               st.sampled_from([0, 1, key.n - 1, key.p, key.q, key.n, 2**nbits - 1])))
    mach = probe.m
    image = mach.image
    key_addr = image.symbol("rsa_input_key").address
    mach.write_memory(key_addr, key.pack())
    mach.write_memory(probe.inp, m_in.to_bytes(nbits // 8, "big"))
    mach.reset()
    mach.call("soft_rsa_private", key_addr, probe.inp, probe.out)
    assert mach.reg("r0") == 0
    out = int.from_bytes(mach.read_memory(probe.out, nbits // 8), "big")
    assert out == pow(m_in, key.d, key.n)
    mach.reset()
    mach.call("soft_rsa_get_public_key", key_addr, probe.out)
    assert int.from_bytes(mach.read_memory(probe.out, nbits // 8), "big") == key.n


# --------------------------------------------------------------------------- cost

@pytest.mark.parametrize("muls_cycles,per_block", [(1, 8 * 32 + 5), (32, 8 * (32 + 4 * 31) + 5)])
def test_inner_step_costs_what_mbedtls_thumb_code_costs(config, soft_elf, make_machine, muls_cycles, per_block):
    """bn_muladdc_thumb: Mbed TLS's Thumb-1 MULADDC_CORE is 29 instructions, 32 cycles
    with the 1-cycle multiplier (4 MULS; LDMIA, LDR, STMIA take 2), 156 with the
    32-cycle one; a block of 8 steps adds a compare and two branches (5 cycles)."""
    cfg = dataclasses.replace(config, core=dataclasses.replace(config.core, muls_cycles=muls_cycles))
    m = make_machine(cfg)
    image = m.load(soft_elf)
    s, d = image.symbol("rsa_input_msg").address, image.symbol("rsa_output").address
    m.write_memory(s, random.Random(1).randbytes(256))
    costs = []
    for n in (56, 64):
        m.write_memory(d, bytes(264))
        m.reset()
        costs.append(m.call("bn_muladdc_thumb", n, s, d, 0x9E3779B9))
    assert costs[1] - costs[0] == per_block


def test_ram_budget_leaves_the_stack_room(fw, soft_elf, make_machine):
    """.data + .bss (window table included) leave over 3 KiB of the 16 KiB SRAM for
    the stack, and an RSA-2048 operation uses a few hundred bytes of it."""
    m = make_machine()
    image = m.load(soft_elf)
    ebss, estack = image.symbol("_ebss").address, image.symbol("_estack").address
    assert estack - ebss >= 3 * 1024
    key = keys(2048, KEYS_2048)[0]
    m.write_symbol("rsa_input_key", key.pack())
    m.write_symbol("rsa_check", struct.pack("<I", 0))
    assert m.run(max_cycles=MAX_CYCLES).exit_code == 0
    stack = m.read_memory(ebss, estack - ebss)
    used = len(stack) - next(i for i in range(0, len(stack), 4) if stack[i:i + 4] != bytes(4))
    assert used < 512
