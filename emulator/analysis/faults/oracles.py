"""Oracles (is a faulted run an attack that worked?) and detection (did the firmware's
countermeasure fire?), and the outcome of a faulted run.

Built-in oracles (``--oracle``, repeatable: exploitable when any says so):

* ``exit=N``: the faulted run exits with code N;
* ``stdout=TEXT``: its standard output contains TEXT;
* ``rsa-crt-bellcore[:key=SYM,msg=SYM,sig=SYM]``: the signature it leaves in ``sig``
  (default ``rsa_output``) factors the modulus: gcd(S'^e - m mod N, N) is p or q
  (Boneh, DeMillo, Lipton, "On the importance of checking cryptographic protocols for
  faults", 1997; the one-signature form is Lenstra's). The key (``rsa_key_t``,
  default ``rsa_input_key``) and message (default ``rsa_input_msg``) are read from
  the golden run;
* ``MODULE:FUNCTION`` or ``FILE.py:FUNCTION``: a plug-in, called as
  ``FUNCTION(golden, faulted)`` with two ``RunOutcome`` objects; true means
  exploitable. If it raises, that fault's outcome is ``oracle-error`` and the campaign
  goes on.

Detection (``--detected``, repeatable): ``exit=N`` (the firmware's countermeasure
exits with N) or ``symbol=NAME`` (it reaches the function or label NAME; the run is
stopped there).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from pkasim.base.errors import InputMissingError, LoadError, PkasimError, UsageError

OUTCOMES = ("no-effect", "detected", "corrupted", "exploitable", "crash", "hang", "oracle-error")


@dataclass
class RunOutcome:
    """How a run (golden or faulted) ended, as oracles see it.

    ``reason`` is the run's stop reason (``exit``, ``lockup``, ``budget``,
    ``sleep-forever``, ``stuck``) or ``detected`` when it was stopped at a
    ``--detected symbol=``; ``exit_code`` is set for ``exit``. ``read_symbol`` and
    ``read_memory`` read the machine as the run left it (valid during the oracle
    call only)."""

    reason: str
    exit_code: int | None
    message: str
    cycles: int
    instructions: int
    stdout: bytes
    stderr: bytes
    hardfaults: int
    reader: Callable[[int, int], bytes] | None = field(default=None, repr=False)
    symbols: Callable[[str], tuple[int, int]] | None = field(default=None, repr=False)

    def read_memory(self, address: int, size: int) -> bytes:
        if self.reader is None:
            raise UsageError("this run's memory is not available")
        return self.reader(address, size)

    def read_symbol(self, name: str, size: int | None = None) -> bytes:
        """The bytes of the object an ELF symbol names, as the run left them."""
        if self.symbols is None:
            raise UsageError("this run's symbols are not available")
        address, sym_size = self.symbols(name)
        return self.read_memory(address, size if size is not None else sym_size)


Oracle = Callable[[RunOutcome, RunOutcome], bool]


class ExitOracle:
    def __init__(self, code: int) -> None:
        self.code = code

    def __call__(self, golden: RunOutcome, faulted: RunOutcome) -> bool:
        return faulted.reason == "exit" and faulted.exit_code == self.code


class StdoutOracle:
    def __init__(self, text: str) -> None:
        self.text = text.encode()

    def __call__(self, golden: RunOutcome, faulted: RunOutcome) -> bool:
        return self.text in faulted.stdout


class BellcoreOracle:
    """A faulty RSA-CRT signature that factors N (see the module docstring)."""

    def __init__(self, key: str = "rsa_input_key", msg: str = "rsa_input_msg", sig: str = "rsa_output") -> None:
        self.key, self.msg, self.sig = key, msg, sig
        self._golden: tuple[int, int, int, int, int] | None = None  # n, e, m, s, bytes

    def _setup(self, golden: RunOutcome) -> tuple[int, int, int, int, int]:
        from pkasim.rsa.rsakey import RsaKey

        if self._golden is None:
            key = RsaKey.unpack(golden.read_symbol(self.key))
            if key.nbits % 16 or not key.p or not key.q:
                raise UsageError(f"rsa-crt-bellcore: '{self.key}' does not hold an rsa_key_t (nbits {key.nbits})")
            size = key.nbits // 8
            m = int.from_bytes(golden.read_symbol(self.msg, size), "big")
            s = int.from_bytes(golden.read_symbol(self.sig, size), "big")
            self._golden = (key.n, key.e, m, s, size)
        return self._golden

    def __call__(self, golden: RunOutcome, faulted: RunOutcome) -> bool:
        n, e, m, s, size = self._setup(golden)
        faulty = int.from_bytes(faulted.read_symbol(self.sig, size), "big")
        if faulty == s or faulty == 0:
            return False
        g = math.gcd((pow(faulty, e, n) - m) % n, n)
        return 1 < g < n


@dataclass(frozen=True)
class Detection:
    exit_codes: frozenset[int] = frozenset()
    symbols: tuple[str, ...] = ()


def parse_detected(specs: list[str]) -> Detection:
    codes: set[int] = set()
    symbols: list[str] = []
    for spec in specs:
        what, sep, value = spec.partition("=")
        if not sep or not value:
            raise UsageError(f"--detected {spec!r}: expected exit=N or symbol=NAME")
        if what == "exit":
            codes.add(_exit_code(value, "--detected"))
        elif what == "symbol":
            symbols.append(value)
        else:
            raise UsageError(f"--detected {spec!r}: expected exit=N or symbol=NAME")
    return Detection(frozenset(codes), tuple(symbols))


def _exit_code(text: str, where: str) -> int:
    try:
        code = int(text, 0)
    except ValueError:
        raise UsageError(f"{where} exit={text}: not a whole number") from None
    if not 0 <= code <= 255:
        raise UsageError(f"{where} exit={text}: exit codes are 0..255")
    return code


_PLUGIN = re.compile(r"^(?P<module>[A-Za-z_][\w.]*|.+\.py):(?P<function>[A-Za-z_]\w*)$")


def make_oracle(spec: str, cwd: str | None = None) -> Oracle:
    """The oracle a ``--oracle`` value names (UsageError, InputMissingError or LoadError
    for one that cannot be used)."""
    if spec.startswith("exit="):
        return ExitOracle(_exit_code(spec[5:], "--oracle"))
    if spec.startswith("stdout="):
        if not spec[7:]:
            raise UsageError("--oracle stdout=TEXT: TEXT is empty")
        return StdoutOracle(spec[7:])
    if spec == "rsa-crt-bellcore" or spec.startswith("rsa-crt-bellcore:"):
        params: dict[str, str] = {}
        for part in filter(None, spec.partition(":")[2].split(",")):
            k, sep, v = part.partition("=")
            if not sep or k not in ("key", "msg", "sig") or not v:
                raise UsageError(f"--oracle {spec}: expected rsa-crt-bellcore:key=SYMBOL,msg=SYMBOL,sig=SYMBOL")
            params[k] = v
        return BellcoreOracle(**params)
    m = _PLUGIN.match(spec)
    if m is None:
        raise UsageError(f"--oracle {spec!r}: expected exit=N, stdout=TEXT, rsa-crt-bellcore or MODULE:FUNCTION")
    return _plugin(m["module"], m["function"], spec, cwd)


def _plugin(module: str, function: str, spec: str, cwd: str | None) -> Oracle:
    base = cwd or os.getcwd()
    try:
        if module.endswith(".py"):
            path = os.path.join(base, module)
            if not os.path.isfile(path):
                raise InputMissingError(f"--oracle {spec}: {module}: no such file")
            name = f"pkasim_oracle_{abs(hash(path))}"
            loaded = sys.modules.get(name)
            if loaded is None:
                loader_spec = importlib.util.spec_from_file_location(name, path)
                loaded = importlib.util.module_from_spec(loader_spec)
                sys.modules[name] = loaded
                try:
                    loader_spec.loader.exec_module(loaded)
                except BaseException:
                    del sys.modules[name]
                    raise
        else:
            if base not in sys.path:
                sys.path.insert(0, base)
            loaded = importlib.import_module(module)
    except PkasimError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and module.split(".")[0] == exc.name.split(".")[0]:
            raise InputMissingError(f"--oracle {spec}: no module named '{exc.name}'") from None
        raise LoadError(f"--oracle {spec}: the plug-in failed to import: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - whatever a plug-in raises while importing is one line
        raise LoadError(f"--oracle {spec}: the plug-in failed to import: {type(exc).__name__}: {exc}") from None
    fn = getattr(loaded, function, None)
    if not callable(fn):
        raise UsageError(f"--oracle {spec}: the plug-in has no function '{function}'")
    return fn


def classify(golden: RunOutcome, faulted: RunOutcome, oracles: list[Oracle],
             detection: Detection) -> tuple[str, str]:
    """The outcome of a faulted run that was not masked, and a note (the oracle's
    error for ``oracle-error``). Exploitable beats everything: an attack that
    worked worked, whatever else happened; then detected, crash, hang, corrupted."""
    try:
        if any(bool(o(golden, faulted)) for o in oracles):
            return "exploitable", ""
    except Exception as exc:  # noqa: BLE001 - a plug-in's error is this fault's outcome
        return "oracle-error", f"{type(exc).__name__}: {exc}"
    if faulted.reason == "detected" or (faulted.reason == "exit" and faulted.exit_code in detection.exit_codes):
        return "detected", ""
    if faulted.reason == "lockup" or faulted.hardfaults > golden.hardfaults:
        return "crash", ""
    if faulted.reason in ("budget", "sleep-forever", "stuck"):
        return "hang", ""
    if (faulted.exit_code, faulted.stdout, faulted.stderr) != (golden.exit_code, golden.stdout, golden.stderr):
        return "corrupted", ""
    return "no-effect", ""
