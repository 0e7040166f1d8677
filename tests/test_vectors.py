"""Exception vectors come from VTOR, or from the flash base where the reset vector is;
every fault the guest can cause ends in HardFault or lockup, never in a CLI error."""

from __future__ import annotations

import json
from pathlib import Path

from pkasim.base.errors import EXIT_LOCKUP
from pkasim.chip.config import parse_config
from pkasim.chip.loader import Image
from pkasim.cli.main import main
from pkasim.core.machine import StopReason

FLASH = 0x08000000


def chip_with_flash_at(repo: Path, base: int, *, vtor: bool = False):
    text = (repo / "configs" / "ciu98320b.yaml").read_text()
    text = text.replace("    base: 0x00000000", f"    base: 0x{base:08x}", 1)
    text = text.replace("vtor: false", f"vtor: {str(vtor).lower()}", 1)
    return parse_config(text, "flash-at-0x08000000.yaml")


def svc_image() -> Image:
    """Vectors at 0x08000000: SP, Reset 0x08000100, HardFault 0x08000110, SVCall
    0x08000120. Reset: ``svc #0`` (df00); ``b .`` (e7fe). HardFault: ``bkpt #0``
    (be00). SVCall: ``movs r0, #0x18`` (2018); ``ldr r1, [pc, #4]`` (4901); ``bkpt
    #0xab`` (beab); then at 0x128 ``.word 0x20026``: SYS_EXIT, application exit."""
    image = bytearray(0x130)
    vectors = {0: 0x20004000, 1: FLASH + 0x101, 3: FLASH + 0x111, 11: FLASH + 0x121}
    for n, value in vectors.items():
        image[4 * n:4 * n + 4] = value.to_bytes(4, "little")
    image[0x100:0x104] = bytes.fromhex("00dffee7")
    image[0x110:0x112] = bytes.fromhex("00be")
    image[0x120:0x126] = bytes.fromhex("18200149abbe")
    image[0x128:0x12C] = (0x20026).to_bytes(4, "little")
    return Image(path="svc-at-0x08000000", entry=FLASH + 0x101, segments=[(FLASH, bytes(image))],
                 code=[(FLASH + 0x100, bytes(image[0x100:0x128]))])


def test_a_chip_with_flash_at_0x08000000_takes_its_vectors_from_flash(repo, make_machine):
    m = make_machine(chip_with_flash_at(repo, FLASH))
    m.load(svc_image())
    r = m.run(max_cycles=10**4)
    assert r.reason == StopReason.EXIT and r.exit_code == 0, r.message
    assert m.exceptions_taken == {"SVCall": 1}


def test_vtor_resets_to_the_flash_base(repo, make_machine):
    m = make_machine(chip_with_flash_at(repo, FLASH, vtor=True))
    m.load(svc_image())
    assert m.scb.read(0x08, 4) == FLASH  # VTOR
    assert m.run(max_cycles=10**4).exit_code == 0


def probe_file(tmp_path: Path, value: int) -> Path:
    path = tmp_path / "probe.bin"
    path.write_bytes(value.to_bytes(4, "little"))
    return path


def run_json(args: list[str], tmp_path: Path, capsys) -> tuple[int, dict]:
    out = tmp_path / "run.json"
    code = main(["run", *args, "-q", "--json", str(out)])
    capsys.readouterr()
    return code, json.loads(out.read_text())


def test_vtor_pointing_at_unmapped_memory_locks_up_instead_of_a_cli_error(repo, elf, tmp_path, capsys):
    chip = tmp_path / "vtor.yaml"
    chip.write_text(f"extends: {repo / 'configs' / 'ciu98320b.yaml'}\ncore:\n  vtor: true\n")
    code, result = run_json([str(elf("anywhere")), "--config", str(chip), "--load",
                             f"probe={probe_file(tmp_path, 1)}"], tmp_path, capsys)
    assert code == EXIT_LOCKUP
    assert result["reason"] == "lockup"
    assert result["fault"]["cause"].startswith("vector fetch fault: the SVCall vector at 0x3000002c")
    assert "vector fetch fault: the HardFault vector" in result["lockup"]["cause"]


def test_a_jump_to_the_call_return_address_in_a_run_is_a_hardfault(elf, tmp_path, capsys):
    code, result = run_json([str(elf("anywhere")), "--load", f"probe={probe_file(tmp_path, 2)}"], tmp_path, capsys)
    assert code == 3  # the image's HardFault handler exits with 3
    assert result["fault"]["cause"] == "instruction fetch from unmapped address 0xf0000000"


def test_call_still_returns_through_its_sentinel(make_machine, elf):
    m = make_machine()
    m.load(elf("anywhere"))
    m.run(until="main", max_cycles=10**5)
    m.call("f_mul", 3)
    assert m.reg("r0") == 3**8
