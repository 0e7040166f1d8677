"""The chip file's ``power:`` section: the weights of the leakage model (docs/power.md).

The CPU's leakage is one number per instruction, a weighted sum of Hamming weights and
distances on its operand buses, its register writes and the data bus
(``emulator/native/leakage.c``), with one set of weights per instruction class. The
PKA's leakage is one number per busy cycle from the operand digits its datapath reads
and writes (``pkasim.analysis.power.pka``). Every weight has a default, so a chip file
without a ``power:`` section traces with the defaults below; a section names only the
weights it changes::

    power:
      cpu:
        load: {hw_op2: 5.0}      # loads leak their data more on this chip
      pka:
        hd_write: 4.0

Units: ELMO's fitted coefficients times 10^4. ELMO (McCann, Oswald, Whitnall, USENIX
Security 2017; github.com/sca-research/ELMO, coeffs.txt, measured on an STM32F0
Cortex-M0) gives per class a constant and one coefficient per operand bit and per
operand bit flip; the defaults take the constant and the mean over the 32 bits
(negative means, within ELMO's fit noise, clipped to 0). ELMO's classes are EOR (all
ALU instructions), LSL (shifts), STR, LDR and MUL; pkasim's ``other`` (branches,
hints, system instructions) takes the ALU's values, as ELMO does for instructions it
did not profile. ELMO has no term for the register written or the data bus: those
defaults (``hw_result``, ``hd_data``) and the PKA's are pkasim's choice, stated here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pkasim.base import limits

CPU_CLASSES = ("alu", "shift", "mul", "load", "store", "other")  # leakage.c LK_* order
CPU_TERMS = ("constant", "hw_op1", "hw_op2", "hd_op1", "hd_op2", "hw_result", "hd_data")
PKA_TERMS = ("constant", "hd_read", "hd_write")

_RESULT = 1.0  # pkasim's choice: a bit of a written register, about half an operand bit's weight
_DATA = 2.0  # pkasim's choice: a bit flip on the data bus, between ELMO's STR and LDR operand-2 weights

# class -> (constant, hw_op1, hw_op2, hd_op1, hd_op2, hw_result, hd_data); see the module docstring.
DEFAULT_CPU: dict[str, tuple[float, ...]] = {
    "alu": (433.9, 1.46, 1.65, 2.76, 3.08, _RESULT, 0.0),     # ELMO EOR
    "shift": (673.1, 5.69, 0.0, 3.70, 1.16, _RESULT, 0.0),    # ELMO LSL (hw_op2 -0.94 clipped)
    "mul": (674.5, 12.99, 8.26, 2.25, 1.32, _RESULT, 0.0),    # ELMO MUL
    "load": (781.9, 0.0, 3.86, 0.16, 0.01, _RESULT, _DATA),   # ELMO LDR (hw_op1 -0.51 clipped)
    "store": (904.1, 0.0, 3.35, 0.0, 1.21, 0.0, _DATA),       # ELMO STR (hw_op1, hd_op1 clipped)
    "other": (433.9, 1.46, 1.65, 2.76, 3.08, _RESULT, 0.0),   # ELMO: unprofiled instructions as EOR
}
# The PKA per busy cycle: a constant (its activity, about an ALU instruction's), and per
# bit flip on the digits it reads (A, B, N) and on the digit it writes; pkasim's choice.
DEFAULT_PKA: dict[str, float] = {"constant": 400.0, "hd_read": 2.0, "hd_write": 2.0}
WEIGHT_MAX = limits.POWER_WEIGHT_MAX


@dataclass(frozen=True)
class PowerConfig:
    """The leakage model's weights: ``cpu[class][term]`` and ``pka[term]``."""

    cpu: dict[str, dict[str, float]]
    pka: dict[str, float]

    def cpu_table(self) -> list[float]:
        """The CPU weights flattened in leakage.c's order (class-major)."""
        return [self.cpu[c][t] for c in CPU_CLASSES for t in CPU_TERMS]


def default_power() -> PowerConfig:
    return PowerConfig(cpu={c: dict(zip(CPU_TERMS, v)) for c, v in DEFAULT_CPU.items()}, pka=dict(DEFAULT_PKA))


def weight(raw: Any) -> float:
    """A weight: a finite number, 0 <= w <= WEIGHT_MAX."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        raise ValueError(f"expected a number, got {raw!r}"[:100])
    if not 0 <= raw <= WEIGHT_MAX:
        raise ValueError(f"expected 0..{WEIGHT_MAX:g}, got {raw!r}")
    return float(raw)
