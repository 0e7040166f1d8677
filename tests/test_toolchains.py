"""The firmware builds with the pinned zig clang (the default) and with GNU Arm gcc,
and the linker's memory map is the chip description's."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from pkasim.chip.config import load_config
from pkasim.chip.ldgen import memory_block
from pkasim.core.machine import StopReason


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


def test_gcc_built_fixed_window_image_is_right_and_constant_time(gcc_build, make_machine):
    """xrsa_win.elf and xrsa_win_sram.elf from gcc: RSA-2048 with two keys, the right
    result in the same cycles for both (gcc keeps the masks masks too)."""
    from cryptography.hazmat.primitives.asymmetric import rsa
    from xrsa_model import Key

    runs = {}
    for image in ("xrsa_win", "xrsa_win_sram"):
        for seed in (1, 2):
            k = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_numbers()
            key = Key(2048, k.public_numbers.e, k.p, k.q, k.dmp1, k.dmq1, k.iqmp)
            msg = key.n - seed
            m = make_machine()
            m.load(gcc_build / f"{image}.elf")
            m.write_symbol("rsa_input_key", key.pack())
            m.write_symbol("rsa_input_msg", msg.to_bytes(256, "big"))
            m.write_symbol("rsa_check", bytes(4))
            r = m.run(max_cycles=10**9)
            assert r.reason == StopReason.EXIT and r.exit_code == 0
            assert int.from_bytes(m.read_symbol("rsa_output")[:256], "big") == pow(msg, key.d, key.n)
            runs.setdefault(image, set()).add((r.cycles, r.instructions))
    assert all(len(v) == 1 for v in runs.values()), runs
