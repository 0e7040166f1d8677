"""pkasim: a cycle-exact emulator of an ARM SC000 microcontroller with a public-key accelerator.

The package is layered (docs/architecture.md): ``base``; ``chip``, ``native``, ``host``;
``peripherals``; ``core`` (the ``Machine`` facade); the workloads ``rsa``; ``analysis``
and ``usb``; ``debugger`` and ``sweep``; ``cli``. The names below are the public API
(docs/api.md), loaded on first use so that ``import pkasim.base.errors`` does not
start the CPU model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it from here)

__all__ = ["ChipConfig", "Fault", "Machine", "RunResult", "StopReason", "load_config"]

_HOME = {"ChipConfig": "pkasim.chip.config", "load_config": "pkasim.chip.config",
         "Fault": "pkasim.core.machine", "Machine": "pkasim.core.machine",
         "RunResult": "pkasim.core.machine", "StopReason": "pkasim.core.machine"}

if TYPE_CHECKING:
    from pkasim.chip.config import ChipConfig, load_config
    from pkasim.core.machine import Fault, Machine, RunResult, StopReason


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'pkasim' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOME[name]), name)
