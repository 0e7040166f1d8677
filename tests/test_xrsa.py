"""The xRSA firmware (firmware/images/xrsa.c, src/rsa.c, src/pka.c) on the emulated PKA.

RSA-2048 (CRT on the multiplier) and RSA-4096 (xRSA) private-key operations against
Python's pow(), for keys generated here with `cryptography` (e = 65537): 20 per size,
once per session. Each key signs one message through the firmware; the keys alternate
between the paper variant (xrsa.elf) and the optimized one (xrsa_opt.elf), so each
variant sees 10 keys per size, and the messages cycle through random ones and the
edge cases 0, 1, N-1, m < p and m > p. Every run also pins the PKA's operation
counts (docs/xrsa.md) and the run's cycle count, which must be the same for every
key and message of a size and variant (Algorithm 3's constant time).

tests/xrsa_model.py, the same sequence of PKA operations in Python, is checked too,
and against the firmware operation by operation.
"""

from __future__ import annotations

import functools
import io
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from xrsa_model import LAYOUT_H, Key, algorithm2, expected_montmuls, read_layout
from xrsa_model import rsa_get_public_key as model_public_key
from xrsa_model import rsa_private as model_private

from pkasim.core.machine import Machine, StopReason

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "firmware" / "tools"))
from gen_demo_key import read_header  # noqa: E402

KEYS_PER_SIZE = 20
SIZES = (2048, 4096)
IMAGES = {"paper": "xrsa", "opt": "xrsa_opt"}
# Montgomery multiplications of one rsa_private, derived step by step in docs/xrsa.md.
MONTMULS = {(4096, "paper"): 12_306, (4096, "opt"): 8_223, (2048, "paper"): 6_156, (2048, "opt"): 4_122}
PUBLIC_MONTMULS = {4096: 4, 2048: 1}
KINDS = ("random", "0", "random", "1", "random", "N-1", "random", "m<p", "random", "m>p")
MAX_CYCLES = 10**9
RSA_ERR_NBITS, PKA_ERR_OP = -1, -2


# --------------------------------------------------------------------------- keys and messages

@functools.cache
def keys(nbits: int) -> tuple[Key, ...]:
    out = []
    for _ in range(KEYS_PER_SIZE):
        k = rsa.generate_private_key(public_exponent=65537, key_size=nbits).private_numbers()
        out.append(Key(nbits, k.public_numbers.e, k.p, k.q, k.dmp1, k.dmq1, k.iqmp))
    return tuple(out)


def message(kind: str, key: Key, rng: random.Random) -> int:
    n, p = key.n, key.p
    return {
        "random": lambda: rng.randrange(n),
        "0": lambda: 0,
        "1": lambda: 1,
        "N-1": lambda: n - 1,
        "m<p": lambda: rng.randrange(2, p),
        "m>p": lambda: rng.randrange(p + 1, n),
        "m=p": lambda: p,
        "m=q": lambda: key.q,
    }[kind]()


# --------------------------------------------------------------------------- running the firmware

@dataclass
class Run:
    exit_code: int | None
    reason: StopReason
    stdout: str
    status: int
    output: bytes
    cycles: int
    ms: int
    stats: dict


@pytest.fixture(scope="module")
def fw(config, elf):
    """``fw(image, key=..., msg=..., op=0, expected=None)``: one run of an xRSA image."""
    machines: dict[str, Machine] = {}

    def run(image: str, *, key: Key | None = None, nbits: int | None = None, msg: int | None = None,
            op: int = 0, expected: bytes | None = None, check: bool | None = None) -> Run:
        m = machines.get(image)
        if m is None:
            m = machines[image] = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
        m.load(elf(image))
        size = nbits or (key.nbits if key else 4096)
        if key is not None:
            m.write_symbol("rsa_input_key", key.pack(nbits))
        if msg is not None:
            m.write_symbol("rsa_input_msg", msg.to_bytes(size // 8, "big"))
        if op:
            m.write_symbol("rsa_op", op.to_bytes(4, "little"))
        if expected is not None:
            m.write_symbol("rsa_expected", expected)
        if check is not None:
            m.write_symbol("rsa_check", int(check).to_bytes(4, "little"))
        start = len(m.stdout.getvalue())
        r = m.run(max_cycles=MAX_CYCLES)
        return Run(
            exit_code=r.exit_code, reason=r.reason, stdout=m.stdout.getvalue()[start:].decode(),
            status=int.from_bytes(m.read_symbol("rsa_status"), "little", signed=True),
            output=m.read_symbol("rsa_output")[:size // 8], cycles=r.cycles,
            ms=int.from_bytes(m.read_symbol("rsa_ms"), "little"), stats=m.peripherals["pka"].stats(),
        )

    return run


@pytest.fixture(scope="module")
def batch(fw):
    """``batch(nbits, variant)``: rsa_private on the variant's 10 keys, once per module."""
    done: dict[tuple[int, str], list] = {}

    def get(nbits: int, variant: str) -> list[tuple[str, Key, int, Run]]:
        if (nbits, variant) not in done:
            rng = random.Random(f"xrsa-{nbits}-{variant}")
            records = []
            for j, key in enumerate(keys(nbits)[list(IMAGES).index(variant)::2]):
                kind = KINDS[j % len(KINDS)]
                m = message(kind, key, rng)
                records.append((kind, key, m, fw(IMAGES[variant], key=key, msg=m, check=False)))
            done[(nbits, variant)] = records
        return done[(nbits, variant)]

    return get


CASES = [pytest.param(nbits, variant, id=f"{nbits}-{variant}") for nbits in SIZES for variant in IMAGES]


# --------------------------------------------------------------------------- rsa_private

@pytest.mark.parametrize("nbits,variant", CASES)
def test_rsa_private_matches_pow(batch, nbits, variant):
    records = batch(nbits, variant)
    assert len(records) == KEYS_PER_SIZE // 2
    assert {kind for kind, *_ in records} == set(KINDS)
    for kind, key, m, run in records:
        what = f"{kind} message, key p={key.p:#x}"
        assert run.reason == StopReason.EXIT and run.exit_code == 0, (what, run.stdout)
        assert run.status == 0, what
        s = int.from_bytes(run.output, "big")
        assert s == pow(m, key.d, key.n), what
        assert pow(s, key.e, key.n) == m, what  # the signature verifies with the public key
        assert f"RSA-{nbits} private-key operation" in run.stdout


@pytest.mark.parametrize("nbits,variant", CASES)
def test_montmul_count_is_pinned(batch, nbits, variant):
    """The PKA's counters for one rsa_private: docs/xrsa.md's count, and the model's
    sequence operation for operation (every kind and length)."""
    records = batch(nbits, variant)
    assert sum(expected_montmuls(nbits, variant).values()) == MONTMULS[(nbits, variant)]
    for _, _, _, run in records:
        assert run.stats["operations"]["MONTMUL"] == MONTMULS[(nbits, variant)]
        assert not any(run.stats["errors"].values())
    _, key, m, run = records[0]
    s, model = model_private(key, m, variant)
    assert s == int.from_bytes(run.output, "big")
    assert run.stats["by_length"] == {f"{op.lower()}/{w}": c for (op, w), c in sorted(model.by_length.items())}


@pytest.mark.parametrize("nbits,variant", CASES)
def test_cycle_count_does_not_depend_on_key_or_message(batch, nbits, variant):
    records = batch(nbits, variant)
    cycles = {run.cycles for *_, run in records}
    assert len(cycles) == 1, sorted(cycles)
    assert len({run.ms for *_, run in records}) == 1
    assert len({run.stats["busy_cycles"] for *_, run in records}) == 1
    # SysTick's 1 ms count agrees with the modeled time of the run.
    (c,) = cycles
    assert abs(records[0][3].ms - c / 48_000) < 2


def test_demo_signs_with_the_built_in_key(fw):
    """`pkasim run firmware/build/xrsa.elf` with no input: the demo key and message."""
    demo = read_header()
    run = fw("xrsa")
    assert run.reason == StopReason.EXIT and run.exit_code == 0, run.stdout
    assert "xRSA RSA-4096 private-key operation (paper variant): signature OK" in run.stdout
    assert re.search(r"firmware-measured: \d+ ms", run.stdout)
    assert run.output == demo["DEMO_SIG"]
    n = int.from_bytes(demo["DEMO_N"], "big")
    e = int.from_bytes(demo["DEMO_E"], "big")
    rsa.RSAPublicNumbers(e, n).public_key().verify(
        run.output, b"pkasim: RSA-4096 on a 2048-bit Montgomery multiplier (xRSA)", padding.PKCS1v15(), hashes.SHA256())
    assert run.stats["operations"]["MONTMUL"] == MONTMULS[(4096, "paper")]


def test_a_wrong_result_exits_1(fw):
    key = keys(2048)[0]
    run = fw("xrsa_opt", key=key, msg=5, expected=bytes(256), check=True)
    assert run.exit_code == 1 and "signature MISMATCH" in run.stdout
    assert int.from_bytes(run.output, "big") == pow(5, key.d, key.n)


# --------------------------------------------------------------------------- rsa_get_public_key

@pytest.mark.parametrize("nbits", SIZES)
def test_get_public_key_is_p_times_q(fw, nbits):
    for i, key in enumerate(keys(nbits)):
        run = fw(IMAGES["paper" if i % 2 else "opt"], key=key, op=1, check=False)
        assert run.exit_code == 0 and run.status == 0, run.stdout
        assert int.from_bytes(run.output, "big") == key.p * key.q
        assert run.stats["operations"] == {"MONTMUL": PUBLIC_MONTMULS[nbits], **({"ADD": 3} if nbits == 4096 else {})}


# --------------------------------------------------------------------------- errors

def test_unsupported_size_is_refused(fw):
    run = fw("xrsa_opt", key=keys(2048)[0], nbits=3072, msg=5)
    assert run.status == RSA_ERR_NBITS and run.exit_code == 2
    assert "error -1" in run.stdout
    assert not run.stats["operations"]


def test_pka_error_is_reported(fw):
    """An even 'prime' breaks MONTMUL's rule: the PKA raises OPERRF, rsa_private stops.
    (A refusal in the first exponentiation sends rsa_private to its build for a strict
    PKA, docs/xrsa.md "A strict PKA", which the PKA refuses again: two OPERRFs.)"""
    key = keys(2048)[0]
    bad = Key(2048, key.e, key.p, key.q + 1, key.dp, key.dq, key.qinv)
    run = fw("xrsa_opt", key=bad, msg=5)
    assert run.status == PKA_ERR_OP and run.exit_code == 2
    assert run.stats["errors"]["OPERRF"] == 2
    assert "MONTMUL" not in run.stats["operations"]


# --------------------------------------------------------------------------- PKA RAM layout

def layout_problems(regions: dict[str, tuple[int, int]], phases: dict[str, list[str]], ram_words: int) -> list[str]:
    """Every region inside PKA RAM; regions live in the same phase disjoint."""
    problems = [f"{name} ends at word {off + n} > {ram_words}" for name, (off, n) in regions.items() if off + n > ram_words]
    for phase, names in phases.items():
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                (oa, na), (ob, nb) = regions[a], regions[b]
                if oa < ob + nb and ob < oa + na:
                    problems.append(f"phase {phase}: {a} and {b} overlap")
    return problems


def test_pka_ram_layout_fits_the_chip(config):
    regions, phases, ram_words = read_layout()
    pka_words = config.peripherals["pka"].params["ram_size"] // 4
    assert ram_words == pka_words, "rsa_layout.h's LAY_RAM_WORDS is not the chip's PKA RAM"
    # The native path's phases (NAT_*, a chip with MAXLEN >= 128) are checked too:
    # tests/test_native4096.py checks them against that chip's RAMSIZE.
    assert set(phases) == {"EXP", "SPLIT", "M", "N", "D", "NAT_SPLIT", "NAT_M", "NAT_N", "NAT_D"}
    assert all(name in regions for names in phases.values() for name in names)
    assert layout_problems(regions, phases, pka_words) == []
    # The biggest phase of RSA-4096 (N next to M) fills the 3 KiB exactly.
    assert sum(regions[r][1] for r in phases["N"]) == pka_words


def test_layout_check_catches_overflow_and_overlap():
    regions = {"A": (0, 64), "B": (32, 64), "C": (700, 128)}
    assert layout_problems(regions, {"X": ["A", "C"]}, 768) == ["C ends at word 828 > 768"]
    assert layout_problems(regions, {"X": ["A", "B"]}, 1024) == ["phase X: A and B overlap"]


def test_driver_constants_match_the_chip(config, elf):
    """pka.h's base, IRQ, RAM size and operand limit are the chip description's, and the
    IRQ's vector is the driver's handler."""
    text = (REPO / "firmware" / "src" / "pka.h").read_text()
    defs = {m[1]: int(m[2], 0) for m in re.finditer(r"^#define\s+(PKA_\w+)\s+(0x[0-9a-fA-F]+|\d+)u?\b", text, re.M)}
    pka = config.peripherals["pka"]
    assert defs["PKA_BASE"] == pka.base and defs["PKA_IRQ"] == pka.irq
    assert defs["PKA_RAM_BYTES"] == pka.params["ram_size"] and defs["PKA_MAX_WORDS"] == pka.params["max_words"]
    assert re.search(rf"#define\s+PKA_IRQHandler\s+IRQ{pka.irq}_Handler\b", text)
    assert f"LAY_RAM_WORDS {pka.params['ram_size'] // 4} " in LAYOUT_H.read_text()
    for image in IMAGES.values():
        m = Machine(config)
        img = m.load(elf(image))
        vector = m.read_u32(4 * (16 + pka.irq))
        assert vector & ~1 == img.symbol(f"IRQ{pka.irq}_Handler").address & ~1
        assert img.symbol(f"IRQ{pka.irq}_Handler").address != img.symbol("Default_Handler").address


# --------------------------------------------------------------------------- the Python model

@pytest.mark.parametrize("nbits,variant", CASES)
def test_model_counts_by_step(nbits, variant):
    key = keys(nbits)[0]
    s, pka = model_private(key, 7, variant)
    assert s == pow(7, key.d, key.n)
    assert pka.steps() == expected_montmuls(nbits, variant)
    assert pka.montmuls() == MONTMULS[(nbits, variant)]


@pytest.mark.parametrize("nbits", SIZES)
def test_algorithm2_erratum(nbits):
    """As printed, Algorithm 2 squares: s_n = 2^(2^(n-1)) R, not R^2. Multiplying by
    s_1 = 2R each step gives R^2 in n - 1 MONTMULs; squaring gives it in log2(n)."""
    n = nbits // 2
    p = keys(nbits)[2].p
    r = 1 << n
    printed, count = algorithm2(p, n, "printed")
    assert count == n - 1 and printed != r * r % p
    assert printed == pow(2, 1 << (n - 1), p) * r % p
    assert algorithm2(p, n, "corrected") == (r * r % p, n - 1)
    assert algorithm2(p, n, "squaring") == (r * r % p, n.bit_length() - 1)


def test_model_optimized_is_a_third_fewer():
    assert 0.30 < 1 - MONTMULS[(4096, "opt")] / MONTMULS[(4096, "paper")] < 0.37
    assert 0.30 < 1 - MONTMULS[(2048, "opt")] / MONTMULS[(2048, "paper")] < 0.37


@pytest.mark.parametrize("variant", IMAGES)
def test_model_matches_pow_on_edge_cases(variant):
    rng = random.Random(3)
    for nbits, nkeys, kinds in ((2048, 3, ("random", "0", "1", "N-1", "m<p", "m>p", "m=p", "m=q")),
                                (4096, 1, ("N-1", "m=p", "m=q"))):
        for key in keys(nbits)[:nkeys]:
            for kind in kinds:
                m = message(kind, key, rng)
                assert model_private(key, m, variant)[0] == pow(m, key.d, key.n), (nbits, kind)


@pytest.mark.parametrize("nbits", SIZES)
def test_model_public_key(nbits):
    key = keys(nbits)[1]
    n, pka = model_public_key(key)
    assert n == key.n and pka.montmuls() == PUBLIC_MONTMULS[nbits]
