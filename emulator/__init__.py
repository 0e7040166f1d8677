"""pkasim's emulator core: chip configs, ELF loading, the cycle model, the machine."""

from . import engine as _engine

_engine.select()  # before anything opens Unicorn: which library it runs on (docs/engine.md)

from .config import ChipConfig, load_config  # noqa: E402
from .machine import Fault, Machine, RunResult, StopReason  # noqa: E402

__all__ = ["ChipConfig", "Fault", "Machine", "RunResult", "StopReason", "load_config"]
