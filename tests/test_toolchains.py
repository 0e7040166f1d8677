"""The firmware builds with the pinned zig clang (the default) and with GNU Arm gcc,
and the linker's memory map is the chip description's."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from emulator.config import load_config
from emulator.ldgen import memory_block
from emulator.machine import StopReason


def test_linker_memory_map_is_generated_from_the_config(repo, build_dir):
    config = load_config()
    generated = (build_dir / "memory.ld").read_text()
    assert generated.split("\n", 1)[1] == memory_block(config, "x").split("\n", 1)[1]
    assert "ORIGIN = 0x20000000, LENGTH = 0x00004000" in generated


def test_default_build_uses_the_pinned_zig_clang(build_dir):
    assert "ziglang" in (build_dir / "toolchain.sig").read_text()


@pytest.fixture(scope="module")
def gcc_build(repo, tmp_path_factory):
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc is not installed (apt-get install gcc-arm-none-eabi; .ci/run does)")
    out = tmp_path_factory.mktemp("gcc-build")
    subprocess.run(
        ["make", "-s", "-C", str(repo / "firmware"), "CC=arm-none-eabi-gcc", f"BUILD={out}", f"PYTHON={sys.executable}"],
        check=True,
    )
    return out


@pytest.mark.parametrize("image,output", [
    ("hello", b"Hello from pkasim"),
    ("systick", b"SysTick interrupts: 10"),
    ("nested", b"SABaVCMPBE"),
])
def test_gcc_built_images_behave_the_same(gcc_build, make_machine, image, output):
    m = make_machine()
    m.load(gcc_build / f"{image}.elf")
    r = m.run(max_cycles=10**8)
    assert r.reason == StopReason.EXIT and r.exit_code == 0
    assert output in m.stdout.getvalue()


def test_gcc_built_microbenchmarks_cost_the_same(gcc_build, make_machine, repo):
    m = make_machine()
    m.load(gcc_build / "bench.elf")
    for line in (repo / "firmware" / "images" / "bench_expected.txt").read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if fields:
            m.reset()
            assert m.call(fields[0]) == int(fields[1]), fields[0]


@pytest.mark.parametrize("image,output", [
    ("xrsa_opt", b"signature OK"),
    ("rsa_soft", b"signature OK"),
])
def test_gcc_built_rsa_images_sign_the_demo_message(gcc_build, make_machine, image, output):
    m = make_machine()
    m.load(gcc_build / f"{image}.elf")
    r = m.run(max_cycles=10**11)
    assert r.reason == StopReason.EXIT and r.exit_code == 0
    assert output in m.stdout.getvalue()
