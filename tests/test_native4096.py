"""RSA-4096 on a hypothetical chip whose PKA multiplies 4096-bit operands natively.

configs/native4096.yaml is the default chip with ``max_words: 128`` and 6 KiB of PKA
RAM (issue #4's what-if, the paper's comparison with a YubiKey's native RSA-4096). The
same xRSA images run on it: the firmware reads MAXLEN and RAMSIZE (docs/pka.md) and, for
RSA-4096, makes h*q (and p*q for equation 3) with one LEN-128 MONTMUL modulo 2^4096 - 1
instead of Table II's four LEN-64 ones (docs/xrsa.md, "A chip with a native 4096-bit
multiplier"). The exponentiations stay at LEN 64. On the default chip nothing changes:
no LEN-128 operation is ever started.
"""

from __future__ import annotations

import functools
import io
import random
import re

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from xrsa_model import LAYOUT_H, Key, expected_montmuls, read_layout

from pkasim.chip.config import load_config
from pkasim.core.machine import Machine, StopReason

NKEYS = 3
MAX_CYCLES = 10**9
VARIANTS = {"paper": "xrsa", "opt": "xrsa_opt"}
# docs/xrsa.md: the default chip's counts (12,306 / 8,223) with Table II's four LEN-64
# products for h*q (and for p*q in the paper variant) replaced by one LEN-128 product.
NATIVE_MONTMULS = {"paper": 12_300, "opt": 8_220}
DEFAULT_MONTMULS = {"paper": 12_306, "opt": 8_223}
NATIVE_BY_LENGTH = {
    "paper": {"montmul/64": 12_298, "montmul/128": 2, "modadd/64": 6, "modsub/64": 1, "add/128": 1, "sub/128": 1},
    "opt": {"montmul/64": 8_219, "montmul/128": 1, "modadd/64": 6, "modsub/64": 1, "add/128": 1},
}


@pytest.fixture(scope="module")
def native(repo):
    return load_config(repo / "configs" / "native4096.yaml")


@functools.cache
def keys() -> tuple[Key, ...]:
    out = []
    for _ in range(NKEYS):
        k = rsa.generate_private_key(public_exponent=65537, key_size=4096).private_numbers()
        out.append(Key(4096, k.public_numbers.e, k.p, k.q, k.dmp1, k.dmq1, k.iqmp))
    return tuple(out)


@pytest.fixture(scope="module")
def run(elf):
    """``run(config, image, key, msg=None, op=0)``: (output int, cycles, PKA stats)."""
    machines: dict[tuple[str, str], Machine] = {}

    def go(config, image: str, key: Key, msg: int | None = None, op: int = 0) -> tuple[int, int, dict]:
        m = machines.get((config.source, image))
        if m is None:
            m = machines[(config.source, image)] = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
        m.load(elf(image))
        m.write_symbol("rsa_input_key", key.pack())
        if msg is not None:
            m.write_symbol("rsa_input_msg", msg.to_bytes(key.nbits // 8, "big"))
        m.write_symbol("rsa_op", op.to_bytes(4, "little"))
        m.write_symbol("rsa_check", bytes(4))
        r = m.run(max_cycles=MAX_CYCLES)
        status = int.from_bytes(m.read_symbol("rsa_status"), "little", signed=True)
        assert r.reason == StopReason.EXIT and r.exit_code == 0 and status == 0, m.stdout.getvalue()
        out = int.from_bytes(m.read_symbol("rsa_output")[:key.nbits // 8], "big")
        return out, r.cycles, m.peripherals["pka"].stats()

    return go


@pytest.fixture(scope="module")
def native_runs(native, run):
    """rsa_private on the native chip, every key with both variants, once per module."""
    rng = random.Random("native4096")
    records = {}
    for variant, image in VARIANTS.items():
        records[variant] = []
        for key, kind in zip(keys(), ("random", "N-1", "m>p")):
            m = {"random": rng.randrange(key.n), "N-1": key.n - 1, "m>p": rng.randrange(key.p + 1, key.n)}[kind]
            records[variant].append((key, m, *run(native, image, key, m)))
    return records


def test_the_chip_is_the_default_one_with_a_4096_bit_pka(native, config):
    pka, base = native.peripherals["pka"].params, config.peripherals["pka"].params
    assert (pka["max_words"], pka["ram_size"]) == (128, 6 * 1024)
    assert pka["timing"] == base["timing"] and pka["digit_bits"] == base["digit_bits"]
    assert native.core == config.core and native.memory == config.memory
    assert "hypothetical" in native.chip


@pytest.mark.parametrize("variant", VARIANTS)
def test_rsa4096_private_matches_pow(native_runs, variant):
    for key, m, s, _, stats in native_runs[variant]:
        assert s == pow(m, key.d, key.n)
        assert pow(s, key.e, key.n) == m
        assert not any(stats["errors"].values())


@pytest.mark.parametrize("variant", VARIANTS)
def test_products_are_native_len_128_operations(native_runs, variant):
    """One LEN-128 MONTMUL for h*q (and one for N = p*q), one LEN-128 ADD (and SUB);
    the exponentiations stay at LEN 64; nothing at LEN 32 (no Table II halves)."""
    steps = expected_montmuls(4096, variant)
    assert steps["step 4: S_q + h*q"] == 4 and steps.get("equation 3: N = p*q", 4) == 4
    native_steps = {**steps, "step 4: S_q + h*q": 1}
    if variant == "paper":
        native_steps["equation 3: N = p*q"] = 1
    assert sum(native_steps.values()) == NATIVE_MONTMULS[variant]
    for *_, stats in native_runs[variant]:
        assert stats["operations"]["MONTMUL"] == NATIVE_MONTMULS[variant]
        assert stats["by_length"] == NATIVE_BY_LENGTH[variant]


@pytest.mark.parametrize("variant", VARIANTS)
def test_native_path_is_constant_time_and_a_little_faster(native_runs, run, config, variant):
    cycles = {c for *_, c, _ in native_runs[variant]}
    assert len(cycles) == 1, sorted(cycles)
    key, m, s, native_cycles, _ = native_runs[variant][0]
    s_default, default_cycles, stats = run(config, VARIANTS[variant], key, m)
    assert s_default == s
    # The native multiplier only shortens the recombination: well under 0.1 %.
    assert 0 < default_cycles - native_cycles < default_cycles / 1000


@pytest.mark.parametrize("variant", VARIANTS)
def test_default_chip_never_starts_a_len_128_operation(run, config, variant):
    key = keys()[0]
    s, _, stats = run(config, VARIANTS[variant], key, 12345)
    assert s == pow(12345, key.d, key.n)
    assert stats["operations"]["MONTMUL"] == DEFAULT_MONTMULS[variant]
    assert not any(stats["errors"].values())  # no START refused (LEN 128 would be OPERRF)
    assert all(int(k.split("/")[1]) <= 64 for k in stats["by_length"])
    n, _, stats = run(config, VARIANTS[variant], key, op=1)
    assert n == key.n and stats["operations"] == {"MONTMUL": 4, "ADD": 3}
    assert all(int(k.split("/")[1]) <= 64 for k in stats["by_length"])


def test_public_key_is_one_len_128_product(native, run):
    for i, key in enumerate(keys()):
        n, _, stats = run(native, VARIANTS["paper" if i % 2 else "opt"], key, op=1)
        assert n == key.n
        assert stats["by_length"] == {"montmul/128": 1}


def test_rsa2048_is_unchanged_on_the_native_chip(native, config, run):
    """RSA-2048's product h*q is one LEN-64 MONTMUL on any chip: same operations, same time."""
    k = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_numbers()
    key = Key(2048, 65537, k.p, k.q, k.dmp1, k.dmq1, k.iqmp)
    for image in VARIANTS.values():
        s_nat, c_nat, st_nat = run(native, image, key, 99)
        s_def, c_def, st_def = run(config, image, key, 99)
        assert s_nat == s_def == pow(99, key.d, key.n)
        assert st_nat["by_length"] == st_def["by_length"] and c_nat == c_def


def test_native_layout_fits_the_ram_it_asks_for(native):
    """rsa_layout.h's NAT_* regions: inside LAY_NAT_RAM_WORDS, disjoint phase by phase,
    and LAY_NAT_RAM_WORDS within the native chip's PKA RAM (what rsa.c checks against
    RAMSIZE at run time). NAT_SQ is SQ zero-extended in place."""
    regions, phases, _ = read_layout()
    need = int(re.search(r"^#define\s+LAY_NAT_RAM_WORDS\s+(\d+)\b", LAYOUT_H.read_text(), re.M)[1])
    assert need <= native.peripherals["pka"].params["ram_size"] // 4
    nat = {name: names for name, names in phases.items() if name.startswith("NAT_")}
    assert set(nat) == {"NAT_SPLIT", "NAT_M", "NAT_N", "NAT_D"}
    for phase, names in nat.items():
        for i, a in enumerate(names):
            (oa, na) = regions[a]
            assert oa + na <= need, (phase, a)
            for b in names[i + 1:]:
                (ob, nb) = regions[b]
                assert oa + na <= ob or ob + nb <= oa, (phase, a, b)
    assert all(regions[r][1] == 128 for r in ("NAT_MOD", "NAT_N", "NAT_X", "NAT_Y", "NAT_ACC", "NAT_SQ"))
    assert regions["NAT_SQ"][0] == regions["SQ"][0]
