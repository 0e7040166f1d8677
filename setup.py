"""How the pkasim wheel is put together (its metadata is in pyproject.toml).

One import package, ``pkasim``: the repo folder ``emulator/`` is its source,
``peripherals/`` becomes ``pkasim.peripherals`` (docs/architecture.md), and two folders
of files become package data read through importlib.resources (pkasim.base.resources):
``configs/`` is ``pkasim.configs`` (chip files, presets, sweep examples) and
``firmware/`` is ``pkasim.firmware`` (sources, linker script, project template, demo
keys and the prebuilt images). docs/packaging.md tells the whole story.

- The native cycle hook (emulator/native/*.c with the devices' fast paths
  peripherals/*_fast.c) is a plain shared object with no Python API, loaded with
  ctypes: it is an Extension only to reuse setuptools' compiler handling, built with
  the system C compiler; without one the build stops with one line saying so.
- pkasim's engine (Unicorn 2.1.4 with engine/patches/, docs/engine.md) travels in the
  wheel as ``pkasim/native/_engine/libunicorn.so.2`` with its ``engine.json``, so users
  get its speed without a build. A wheel build makes it first if it is missing or was
  built from other patches (engine/build.py, which the sdist carries with the patches:
  it needs the registry's unicorn sdist, cmake and ninja). Where it cannot be built that
  prints one warning line and the wheel goes without it; pkasim then runs on the stock
  unicorn wheel, with the same cycle counts. The sdist never carries the library (it is
  built for one platform).
- The firmware images in the wheel are those ``make firmware`` built with the pinned
  zig clang, listed with the hashes of every source they came from in
  ``firmware/build/manifest.json`` (firmware/tools/manifest.py). A wheel is built only
  from images whose manifest matches the sources beside them; the sdist carries the
  images, the manifest and the sources, so a wheel built from it checks the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.errors import CCompilerError, ExecError, PlatformError, SetupError

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "firmware" / "tools"))
import manifest as firmware_manifest  # noqa: E402  (firmware/tools/manifest.py: stdlib only)

# emulator/peripherals is a link to peripherals/, for tools that walk one folder (import-linter)
PACKAGES = (["pkasim"] + [f"pkasim.{p}" for p in find_packages("emulator", exclude=["peripherals", "peripherals.*"])]
            + ["pkasim.peripherals"] + [f"pkasim.peripherals.{p}" for p in find_packages("peripherals")]
            + ["pkasim.configs", "pkasim.firmware"])
PACKAGE_DIR = {"pkasim": "emulator", "pkasim.peripherals": "peripherals",
               "pkasim.configs": "configs", "pkasim.firmware": "firmware"}

# The native libraries the wheel carries, each found at run time by
# pkasim.native.find_library(stem). A library the package can run without (a faster
# engine, say) is added with optional=True: where it cannot be built, the build goes on
# with one warning line and pkasim falls back to what it has.
NATIVE = [
    Extension(
        "pkasim.native._cyclehook",
        sources=[f"emulator/native/{name}.c" for name in
                 ("state", "cyclehook", "codecache", "thumb", "unaligned", "excmodel", "idle", "observe",
                  "cthash", "leakage", "tlb", "retranslate", "flashalias", "watchwindow", "sharedpage")]
        + ["peripherals/pka_fast.c", "peripherals/pka_montmul.c", "peripherals/systick_fast.c"],
        include_dirs=["emulator/native"],
        depends=["emulator/native/pkstate.h", "emulator/native/codecache.h", "emulator/native/thumb.h",
                 "emulator/native/unaligned.h", "emulator/native/observe.h", "peripherals/pka_montmul.h"],
        # calls between the library's own functions bind within it, not through the PLT
        # (as engine patch 0023 does for the engine); the symbols stay exported for ctypes
        extra_compile_args=["-O3", "-std=c99"] + (["-fno-semantic-interposition"] if sys.platform.startswith("linux") else []),
        extra_link_args=["-Wl,-Bsymbolic-functions"] if sys.platform.startswith("linux") else [],
        py_limited_api=False,
    ),
]

FIRMWARE_BUILD = HERE / "firmware" / "build"


def bundled_images() -> list[str]:
    """The images the manifest lists (none before `make firmware`: an editable install
    reads firmware/build itself)."""
    path = FIRMWARE_BUILD / firmware_manifest.MANIFEST
    if not path.is_file():
        return []
    return sorted(json.loads(path.read_text())["images"])


PACKAGE_DATA = {
    "pkasim.configs": ["*.yaml", "presets/*.yaml", "sweeps/*.yaml"],
    "pkasim.firmware": ["README.md", "link.ld", "src/*.c", "src/*.h", "images/*.c", "images/*.h", "images/*.txt",
                        "keys/*.pem", "keys/README.md", "template/*", f"build/{firmware_manifest.MANIFEST}"]
                       + [f"build/{name}" for name in bundled_images()],
    # The model's C travels with it: pkasim.sweep's cache key digests the sources that
    # determine a cycle count, the same in a checkout and a wheel.
    "pkasim.native": ["*.c", "*.h", "_engine/libunicorn.so.2", "_engine/engine.json"],
    "pkasim.peripherals": ["*.c"],
}


class BuildNative(build_ext):
    """The native libraries, with one clear line when there is no working C compiler."""

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except (CCompilerError, ExecError, PlatformError) as exc:
            if getattr(ext, "optional", False):
                print(f"warning: pkasim: {ext.name} was not built ({exc}); pkasim runs without it", file=sys.stderr)
                return
            raise SetupError(f"pkasim: cannot build its native cycle hook ({ext.name}): {exc}. It needs a C99 "
                             "compiler: install gcc or clang (Debian: apt-get install gcc), or name one with "
                             "CC=...") from None


ENGINE_BUILD = HERE / "engine" / "build.py"


def build_engine() -> None:
    """pkasim's engine for the wheel: engine/build.py does nothing when the library is
    current, builds it otherwise, and on failure prints one warning line and exits 0
    (the wheel then goes without it). PKASIM_ENGINE=stock skips it."""
    if not ENGINE_BUILD.is_file() or os.environ.get("PKASIM_ENGINE", "").strip().lower() == "stock":
        return
    subprocess.run([sys.executable, str(ENGINE_BUILD)], check=False)


class BuildPackage(build_py):
    """The Python package and its data; for a wheel, only with firmware images that
    match their sources (firmware/build/manifest.json), and with pkasim's engine where
    it can be built."""

    def run(self) -> None:
        if not getattr(self, "editable_mode", False):
            problem = firmware_manifest.check(FIRMWARE_BUILD)
            if problem:
                raise SetupError(f"pkasim: the wheel carries prebuilt firmware images, but {problem}. "
                                 "Build them with the pinned zig clang first: make firmware")
            build_engine()  # before the package data is listed (it is, lazily, in run)
        super().run()


setup(
    packages=PACKAGES,
    package_dir=PACKAGE_DIR,
    package_data=PACKAGE_DATA,
    include_package_data=False,
    ext_modules=NATIVE,
    cmdclass={"build_ext": BuildNative, "build_py": BuildPackage},
    zip_safe=False,
)
