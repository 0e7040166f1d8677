"""The seed papers' own formulas and measured figures, each with where it comes from.

The what-if presets in configs/presets/ time pkasim's PKA as the multipliers of these
papers (/work/shared/papers/, docs/reproduction.md "Every seed's design on this chip").
This module states each paper's formula once, so that the tests can check a preset's
busy times and the papers' own headline figures against the same source, and
docs/reproduction.md can quote them. Nothing here runs the emulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

# ---- FDFM: Ito, Nakano, Song, "The Parallel FDFM Processor Core Approach for
# CRT-based RSA Decryption" -----------------------------------------------------------

FDFM_RADIX_BITS = 17  # section 5.1.1: radix 2^17, the DSP48E1's 17-bit multiplier
FDFM_CLOCK_HZ = 336_700_000  # Table 1 (single core) and section 1: 336.700 MHz


def fdfm_digits(bits: int) -> int:
    """d = ceil(R / 17) (section 5.1.1)."""
    return -(-bits // FDFM_RADIX_BITS)


def fdfm_mm_clk(d: int) -> int:
    """Equation (8): MM_clk = ((d + 1) 2 + 6) d + 4 = 2d^2 + 8d + 4 clock cycles."""
    return ((d + 1) * 2 + 6) * d + 4


def fdfm_crt_clk(bits: int) -> int:
    """Equation (10): clock cycles of one CRT decryption of an R-bit modulus, worst
    case (every exponent bit 1), d1 = ceil(R/17), d2 = ceil(R/34) (Table 2's rows)."""
    d1, d2 = fdfm_digits(bits), fdfm_digits(bits // 2)
    per_prime = (fdfm_mm_clk(d2) * (2 * d2 * 17 + 4)
                 + (2 * d1 * d2 + 8 * d2 + 4) + (2 * d2 * d1 + 8 * d1 + 4) + (2 * d1 * d2 + 8 * d1 + 4))
    return 2 * per_prime


# Table 2: clock cycles and ms with CRT, worst case, by bit length R.
FDFM_TABLE2 = {64: (4_312, 0.013), 128: (19_768, 0.059), 256: (110_392, 0.328), 512: (713_048, 2.118),
               1024: (4_625_348, 13.737), 2048: (33_067_148, 98.210)}
FDFM_HEADLINE_MS = 13.74  # abstract: "1024-bit RSA decryption runs in 13.74ms"


# ---- Victor: Orup, Svendsen, Andreasen, "VICTOR: an efficient RSA hardware
# implementation" ---------------------------------------------------------------------

VICTOR_SCAN_BITS = 4  # k, the scan factor of the efficiency formula (section 4)
VICTOR_LOOP_CYCLES = 2  # section 4: "in a pipelined version each loop takes two clock cycles"


def victor_mult_cycles(n: int, k: int = VICTOR_SCAN_BITS) -> int:
    """Section 3: T[Mult, n] = (ceil((n + 1) / k) + 2) T[loop], T[loop] = 2 cycles."""
    return (-(-(n + 1) // k) + 2) * VICTOR_LOOP_CYCLES


def victor_efficiency(n: int, k: int = VICTOR_SCAN_BITS) -> Fraction:
    """Section 4: n*1000 / (2n((n+1)/4 + 2)) bits per 1000 cycles for k = 4 (the two
    multiplications of each exponent bit in parallel: T[Exp, n] = n T[Mult, n]); the
    paper's k = 5 figure puts (n+1)/5 in its place."""
    return Fraction(n * 1000) / (2 * n * (Fraction(n + 1, k) + 2))


# Section 4: "for n = 512 we achieve an efficiency of 3.8 for k = 4 and 4.8 for k = 5".
VICTOR_EFFICIENCY_512 = {4: 3.8, 5: 4.8}


# ---- Montgomery with a Kogge-Stone adder: D. J. Vincent, "Fast and Area Efficient
# RSA Cryptosystem Design Using Modified Montgomery Multiplication for FPGA
# Applications" -----------------------------------------------------------------------

# Table I, modified Montgomery: minimum period (ns) by operand size (bits).
KSA_MIN_PERIOD_NS = {32: Fraction("1.878"), 128: Fraction("2.150"), 512: Fraction("3.298")}
KSA_MAX_FREQ_HZ = {32: 532_480_000, 128: 465_120_000, 512: 303_210_000}  # Table I, "Max.Freq"
KSA_CLOCK_HZ = KSA_MAX_FREQ_HZ[512]  # the table's widest row (the preset's assumption)


def ksa_mm_clk(n: int) -> int:
    """Section 2.2's controller: states S2, S3, S4 for each of the n radix-2
    iterations, S0, S1 and S5 once: 3n + 3 cycles of the multiplier's clock."""
    return 3 * n + 3


# ---- TMS320C54x: Markovic, Djordjevic, Unkasevic, "On optimizing RSA algorithm
# implementation on signal processor: influence of asymmetric key length" -------------

@dataclass(frozen=True)
class DspFigure:
    """One measured private-key operation on the 'C54x."""

    bits: int
    crt: bool
    method: str
    cycles: int
    source: str


TMS320C54X = (
    DspFigure(1024, False, "standard: ordinary multiplication, division", 83_851_837, "Table 1, Stddiv"),
    DspFigure(1024, False, "Montgomery, squaring, Karatsuba-Offman", 43_321_105, "Table 3, Mont"),
    DspFigure(1024, True, "Montgomery, squaring, Karatsuba-Offman", 16_791_452, "Table 3, CRT Mont"),
    DspFigure(2048, False, "standard: ordinary multiplication, division", 569_165_635, "Table 1, Stddiv"),
    DspFigure(2048, False, "Montgomery, squaring, Karatsuba-Offman", 305_680_740, "Table 3, Mont"),
    DspFigure(2048, True, "Montgomery, squaring, Karatsuba-Offman", 112_005_224, "Table 3, CRT Mont"),
)
# Table 4 at a 25 ns cycle: (standard ms, optimized with CRT ms) by key length.
TMS320C54X_TABLE4_25NS = {1024: (2096.30, 419.79), 2048: (14229.14, 2800.13)}
TMS320C54X_FASTEST_NS = Fraction("1.875")  # Table 4's fastest 'C54x cycle


def efficiency(bits: int, cycles: int) -> float:
    """Victor's measure: bits of result per 1000 clock cycles (clock-independent)."""
    return bits * 1000 / cycles if cycles else 0.0


def ms_at(cycles: int, hz: int) -> float:
    """Time in ms of ``cycles`` at ``hz``."""
    return cycles * 1000 / hz


def core_cycles(pka_cycles: int, core_hz: int, pka_hz: int) -> int:
    """A PKA with its own clock (chip file ``clock_hz``): its cycles in core cycles."""
    return math.ceil(Fraction(pka_cycles * core_hz, pka_hz))
