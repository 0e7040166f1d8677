"""What each trace's run is given: fixed values, random bytes, or a user's generator.

* ``--fixed SYMBOL=HEX``: the object SYMBOL names gets these bytes (memory order) in
  every trace; in a TVLA, the fixed group's value.
* ``--random SYMBOL[=bytes:N]``: fresh random bytes every trace (the whole object, or
  its first N bytes). In a TVLA, a symbol also given ``--fixed`` is the one tested
  (fixed in one group, random in the other); one given only ``--random`` is random in
  both groups (masks, nonces).
* ``--inputs MODULE:FUNCTION`` (MODULE a ``.py`` file or an importable module): called
  as ``FUNCTION(rng, fixed)`` for every trace, with a ``numpy.random.Generator`` and, in
  a TVLA, whether the trace is in the fixed group (False for ``pkasim power``); it
  returns a mapping of symbol to bytes, which win over ``--fixed`` and ``--random``.
  This is how inputs that must be made together are given: a plaintext in two shares,
  a message below a key's modulus.

Values are written the way ``pkasim run --load`` writes them, before reset.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pkasim.base.errors import InputMissingError, LoadError, UsageError

Generator = Callable[[np.random.Generator, bool], Mapping[str, bytes]]


def load_generator(text: str) -> Generator:
    """The function ``MODULE:FUNCTION`` names; MODULE is a path to a .py file or a module."""
    module_name, sep, func = text.rpartition(":")
    if not sep or not module_name or not func.isidentifier():
        raise UsageError(f"--inputs {text!r}: expected MODULE:FUNCTION (a .py file or a module, and a function in it)")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise InputMissingError(f"--inputs {text}: no such file {module_name}")
        spec = importlib.util.spec_from_file_location(f"pkasim_inputs_{abs(hash(str(path.resolve())))}", path)
        if spec is None or spec.loader is None:
            raise LoadError(f"--inputs {text}: cannot load {module_name} as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # so that worker processes can unpickle what it makes
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the user's module: its error, in one line
            raise LoadError(f"--inputs {text}: {module_name} failed to load: {type(exc).__name__}: {exc}") from None
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise InputMissingError(f"--inputs {text}: cannot import {module_name}: {exc}") from None
    fn = getattr(module, func, None)
    if not callable(fn):
        raise LoadError(f"--inputs {text}: {module_name} has no function {func}")
    return fn


@dataclass(frozen=True)
class InputSpec:
    """The inputs of a campaign, as given on the command line (picklable: a worker
    process loads the generator itself)."""

    fixed: tuple[tuple[str, bytes], ...] = ()
    random: tuple[tuple[str, int | None], ...] = ()
    generator: str | None = None
    rooms: dict[str, int] = field(default_factory=dict)  # symbol -> bytes it holds (checked)

    @property
    def symbols(self) -> list[str]:
        return sorted({s for s, _ in self.fixed} | {s for s, _ in self.random})

    def tested(self) -> list[str]:
        """TVLA: the symbols that differ between the groups (given --fixed and --random)."""
        fixed = {s for s, _ in self.fixed}
        return sorted(s for s, _ in self.random if s in fixed)


class InputMaker:
    """Makes the inputs of each trace from a spec."""

    def __init__(self, spec: InputSpec) -> None:
        self.spec = spec
        self.fixed = dict(spec.fixed)
        self.random = {s: (n if n is not None else spec.rooms[s]) for s, n in spec.random}
        self.generator = load_generator(spec.generator) if spec.generator else None

    def make(self, rng: np.random.Generator, fixed_group: bool, tvla: bool) -> dict[str, bytes]:
        """One trace's inputs: in a TVLA, ``fixed_group`` says which group it is in."""
        out: dict[str, bytes] = {}
        for sym, size in self.random.items():
            if tvla and fixed_group and sym in self.fixed:
                continue
            out[sym] = rng.bytes(size)
        for sym, value in self.fixed.items():
            if sym not in out:
                out[sym] = value
        if self.generator is not None:
            try:
                made = self.generator(rng, fixed_group)
            except Exception as exc:  # noqa: BLE001 - the user's function: its error, in one line
                raise LoadError(f"--inputs {self.spec.generator} failed: {type(exc).__name__}: {exc}") from None
            if not isinstance(made, Mapping):
                raise UsageError(f"--inputs {self.spec.generator}: returned {type(made).__name__}, "
                                 "expected a mapping of symbol to bytes")
            for sym, value in made.items():
                if not isinstance(value, (bytes, bytearray, memoryview)):
                    raise UsageError(f"--inputs {self.spec.generator}: the value for {sym!r} is "
                                     f"{type(value).__name__}, expected bytes")
                room = self.spec.rooms.get(sym)
                if room is None:
                    raise LoadError(f"--inputs {self.spec.generator}: {sym!r} is not one of the symbols checked "
                                    f"before the run ({', '.join(sorted(self.spec.rooms)) or 'none'}); "
                                    "name it in the function's INPUTS")
                if len(value) > room:
                    raise LoadError(f"--inputs {self.spec.generator}: {len(value):,} bytes do not fit in '{sym}' "
                                    f"({room:,} bytes)")
                out[sym] = bytes(value)
        return out


def generator_symbols(text: str) -> list[str]:
    """The symbols a generator says it writes (its module's ``INPUTS``, or the function's
    ``inputs`` attribute), checked against the image before the run."""
    fn = load_generator(text)
    names = getattr(fn, "inputs", None) or getattr(sys.modules.get(fn.__module__), "INPUTS", None)
    if not names or not all(isinstance(n, str) for n in names):
        raise UsageError(f"--inputs {text}: the module must list the symbols the function writes in INPUTS "
                         "(a list of names), so they are checked before any run")
    return list(names)
