"""The TRNG (peripherals/trng.py, docs/trng.md): its registers on a bare clock, its
deterministic stream, the reseed and the health test, the chip file's parameters, and
the firmware driver (src/trng.c) through the ECC image's key generation and
`pkasim run --seed`."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from pkasim.base.clock import Clock
from pkasim.base.errors import ConfigError
from pkasim.chip.config import load_config
from pkasim.ecc.image import ERR_TRNG, EccImage, Op
from pkasim.peripherals.trng import CR_EN, CR_IE, CR_RESEED, SR_BUSY, SR_DRDY, SR_HTF, SR_HTFI, Reg, Trng


class Counter:
    cycles = 0


@pytest.fixture
def rig():
    """A TRNG on a bare clock; ``advance(n)`` moves time and fires due events."""
    src = Counter()
    clock = Clock(src, 48_000_000)
    pulses: list[int] = []

    def make(**params) -> Trng:
        return Trng("trng", 0x40030000, clock, lambda: pulses.append(src.cycles), **params)

    def advance(n: int) -> None:
        target = src.cycles + n
        while (nxt := clock.next_deadline()) is not None and nxt <= target:
            src.cycles = nxt
            clock.run_due()
        src.cycles = target

    return make, advance, pulses


def words(trng: Trng, advance, n: int) -> list[int]:
    out = []
    for _ in range(n):
        advance(trng.word_cycles)
        assert trng.read(Reg.SR, 4) & SR_DRDY
        out.append(trng.read(Reg.DR, 4))
    return out


def expected(seed: int, reseeds: int, i: int) -> int:
    data = b"pkasim-trng" + seed.to_bytes(8, "little") + reseeds.to_bytes(4, "little") + i.to_bytes(8, "little")
    return int.from_bytes(hashlib.sha256(data).digest()[:4], "little")


def test_a_word_is_ready_word_cycles_after_enable_and_after_each_read(rig):
    make, advance, _ = rig
    t = make(word_cycles=42)
    t.write(Reg.CR, 4, CR_EN)
    advance(41)
    assert not t.read(Reg.SR, 4) & SR_DRDY
    advance(1)
    assert t.read(Reg.SR, 4) & SR_DRDY
    t.read(Reg.DR, 4)
    assert not t.read(Reg.SR, 4) & SR_DRDY
    advance(42)
    assert t.read(Reg.SR, 4) & SR_DRDY


def test_the_stream_is_sha256_of_the_seed_reseed_count_and_word_number(rig):
    make, advance, _ = rig
    t = make(seed=7)
    t.write(Reg.CR, 4, CR_EN)
    assert words(t, advance, 5) == [expected(7, 0, i) for i in range(5)]
    assert t.read(Reg.COUNT, 4) == 5


def test_the_same_seed_gives_the_same_words_and_another_seed_others(rig):
    make, advance, _ = rig
    a, b, c = make(seed=1), make(seed=1), make(seed=2)
    for t in (a, b, c):
        t.write(Reg.CR, 4, CR_EN)
    wa, wb, wc = (words(t, advance, 8) for t in (a, b, c))
    assert wa == wb and wa != wc


def test_reading_dr_with_no_word_ready_gives_zero(rig):
    make, _, _ = rig
    t = make()
    t.write(Reg.CR, 4, CR_EN)
    assert t.read(Reg.DR, 4) == 0 and t.read(Reg.COUNT, 4) == 0


def test_a_reseed_is_busy_for_reseed_cycles_then_starts_a_new_stream(rig):
    make, advance, _ = rig
    t = make(seed=3, reseed_cycles=500)
    t.write(Reg.CR, 4, CR_EN)
    words(t, advance, 2)
    t.write(Reg.CR, 4, CR_EN | CR_RESEED)
    assert t.read(Reg.SR, 4) & SR_BUSY and t.read(Reg.RESEEDS, 4) == 1
    assert t.read(Reg.CR, 4) == CR_EN  # RESEED reads 0
    advance(499)
    assert t.read(Reg.SR, 4) & SR_BUSY
    advance(1)
    assert not t.read(Reg.SR, 4) & SR_BUSY and t.read(Reg.COUNT, 4) == 0
    assert words(t, advance, 2) == [expected(3, 1, 0), expected(3, 1, 1)]


def test_a_stuck_source_fails_the_health_test_until_a_reseed(rig):
    """fail_after = 3: the fourth word repeats the third; SP 800-90B's repetition count
    test catches it: HTF and HTFI rise, no word comes until a reseed clears HTF."""
    make, advance, _ = rig
    t = make(fail_after=3)
    t.write(Reg.CR, 4, CR_EN)
    words(t, advance, 3)
    advance(100)
    sr = t.read(Reg.SR, 4)
    assert sr & SR_HTF and sr & SR_HTFI and not sr & SR_DRDY
    t.write(Reg.SR_CLR, 4, SR_HTFI)
    assert not t.read(Reg.SR, 4) & SR_HTFI and t.read(Reg.SR, 4) & SR_HTF
    t.write(Reg.CR, 4, CR_EN | CR_RESEED)
    advance(t.reseed_cycles)
    assert not t.read(Reg.SR, 4) & SR_HTF


def test_the_interrupt_pulses_when_drdy_or_htfi_rises_under_ie(rig):
    make, advance, pulses = rig
    t = make(word_cycles=10, fail_after=1)
    t.write(Reg.CR, 4, CR_EN | CR_IE)
    advance(10)
    assert pulses == [10]
    t.read(Reg.DR, 4)
    advance(10)
    assert pulses == [10, 20]  # HTFI (the second word repeats the first)
    t.write(Reg.CR, 4, CR_EN)
    advance(100)
    assert pulses == [10, 20]


def test_disabling_stops_the_stream(rig):
    make, advance, _ = rig
    t = make()
    t.write(Reg.CR, 4, CR_EN)
    t.write(Reg.CR, 4, 0)
    advance(1000)
    assert t.read(Reg.SR, 4) == 0


@pytest.mark.parametrize("params, key", [({"seed": -1}, "seed"), ({"word_cycles": 0}, "word_cycles"),
                                         ({"fail_after": 0}, "fail_after"), ({"reseed_cycles": "x"}, "reseed_cycles")])
def test_bad_parameters_are_refused_naming_the_key(rig, params, key):
    make, _, _ = rig
    with pytest.raises(ConfigError, match=rf"peripherals\.trng\.{key}"):
        make(**params)


def test_a_bad_parameter_in_a_chip_file_names_the_file_and_line(tmp_path, repo):
    chip = tmp_path / "chip.yaml"
    chip.write_text((repo / "configs" / "ciu98320b.yaml").read_text().replace("word_cycles: 42", "word_cycles: 0"))
    from pkasim.core.machine import Machine

    with pytest.raises(ConfigError, match=r"chip\.yaml:\d+: peripherals\.trng\.word_cycles"):
        Machine(load_config(chip))


# --------------------------------------------------------------------------- the firmware

def test_firmware_draws_the_seeded_stream_and_new_keys_from_it(config, elf):
    img = EccImage(config, elf("ecc"))
    r = img.run(Op.RANDOM)
    assert r.ok and r.out == b"".join(expected(1, 0, i).to_bytes(4, "little") for i in range(16))
    k = img.run(Op.P256_KEYGEN)
    d = int.from_bytes(k.out[:32], "big")
    pub = ec.derive_private_key(d, ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    assert k.ok and k.out[32:] == pub
    e = img.run(Op.ED25519_KEYGEN)
    assert e.ok and ed25519.Ed25519PrivateKey.from_private_bytes(e.out[:32]).public_key().public_bytes_raw() == \
        e.out[32:]


def test_firmware_reseeds_once_after_a_failed_health_test_and_then_reports_it(tmp_path, repo, elf):
    chip = tmp_path / "stuck.yaml"
    chip.write_text((repo / "configs" / "ciu98320b.yaml").read_text()
                    .replace("reseed_cycles: 2000", "reseed_cycles: 2000\n    fail_after: 4"))
    img = EccImage(load_config(chip), elf("ecc"))
    assert img.run(Op.RANDOM).status == ERR_TRNG  # stuck again right after the reseed (fail_after counts all words)
    assert img.machine.peripherals["trng"].reseeds == 1


def test_run_seed_option_changes_the_stream(tmp_path, repo, elf):
    op, check = tmp_path / "op.bin", tmp_path / "check.bin"
    op.write_bytes(int(Op.RANDOM).to_bytes(4, "little"))
    check.write_bytes(bytes(4))
    outs = []
    for seed in ("1", "2", "1"):
        out = tmp_path / f"out{len(outs)}.bin"
        subprocess.run([sys.executable, "-m", "pkasim", "run", str(elf("ecc")), "-q", "--seed", seed,
                        "--load", f"ecc_op={op}", "--load", f"ecc_check={check}", "--dump", f"ecc_out={out}"],
                       check=True, cwd=repo, capture_output=True)
        outs.append(out.read_bytes()[:64])
    assert outs[0] == outs[2] != outs[1]
