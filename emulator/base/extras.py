"""Optional packages: what only some commands need comes with a pip extra
(pyproject.toml), and a command that needs a missing one says which extra brings it.

    plot   matplotlib            pkasim bench --plot
    sweep  pyarrow, matplotlib   pkasim sweep (Parquet and CSV tables, plots)
    dask   dask, distributed     pkasim sweep --engine dask
    power  numpy, matplotlib, trsfile   pkasim power, tvla, cpa (trsfile: --trs only)
"""

from __future__ import annotations

import importlib
from types import ModuleType

from pkasim.base.errors import UnavailableError


def need(module: str, extra: str, purpose: str) -> ModuleType:
    """``module`` imported, or one UnavailableError (exit 69) naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.partition(".")[0]
        if exc.name is not None and exc.name.partition(".")[0] != top:
            raise  # the package is there but broken inside: not a missing extra
        raise UnavailableError(f"{purpose} needs {top}, which is not installed: pip install 'pkasim[{extra}]'") from None
