"""pkasim's emulator core: chip configs, ELF loading, the cycle model, the machine."""

from .config import ChipConfig, load_config
from .machine import Fault, Machine, RunResult, StopReason

__all__ = ["ChipConfig", "Fault", "Machine", "RunResult", "StopReason", "load_config"]
