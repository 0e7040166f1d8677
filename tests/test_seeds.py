"""The seed papers' designs as what-if chips (configs/presets/, docs/reproduction.md
"Every seed's design on this chip"): each paper's headline reproduced from its own
formula, each preset's MONTMUL pinned to its paper's formula, and the xRSA images
verified on each preset against Python integers."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest

from pkasim.chip.config import load_config
from pkasim.peripherals.pka import CAPS_PAIR, Reg
from pkasim.rsa import seeds
from pkasim.rsa.bench import Job, run_job
from tests.test_pka import build_from

PRESETS = Path(__file__).resolve().parent.parent / "configs" / "presets"
CORE_HZ = 48_000_000
LENGTHS = range(1, 65)  # every LEN the default chip's 2048-bit multiplier takes


# ---- FDFM ----------------------------------------------------------------------------

@pytest.mark.parametrize("bits", sorted(seeds.FDFM_TABLE2))
def test_fdfm_equation_10_gives_table_2_clock_cycles(bits):
    assert seeds.fdfm_crt_clk(bits) == seeds.FDFM_TABLE2[bits][0]


def test_fdfm_1024_bit_crt_decryption_takes_13_74_ms_at_336_7_mhz():
    """The abstract's headline: 4,625,348 cycles (equation 10, d1 = 61, d2 = 31) at
    336.700 MHz (Table 1) = 13.737 ms (Table 2), 13.74 ms to the abstract's 2 places."""
    ms = seeds.ms_at(seeds.fdfm_crt_clk(1024), seeds.FDFM_CLOCK_HZ)
    assert round(ms, 3) == seeds.FDFM_TABLE2[1024][1] == 13.737
    assert round(ms, 2) == seeds.FDFM_HEADLINE_MS


def test_fdfm_preset_montmul_is_equation_8_at_every_length():
    pka = build_from(PRESETS / "fdfm-radix17.yaml")
    assert [pka.cycles_for("montmul", w) for w in LENGTHS] == \
        [seeds.fdfm_mm_clk(seeds.fdfm_digits(32 * w)) for w in LENGTHS]


def test_fdfm_preset_512_bit_montmul_is_the_papers_step_2_multiplication():
    """A 1024-bit CRT decryption exponentiates modulo 512-bit primes: d2 = 31 digits."""
    assert build_from(PRESETS / "fdfm-radix17.yaml").cycles_for("montmul", 16) == seeds.fdfm_mm_clk(31) == 2_174


def test_fdfm_at_its_own_clock_counts_equation_8_in_336_7_mhz_cycles():
    pka = build_from(PRESETS / "fdfm-radix17-336mhz.yaml")
    assert [pka.cycles_for("montmul", w) for w in LENGTHS] == \
        [seeds.core_cycles(seeds.fdfm_mm_clk(seeds.fdfm_digits(32 * w)), CORE_HZ, seeds.FDFM_CLOCK_HZ) for w in LENGTHS]


# ---- Victor --------------------------------------------------------------------------

def test_victor_preset_montmul_is_t_mult_at_every_length():
    pka = build_from(PRESETS / "victor-radix16.yaml")
    assert [pka.cycles_for("montmul", w) for w in LENGTHS] == [seeds.victor_mult_cycles(32 * w) for w in LENGTHS]
    assert pka.cycles_for("montmul", 64) == 1_030


@pytest.mark.parametrize("k", [4, 5])
def test_victor_efficiency_formula_gives_the_papers_figures_at_512_bits(k):
    """3.8 for k = 4 (the preset's scan factor) and 4.8 for k = 5."""
    assert round(float(seeds.victor_efficiency(512, k)), 1) == seeds.VICTOR_EFFICIENCY_512[k]


def test_victor_preset_montmul_is_the_efficiency_formulas_count_but_for_its_ceiling():
    """The formula divides n bits by 2n((n+1)/4 + 2) cycles: one multiplication (with
    its parallel partner) per exponent bit, 2((n+1)/4 + 2) cycles each. T[Mult, n]
    counts whole digits, ceil((n+1)/4): 1.5 cycles more for every n = 32 LEN."""
    for w in LENGTHS:
        n = 32 * w
        per_mult = Fraction(n * 1000) / seeds.victor_efficiency(n) / n
        assert seeds.victor_mult_cycles(n) - per_mult == Fraction(3, 2)


def test_victor_preset_reports_the_parallel_pair():
    pka = build_from(PRESETS / "victor-radix16.yaml")
    assert pka.read(Reg.CAPS, 4) == CAPS_PAIR


# ---- Montgomery with a Kogge-Stone adder ---------------------------------------------

def test_ksa_clock_is_table_1s_512_bit_modified_montgomery_row():
    assert seeds.KSA_CLOCK_HZ == round(1e9 / seeds.KSA_MIN_PERIOD_NS[512], -4)  # 1 / 3.298 ns = 303.21 MHz
    assert load_config(PRESETS / "montgomery-ksa.yaml").peripherals["pka"].params["clock_hz"] == seeds.KSA_CLOCK_HZ


def test_ksa_preset_montmul_is_3n_plus_3_cycles_at_its_clock():
    pka = build_from(PRESETS / "montgomery-ksa.yaml")
    assert [pka.cycles_for("montmul", w) for w in LENGTHS] == \
        [seeds.core_cycles(seeds.ksa_mm_clk(32 * w), CORE_HZ, seeds.KSA_CLOCK_HZ) for w in LENGTHS]
    assert pka.cycles_for("montmul", 64) == math.ceil(6_147 * 48 / 303.21) == 974


# ---- TMS320C54x ----------------------------------------------------------------------

@pytest.mark.parametrize("bits", [1024, 2048])
def test_tms320c54x_table_4_is_tables_1_and_3_cycles_at_25_ns(bits):
    """Table 4's standard and optimized (CRT) times are Table 1's Stddiv and Table 3's
    CRT Mont cycle counts at a 25 ns cycle, to the table's 0.01 ms."""
    by = {(f.crt, f.source): f.cycles for f in seeds.TMS320C54X if f.bits == bits}
    standard, optimized = seeds.TMS320C54X_TABLE4_25NS[bits]
    assert round(by[(False, "Table 1, Stddiv")] * 25e-6, 2) == standard
    assert round(by[(True, "Table 3, CRT Mont")] * 25e-6, 2) == optimized


# ---- the xRSA images on each preset ---------------------------------------------------

@pytest.mark.parametrize("preset", ["fdfm-radix17.yaml", "victor-radix16.yaml", "montgomery-ksa.yaml"])
def test_xrsa_paper_variant_rsa4096_on_the_preset_equals_python_integers(preset):
    result = run_job(load_config(PRESETS / preset), Job("rsa4096", "RSA-4096", "xrsa.elf", 4096, "pka"))
    assert result.verified
    assert result.pka_operations["MONTMUL"] == 12_306  # the firmware's count does not depend on the timing


def test_pair_firmware_rsa4096_on_victor_uses_the_pair_and_equals_python_integers():
    result = run_job(load_config(PRESETS / "victor-radix16.yaml"), Job("rsa4096", "RSA-4096", "xrsa_pair.elf", 4096, "pka"))
    assert result.verified
    assert result.pka_operations["MONTMUL2"] == 2 * 2048


def test_pair_firmware_on_victor_does_one_montmul2_per_exponent_bit():
    """RSA-2048 by CRT: two 1024-bit exponents, Victor's Algorithm 1 with the pair."""
    result = run_job(load_config(PRESETS / "victor-radix16.yaml"), Job("rsa2048", "RSA-2048", "xrsa_pair.elf", 2048, "pka"))
    assert result.verified
    assert result.pka_operations["MONTMUL2"] == 2 * 1024


def test_busy_times_docs_pka_md_quotes_for_the_presets():
    quoted = {"fdfm-radix17.yaml": (30_254, 7_934), "fdfm-radix17-336mhz.yaml": (4_314, 1_132),
              "victor-radix16.yaml": (1_030, 518), "montgomery-ksa.yaml": (974, 487)}
    for preset, (len64, len32) in quoted.items():
        pka = build_from(PRESETS / preset)
        assert (pka.cycles_for("montmul", 64), pka.cycles_for("montmul", 32)) == (len64, len32), preset
