"""pkasim: an instruction-level, cycle-counting emulator of a Cortex-M0 class MCU with a PKA.

One import package, ``pkasim``: the repo folder ``emulator/`` is its source and
``peripherals/`` becomes ``pkasim.peripherals`` (docs/architecture.md). The native cycle
hook (emulator/native/*.c with the devices' fast paths peripherals/*_fast.c) is built
here as a plain shared object: it has no Python API and is loaded with ctypes, so it is
declared as an Extension only to reuse setuptools' compiler handling.
"""

from setuptools import Extension, find_packages, setup

PACKAGES = (["pkasim"] + [f"pkasim.{p}" for p in find_packages("emulator")]
            + ["pkasim.peripherals"] + [f"pkasim.peripherals.{p}" for p in find_packages("peripherals")])

setup(
    name="pkasim",
    version="0.1.0",
    description="Cycle-exact emulator of an ARM SC000 microcontroller with a public-key accelerator",
    python_requires=">=3.10",
    packages=PACKAGES,
    package_dir={"pkasim": "emulator", "pkasim.peripherals": "peripherals"},
    ext_modules=[
        Extension(
            "pkasim.native._cyclehook",
            sources=[f"emulator/native/{name}.c" for name in
                     ("state", "cyclehook", "codecache", "thumb", "excmodel", "idle", "observe", "cthash")]
            + ["peripherals/pka_fast.c", "peripherals/systick_fast.c"],
            include_dirs=["emulator/native"],
            depends=["emulator/native/pkstate.h", "emulator/native/codecache.h", "emulator/native/thumb.h",
                     "emulator/native/observe.h"],
            extra_compile_args=["-O3", "-std=c99"],
            py_limited_api=False,
        )
    ],
    install_requires=[
        "unicorn==2.1.4",
        "capstone==5.0.9",
        "pyelftools==0.33",
        "PyYAML==6.0.3",
        "rich==15.0.0",
        "cryptography==50.0.2",
        "matplotlib==3.11.2",
        "pyvcd==0.5.1",
        "dask==2026.8.0",
        "distributed==2026.8.0",
        "pyarrow==26.0.1",
    ],
    extras_require={
        "dev": [
            "pytest==9.2.0",
            "hypothesis==6.170.15",
            "ruff==0.17.5",
            "ziglang==0.17.1",
            "import-linter==2.16",
        ],
    },
    entry_points={"console_scripts": ["pkasim=pkasim.cli.main:main"]},
)
