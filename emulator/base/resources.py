"""Where pkasim's bundled files are: chip files, sweep examples, firmware images and sources.

They are package data, found through ``importlib.resources``, so one lookup serves a
checkout and an installed wheel alike. setuptools maps the repository's folders into
the package (setup.py): ``configs/`` is ``pkasim.configs`` and ``firmware/`` is
``pkasim.firmware``. In a checkout (``pip install -e .``) the names lead to those
folders, and the firmware images to what ``make firmware`` built; in a wheel they lead
to the copies it carries, the images listed with their source hashes in
``firmware/build/manifest.json`` (docs/packaging.md).

A chip is named by its path under the chip folder without ``.yaml``: ``ciu98320b``,
``presets/victor-radix16``. Anything missing is one InputMissingError (exit 66) that
says what is missing and what the choices are.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

from pkasim.base.errors import InputMissingError

DEFAULT_CHIP = "ciu98320b"
CHIP_GROUPS = ("", "presets")  # chip files at the top and timing presets; sweeps/ holds sweep files
SWEEPS = "sweeps"


def _folder(package: str) -> Path:
    """The folder a data package lives in, as a real path (pkasim reads its files by
    path: the YAML loader names them in errors, ``extends:`` is relative to them).
    Never raises: in a broken installation (the data package missing, or zipped) the
    path leads nowhere, and the first file looked up there says what is missing."""
    try:
        found = resources.files(package)
    except ModuleNotFoundError:
        found = None
    if isinstance(found, Path):
        return found
    return Path(__file__).resolve().parent.parent / package.rpartition(".")[2]


def chips_dir() -> Path:
    """The folder of the bundled chip files (``configs/`` in a checkout)."""
    return _folder("pkasim.configs")


def firmware_dir() -> Path:
    """The bundled firmware tree: ``src/``, ``images/``, ``link.ld``, ``keys/``,
    ``template/`` and the prebuilt images in ``build/`` (``firmware/`` in a checkout)."""
    return _folder("pkasim.firmware")


def build_dir() -> Path:
    """Where the prebuilt firmware images are (``firmware/build`` in a checkout)."""
    return firmware_dir() / "build"


def keys_dir() -> Path:
    """The fixed demo keys of the bench (``firmware/keys``)."""
    return firmware_dir() / "keys"


def chip_names() -> list[str]:
    """Every bundled chip file by name, the default chip first."""
    root = chips_dir()
    if not root.is_dir():
        raise InputMissingError(f"{root}: pkasim's bundled chip files are missing (a broken installation: "
                                "reinstall pkasim)")
    names = []
    for group in CHIP_GROUPS:
        folder = root / group if group else root
        names += sorted(f"{group}/{p.stem}" if group else p.stem for p in folder.glob("*.yaml"))
    return sorted(names, key=lambda n: (n != DEFAULT_CHIP, "/" in n, n))


def sweep_names() -> list[str]:
    """The bundled sweep examples by name (``sweeps/rsa4096-10ops``)."""
    return sorted(f"{SWEEPS}/{p.stem}" for p in (chips_dir() / SWEEPS).glob("*.yaml"))


def default_chip() -> Path:
    """The default chip file (``ciu98320b``)."""
    return chips_dir() / f"{DEFAULT_CHIP}.yaml"


def bundled(name: str) -> Path | None:
    """The bundled chip or sweep file ``name`` (``ciu98320b``, ``presets/victor-radix16``,
    ``sweeps/rsa4096-10ops``, with or without ``.yaml``), or None when there is none."""
    stem = name[:-5] if name.endswith(".yaml") else name
    if stem not in chip_names() + sweep_names():
        return None
    return chips_dir() / f"{stem}.yaml"


def resolve_chip(name: str | Path) -> Path:
    """A chip file from a path or a bundled name: an existing file wins, then a bundled
    name; anything else is one line listing the bundled chips (exit 66)."""
    path = Path(name)
    if isinstance(name, Path) or path.is_file():
        return path
    found = bundled(str(name))
    if found is not None and found.parent.name != SWEEPS:
        return found
    if path.exists():  # a folder or a device: the loader says what is wrong with it
        return path
    raise InputMissingError(f"{name}: no such config file, and no bundled chip of that name "
                            f"(bundled: {', '.join(chip_names())}; `pkasim configs` lists them)")


def resolve_sweep(name: str | Path) -> Path:
    """A sweep file from a path or a bundled name (``sweeps/rsa4096-10ops``)."""
    path = Path(name)
    if isinstance(name, Path) or path.exists():
        return path
    found = bundled(f"{SWEEPS}/{name}") or bundled(str(name))
    if found is not None and found.parent.name == SWEEPS:
        return found
    raise InputMissingError(f"{name}: no such file, and no bundled sweep of that name "
                            f"(bundled: {', '.join(sweep_names())})")


def image(name: str, where: Path | None = None) -> Path:
    """The firmware image ``name`` (``xrsa.elf``) in ``where`` (default: the bundled
    images); a missing one is one line saying how to get it (exit 66)."""
    folder = where if where is not None else build_dir()
    path = folder / name
    if path.is_file():
        return path
    if where is not None:
        raise InputMissingError(f"{path}: no such firmware image")
    raise InputMissingError(f"{path}: pkasim's bundled firmware image {name} is missing (in a checkout, build it "
                            "with `make firmware`; an installed pkasim is broken: reinstall it)")


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, as hex (the chip file's identity in ``--version``)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
