"""Power analysis on the emulated chip (docs/power.md): simulated traces, TVLA, CPA.

* ``cpu``: the CPU's per-instruction leakage, the native hook of emulator/native/leakage.c;
* ``pka``: the PKA's per-cycle leakage from its operands;
* ``tracer``: one machine taking traces of a window, the reference run;
* ``inputs``: each trace's inputs (fixed, random, a user's generator);
* ``campaign``: chunks of traces on this process, a process pool or Dask;
* ``stats``: Welch's t-test in one streaming pass, the sums of CPA;
* ``cpa``: correlation power analysis against a user's intermediate.

It needs NumPy (``pip install 'pkasim[power]'``); nothing else in pkasim imports it.
"""

from __future__ import annotations

from pkasim.analysis.power.cpa import CpaResult, cpa
from pkasim.analysis.power.stats import THRESHOLD, Moments, aes_sbox_hw, welch_t
from pkasim.analysis.power.tracer import Reference, Setup, Tracer

__all__ = ["THRESHOLD", "CpaResult", "Moments", "Reference", "Setup", "Tracer", "aes_sbox_hw", "cpa", "welch_t"]
