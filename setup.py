"""pkasim: an instruction-level, cycle-counting emulator of a Cortex-M0 class MCU with a PKA.

The native cycle hook (emulator/cyclehook.c, with its code cache codecache.c and the
Thumb decoder thumb.c) is built here as a plain shared object:
it has no Python API and is loaded with ctypes, so it is declared as an Extension only
to reuse setuptools' compiler handling.
"""

from setuptools import Extension, find_packages, setup

setup(
    name="pkasim",
    version="0.1.0",
    description="Cycle-exact emulator of an ARM SC000 microcontroller with a public-key accelerator",
    python_requires=">=3.10",
    packages=find_packages(include=["emulator", "emulator.*", "peripherals", "peripherals.*"]),
    ext_modules=[
        Extension(
            "emulator._cyclehook",
            sources=["emulator/cyclehook.c", "emulator/codecache.c", "emulator/thumb.c", "emulator/align.c",
                     "emulator/excmodel.c",
                     "emulator/idle.c", "peripherals/pka_fast.c", "peripherals/systick_fast.c", "emulator/observe.c",
                     "emulator/cthash.c"],
            include_dirs=["emulator"],
            depends=["emulator/pkstate.h", "emulator/codecache.h", "emulator/thumb.h", "emulator/align.h",
                     "emulator/observe.h"],
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
        ],
    },
    entry_points={"console_scripts": ["pkasim=emulator.cli:main"]},
)
