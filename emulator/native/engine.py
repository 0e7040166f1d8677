"""Which Unicorn library pkasim runs on: its own engine, or the registry's wheel.

pkasim's engine is Unicorn 2.1.4 built from its sdist with the patch series in
engine/patches/ (engine/build.py, run by ``make``; the library lands in emulator/native/_engine/): stores to RAM on the fast path,
the exit check inline, the cycle count kept by the generated code, alignment faults
from the engine (docs/engine.md). The stock wheel is the fallback: the same cycle
counts, exit codes and outputs, more slowly.

``PKASIM_ENGINE`` chooses, read once per process when pkasim is imported:

* ``auto`` (default): the engine when it is built and matches this checkout's patches,
  else the stock wheel (a mismatched library is refused with a one-line warning naming
  the fix);
* ``stock``: the wheel's own library;
* ``patched``: the engine, or an error when it cannot be used.

The Python binding keeps one library handle (``unicorn.unicorn_py3.unicorn.uclib``);
selecting the engine loads it and hands it to the binding before any ``Uc`` exists.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIBRARY = HERE / "_engine" / "libunicorn.so.2"
MANIFEST = HERE / "_engine" / "engine.json"
PATCHES = HERE.parent.parent / "engine" / "patches"
VERSION = "2.1.4"
CHOICES = ("auto", "patched", "stock")
FIX = "run 'make engine' in the pkasim checkout (or set PKASIM_ENGINE=stock)"

_selected: str | None = None
_problem: str | None = None  # why the engine is not in use, when it was asked for


def expected_patchset() -> str | None:
    """The patch series of this checkout, as engine/build.py names it (None when the
    patches are not beside the package: then the manifest's word is taken)."""
    files = sorted(PATCHES.glob("*.patch"))
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return f"{VERSION}+pkasim.{h.hexdigest()[:16]}"


def _check(lib: ctypes.CDLL) -> str | None:
    """Why ``lib`` must not be used, or None."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.uc_version.restype = ctypes.c_uint
    combined = lib.uc_version(ctypes.byref(major), ctypes.byref(minor))
    version = f"{combined >> 24}.{(combined >> 16) & 0xFF}.{(combined >> 8) & 0xFF}"
    if version != VERSION:
        return f"it is Unicorn {version}, not {VERSION}"
    try:
        fn = lib.uc_pkasim_patchset
    except AttributeError:
        return "it has no pkasim patch set"
    fn.restype = ctypes.c_char_p
    built = (fn() or b"").decode(errors="replace")
    want = expected_patchset()
    if want is None and MANIFEST.exists():
        want = json.loads(MANIFEST.read_text()).get("patchset")
    if built != want:
        return f"it was built from patch set {built}, this checkout has {want}"
    return None


def _use(lib: ctypes.CDLL) -> None:
    """Hand ``lib`` to the Python binding (before any engine is opened)."""
    from unicorn.unicorn_py3 import unicorn as binding
    getattr(binding, "__set_lib_prototypes")(lib)
    binding.uclib = lib


def select() -> str:
    """Choose the library (once per process); returns "patched" or "stock"."""
    global _selected, _problem
    if _selected is not None:
        return _selected
    choice = os.environ.get("PKASIM_ENGINE", "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        _problem = f"PKASIM_ENGINE={choice!r}: expected one of {', '.join(CHOICES)}"
        _selected = "stock"
        return _selected
    _selected = "stock"
    if choice == "stock":
        return _selected
    if not LIBRARY.exists():
        if choice == "patched":
            _problem = f"pkasim's engine is not built ({LIBRARY.relative_to(HERE.parent.parent)} is missing): {FIX}"
        return _selected
    try:
        lib = ctypes.CDLL(str(LIBRARY))
    except OSError as exc:
        why = f"cannot load it ({exc})"
    else:
        why = _check(lib)
        if why is None:
            _use(lib)
            _selected = "patched"
            return _selected
    message = f"pkasim's engine {LIBRARY.relative_to(HERE.parent.parent)} is refused: {why}; {FIX}"
    if choice == "patched":
        _problem = message
    else:
        sys.stderr.write(f"warning: {message}; using the stock Unicorn wheel\n")
    return _selected


def selected() -> str:
    """"patched" or "stock": the library this process runs on."""
    return select()


def require() -> None:
    """Raise when the engine was asked for (PKASIM_ENGINE=patched, or a bad value)
    and cannot be used; called when a machine is built."""
    select()
    if _problem is not None:
        from pkasim.base.errors import UsageError
        raise UsageError(_problem)


def patchset() -> str | None:
    """The patch set the running engine reports (``2.1.4+pkasim.<hash>``), or None on the
    stock wheel."""
    if select() != "patched":
        return None
    from unicorn.unicorn_py3 import unicorn as binding
    fn = binding.uclib.uc_pkasim_patchset
    fn.restype = ctypes.c_char_p
    return (fn() or b"").decode(errors="replace")


def patched() -> bool:
    """Whether this process runs on pkasim's engine."""
    return select() == "patched"
