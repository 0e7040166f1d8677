"""The manifest of the prebuilt firmware images: which images a pkasim wheel carries,
the SHA-256 of each, and of every source file they were built from.

    python tools/manifest.py write BUILD COMPILER IMAGE...   # `make` runs this last
    python tools/manifest.py check BUILD                     # exit 1 and one line if stale

`make` (firmware/Makefile) writes BUILD/manifest.json after linking. setup.py checks
it before it puts the images into a wheel: the images must be the pinned zig clang's
(the same code bytes on every machine, so the cycle baselines hold) and every source
must still have the hash it had when they were built. The sources are the whole
firmware tree that goes into the images (the Makefile, link.ld, src/, images/, the
memory map generated from the chip file, and tools/dwarf_dead.py, which rewrites the
images' debug information after the link), so a change anywhere makes the images stale,
whatever the dependency lists say. Standard library only: setup.py imports this module
in a bare build environment.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

MANIFEST = "manifest.json"
SCHEMA = "pkasim.firmware/1"
FIRMWARE = Path(__file__).resolve().parent.parent
# The files the images are built from, relative to firmware/ (setup.py ships the same).
# tools/dwarf_dead.py rewrites every image's debug information after the link.
SOURCE_GLOBS = ("Makefile", "link.ld", "src/*.c", "src/*.h", "images/*.c", "images/*.h", "images/*.txt",
                "tools/dwarf_dead.py")
MEMORY_MAP = "memory.ld"  # in the build folder, generated from the chip file by pkasim.chip.ldgen


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sources(build: Path) -> dict[str, str]:
    """Every source file of the images in ``build`` (relative to firmware/; the memory
    map as ``build/memory.ld``) and its SHA-256."""
    found = {p.relative_to(FIRMWARE).as_posix(): p for pattern in SOURCE_GLOBS for p in FIRMWARE.glob(pattern)
             if p.is_file()}
    memory = build / MEMORY_MAP
    if memory.is_file():
        found[f"build/{MEMORY_MAP}"] = memory
    return {rel: _sha256(path) for rel, path in sorted(found.items())}


def _ziglang_version() -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    try:
        return version("ziglang")
    except PackageNotFoundError:
        return None


def write(build: Path, compiler: str, images: list[str]) -> Path:
    """Write ``build/manifest.json`` for ``images`` (names in ``build``)."""
    zig = "zig" in compiler or "ziglang" in compiler
    doc = {
        "schema": SCHEMA,
        "compiler": compiler.strip(),
        "ziglang": _ziglang_version() if zig else None,
        "sources": sources(build),
        "images": {name: {"sha256": _sha256(build / name), "bytes": (build / name).stat().st_size}
                   for name in sorted(images)},
    }
    path = build / MANIFEST
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def check(build: Path) -> str | None:
    """Why the images in ``build`` cannot go into a wheel, or None when they can."""
    path = build / MANIFEST
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return f"{path} is missing (the images are not built)"
    except (OSError, ValueError) as exc:
        return f"{path} cannot be read ({exc})"
    if doc.get("schema") != SCHEMA:
        return f"{path} is not a {SCHEMA} manifest"
    if not doc.get("ziglang"):
        return f"the images in {build} were built with {doc.get('compiler')!r}, not the pinned zig clang"
    now = sources(build)
    for rel in sorted(set(doc["sources"]) | set(now)):
        if rel not in now:
            return f"firmware/{rel} is missing, yet the images were built from it"
        if rel not in doc["sources"]:
            return f"firmware/{rel} is new since the images were built"
        if now[rel] != doc["sources"][rel]:
            return f"firmware/{rel} changed since the images were built"
    for name, entry in sorted(doc["images"].items()):
        image = build / name
        if not image.is_file():
            return f"{image} is missing"
        if _sha256(image) != entry["sha256"]:
            return f"{image} is not the image the manifest lists (rebuilt since?)"
    return None


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "write":
        write(Path(argv[1]), argv[2], argv[3:])
        return 0
    if len(argv) == 2 and argv[0] == "check":
        problem = check(Path(argv[1]))
        if problem:
            print(f"manifest: {problem}", file=sys.stderr)
            return 1
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
