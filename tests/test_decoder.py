"""The native Thumb decoder (emulator/native/thumb.c) and the capstone statement of the cycle
model (emulator/core/cycles.py) give the same answer for every instruction: ARMv6-M or
UNDEFINED, size, cycles, flow flags and address arithmetic.

Compared over every 16-bit encoding, over all 32-bit encodings of the ARMv6-M ones'
neighbourhoods plus a seeded sample of the rest, and over all code of every firmware
image (its literal pools read from the loaded memory).
"""

from __future__ import annotations

import ctypes
import random
from pathlib import Path

import pytest

from pkasim import native
from pkasim.chip.loader import load_image
from pkasim.core.cycles import CostRules, Decoded, model

LIB = native.load()
REPO = Path(__file__).resolve().parent.parent
FIRMWARE = sorted(p.stem for p in (REPO / "firmware" / "images").glob("*.c")) + ["xrsa_opt"]
RULES = [CostRules(muls_cycles=1), CostRules(muls_cycles=32, flash_wait_states=2, flash_base=0, flash_end=0x10000)]


def native_rules(rules: CostRules) -> native.Rules:
    return native.Rules(rules.muls_cycles, rules.flash_wait_states, rules.flash_base, rules.flash_end)


def as_decoded(insn: native.Insn) -> Decoded:
    d = insn.desc
    if insn.undefined:
        return Decoded(size=insn.size, undefined=True)
    return Decoded(insn.size, False, insn.cost, insn.flags, (d.kind, d.rd, d.rn, d.rm, d.imm, d.wmask, d.amask))


def native_decode(addr: int, hw1: int, hw2: int, rules: native.Rules) -> Decoded:
    insn = native.Insn()
    LIB.pk_decode(addr, hw1, hw2, ctypes.byref(rules), ctypes.byref(insn))
    LIB.pk_resolve_literal(ctypes.byref(insn.desc), 0, 0)  # no literal pool beside a lone instruction
    return as_decoded(insn)


def mismatches(pairs, addr: int, rules: CostRules) -> list[str]:
    c_rules = native_rules(rules)
    out = []
    for hw1, hw2 in pairs:
        data = hw1.to_bytes(2, "little") + hw2.to_bytes(2, "little")
        want = model(data, addr, rules)
        got = native_decode(addr, hw1, hw2, c_rules)
        if got != want:
            out.append(f"{hw1:04x} {hw2:04x} at 0x{addr:x}: capstone {want} native {got}")
    return out


@pytest.mark.parametrize("addr,rules", [(0x1000, RULES[1]), (0x1002, RULES[0]), (0x1002, RULES[1])],
                         ids=["word-muls32-ws2", "halfword-muls1", "halfword-muls32-ws2"])
def test_every_16_bit_encoding_decodes_as_the_capstone_model_says(addr, rules):
    pairs = [(hw, 0xBF00) for hw in range(0x10000) if hw >> 11 < 0x1D]
    bad = mismatches(pairs, addr, rules)
    assert not bad, f"{len(bad)} encodings differ, first: " + "\n".join(bad[:20])


def thirty_two_bit_sample() -> list[tuple[int, int]]:
    rng = random.Random(7)
    special = [0x0000, 0xFFFF, 0x8000, 0x8800, 0x8808, 0x8809, 0x8810, 0x8814, 0x8F4F, 0x8F5F, 0x8F6F, 0x8F2F,
               0xA000, 0xD000, 0xE800, 0xF000, 0xF800, 0x9000, 0xB000]
    pairs = [(hw1, hw2) for hw1 in range(0xE800, 0x10000) for hw2 in special + [rng.randrange(0x10000) for _ in range(6)]]
    # The ARMv6-M 32-bit instructions and their neighbours, every second halfword:
    # MSR, MRS, the barriers, hints and UDF (branch and miscellaneous control).
    for hw1 in (0xF380, 0xF381, 0xF38C, 0xF390, 0xF3EF, 0xF3E0, 0xF3BF, 0xF3B0, 0xF3AF, 0xF7F0, 0xF7FF):
        pairs += [(hw1, hw2) for hw2 in range(0x8000, 0x9000)]
    pairs += [(0xF7F0, hw2) for hw2 in range(0xA000, 0xB000)]
    # BL: every first halfword with several second halfwords
    pairs += [(hw1, hw2) for hw1 in range(0xF000, 0xF800) for hw2 in (0xD123, 0xF9FF, 0xC000, 0xE800)]
    return pairs


def test_32_bit_encodings_decode_as_the_capstone_model_says():
    bad = mismatches(thirty_two_bit_sample(), 0x2002, RULES[1])
    assert not bad, f"{len(bad)} encodings differ, first: " + "\n".join(bad[:20])


@pytest.mark.parametrize("name", FIRMWARE)
def test_all_code_of_a_firmware_image_decodes_as_the_capstone_model_says(make_machine, config, elf, name):
    m = make_machine()
    image = load_image(elf(name), config)
    m.load(image)
    rules = CostRules(config.core.muls_cycles, config.flash.wait_states, config.flash.base, config.flash.end)

    def word(addr: int) -> int | None:
        region = config.region_at(addr)
        return m.read_u32(addr) if region is not None and region.contains(addr, 4) else None

    checked = 0
    bad = []
    buf = (native.Insn * 512)()
    for start, data in image.code:
        addr = start
        while addr < start + len(data):
            end = min(addr + 1024, start + len(data))
            n = LIB.pk_code_decode_range(m.state.code, m.core.uch, addr, end, buf, 512, 1)
            for insn in buf[:n]:
                want = model(m.read_memory(addr, 4), addr, rules, word)
                got = as_decoded(insn)
                if got != want:
                    bad.append(f"0x{addr:08x}: capstone {want} native {got}")
                addr += insn.size
                checked += 1
    assert checked > 50
    assert not bad, f"{len(bad)} of {checked} instructions differ, first: " + "\n".join(bad[:20])


def test_the_firmware_images_hold_no_instruction_outside_armv6m_but_udf(config, elf):
    """The firmware is built for the Cortex-M0: all it holds that the decoder calls
    UNDEFINED are UDF (the traps of unused handlers, fault image kind 3), and the
    ARMv7-M probes of the anywhere image (v7m_*)."""
    for name in FIRMWARE:
        image = load_image(elf(name), config)
        undefined = []
        for start, data in image.code:
            addr = start
            while addr + 2 <= start + len(data):
                d = model(data[addr - start:addr - start + 4], addr, CostRules())
                if d.undefined and not image.describe(addr).startswith("v7m_"):
                    undefined.append(int.from_bytes(data[addr - start:addr - start + 2], "little"))
                addr += d.size
        assert all(hw >> 8 == 0xDE for hw in undefined), f"{name}: {[hex(h) for h in undefined]}"
    assert "fault_undefined" in load_image(elf("fault"), config).symbols
