"""The OpenPGP card (firmware/build/card.elf) on the emulated USB bus: enumeration,
CCID, signatures that verify, decipher, the 512-byte signature's packets and the
latency breakdown, malformed input, the card-state file, and the trimmed clock."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

from pkasim.chip.config import load_config
from pkasim.core.machine import Machine
from pkasim.usb import wire
from pkasim.usb.descriptors import lsusb
from pkasim.usb.openpgp import PW1, OpenPgpHost
from pkasim.usb.session import CardSession
from pkasim.usb.session import short_or_extended as apdu

ROOT = Path(__file__).resolve().parent.parent
CARD = ROOT / "firmware" / "build" / "card.elf"
KEYS = ROOT / "firmware" / "keys"


def key(bits: int):
    return serialization.load_pem_private_key((KEYS / f"demo-{bits}.pem").read_bytes(), None)


def chip(**oscillator):
    """The default chip with its oscillator options changed."""
    cfg = load_config()
    usb = cfg.peripherals["usb"]
    params = {**usb.params, "oscillator": {**usb.params.get("oscillator", {}), **oscillator}}
    return dataclasses.replace(cfg, peripherals={**cfg.peripherals, "usb": dataclasses.replace(usb, params=params)})


def open_card(config=None, state=None) -> tuple[CardSession, OpenPgpHost]:
    if not CARD.exists():
        pytest.skip("firmware/build/card.elf is not built (make firmware)")
    m = Machine(config or load_config())
    m.load(CARD)
    session = CardSession(m, state=state)
    session.load_state()
    session.attach()
    session.power_on()
    host = OpenPgpHost(session)
    host.select()
    return session, host


@pytest.fixture(scope="module")
def card() -> tuple[CardSession, OpenPgpHost]:
    """RSA-4096 in the signature slot, RSA-2048 for deciphering and authentication."""
    session, host = open_card()
    host.import_key(key(4096), "sig")
    host.import_key(key(2048), "dec")
    host.import_key(key(2048), "aut")
    return session, host


@pytest.fixture(scope="module")
def signed_4096(card):
    session, host = card
    message = b"pkasim signs this with RSA-4096 over USB"
    sig, ex = host.sign(message)
    return message, sig, ex


# ------------------------------------------------------------------ enumeration
def test_the_card_enumerates_as_a_ccid_reader(card) -> None:
    session, _ = card
    text = lsusb(session.descriptors)
    assert "ID 1209:0001 pkasim pkasim OpenPGP card" in text
    assert "bInterfaceClass         11 Chip/SmartCard" in text
    assert "Short and extended APDU level exchange" in text
    assert session.host.interrupt_interval == 16


def test_the_reader_announces_the_card_on_the_interrupt_endpoint(card) -> None:
    session, _ = card
    assert session.interrupts and session.interrupts[0][1] == b"\x50\x03"  # NotifySlotChange: present, changed


# ------------------------------------------------------------------ RSA
def test_an_rsa4096_signature_verifies(signed_4096) -> None:
    message, sig, _ = signed_4096
    key(4096).public_key().verify(sig, message, padding.PKCS1v15(), hashes.SHA256())


def test_an_rsa2048_signature_verifies() -> None:
    _, host = open_card()
    host.import_key(key(2048), "sig")
    sig, _ = host.sign(b"two thousand and forty-eight")
    key(2048).public_key().verify(sig, b"two thousand and forty-eight", padding.PKCS1v15(), hashes.SHA256())


def test_decipher_round_trips_a_pkcs1v15_ciphertext(card) -> None:
    _, host = card
    ciphertext = key(2048).public_key().encrypt(b"session key 0123456789abcdef", padding.PKCS1v15())
    plain, _ = host.decipher(ciphertext)
    assert plain == b"session key 0123456789abcdef"


def test_a_ciphertext_without_pkcs1_padding_is_6a80(card) -> None:
    _, host = card
    pub = key(2048).public_key().public_numbers()
    bad = pow(0x0003 << 2000, pub.e, pub.n).to_bytes(256, "big")  # decrypts to 00 03 ...: not type 2
    host.verify(0x82, PW1)
    _, sw, _ = host.send("PSO:DECIPHER", apdu(0x00, 0x2A, 0x80, 0x86, b"\x00" + bad, le=0x10000), check=False)
    assert sw == 0x6A80


def test_internal_authenticate_signs_the_challenge_with_the_authentication_key(card) -> None:
    _, host = card
    challenge = hashlib.sha256(b"ssh session").digest()
    sig, _ = host.authenticate(challenge)
    pub = key(2048).public_key().public_numbers()
    em = pow(int.from_bytes(sig, "big"), pub.e, pub.n).to_bytes(256, "big")
    assert em == b"\x00\x01" + b"\xff" * (256 - 3 - 32) + b"\x00" + challenge


def test_the_public_key_reads_back_as_n_and_e(card) -> None:
    _, host = card
    data, _, _ = host.send("READ PUBLIC KEY", apdu(0x00, 0x47, 0x81, 0x00, b"\xB8\x00", le=0x10000))
    pub = key(2048).public_key().public_numbers()
    assert data[:5] == b"\x7f\x49\x82\x01\x09" and data[5:9] == b"\x81\x82\x01\x00"
    assert int.from_bytes(data[9:265], "big") == pub.n and data[265:] == b"\x82\x03\x01\x00\x01"


# ------------------------------------------------------------------ the 512-byte signature on the wire
def test_a_512_byte_signature_leaves_in_eight_full_packets_and_one_of_12_bytes(signed_4096) -> None:
    _, sig, ex = signed_4096
    response = [p for p in ex.packets if p.tag == "resp"]
    assert len(sig) == 512
    assert [len(p.data) for p in response] == [64] * 8 + [12]  # 10-byte CCID header + 512 + SW
    frames = sorted({p.frame for p in response})
    # 9 packets fit one frame (at most 19); they may straddle a frame boundary, never more
    assert len(frames) <= 2 and frames[-1] - frames[0] == len(frames) - 1
    for p in response:
        sof = [q for q in ex.packets if q.kind == "SOF" and q.frame == p.frame]
        assert sof and sof[0].end_ns <= p.start_ns and p.end_ns <= p.frame * 1e6 + 1e6
    assert all(p.handshake == "ACK" for p in response)


def test_the_usb_in_time_is_the_wire_time_of_those_packets(signed_4096) -> None:
    _, _, ex = signed_4096
    b = ex.breakdown
    bits = sum(wire.token_bits(wire.PID_IN, 1, 1) + wire.data_bits(wire.PID_DATA0, p.data)
               + 2 * wire.TURNAROUND_BITS + wire.handshake_bits(wire.PID_ACK) + wire.GAP_BITS
               for p in ex.packets if p.tag == "resp")
    assert b.usb_in_ms == pytest.approx(wire.ns(bits) / 1e6, abs=1e-9)


def test_the_latency_breakdown_sums_to_the_total(signed_4096) -> None:
    _, _, ex = signed_4096
    b = ex.breakdown
    assert sum(v for _, v in b.parts()) == pytest.approx(b.total_ms, abs=1e-9)
    assert all(v >= 0 for _, v in b.parts())
    assert b.compute_ms > 0.99 * b.total_ms - 1.0  # the RSA-4096 operation is nearly all of it


def test_a_long_command_sends_a_time_extension_every_100_ms(signed_4096) -> None:
    _, _, ex = signed_4096
    b = ex.breakdown
    texts = [p for p in ex.packets if p.tag == "text"]
    assert b.time_extensions == int(b.compute_ms // 100) == len(texts)
    assert all(p.data[0] == 0x80 and p.data[7] == 0x80 for p in texts)  # DataBlock, bmCommandStatus 2


# ------------------------------------------------------------------ PINs and errors
def test_signing_without_a_key_is_6a88() -> None:
    _, host = open_card()
    host.verify(0x81, PW1)
    _, sw, _ = host.send("PSO:CDS", apdu(0x00, 0x2A, 0x9E, 0x9A, bytes(51), le=0x10000), check=False)
    assert sw == 0x6A88

def test_a_wrong_pin_counts_down_and_the_right_one_restores_the_count(card) -> None:
    _, host = card
    assert host.verify(0x82, b"000000") == 0x63C2
    assert host.verify(0x82, b"111111") == 0x63C1
    assert host.verify(0x82, PW1) == 0x9000
    assert host.get_data(0xC4)[4] == 3


@pytest.mark.parametrize("command, sw", [
    (b"\x00\xA4", 0x6700),                                  # shorter than a header
    (bytes.fromhex("00FF0000"), 0x6D00),                    # unknown INS
    (bytes.fromhex("80CA006E00"), 0x6E00),                  # unknown CLA
    (bytes.fromhex("00CA006E050102"), 0x6700),              # Lc says 5, 2 bytes follow
    (bytes.fromhex("00CA012300"), 0x6A88),                  # no such data object
    (bytes.fromhex("002A9E9A0100"), 0x6982),                # signing without PW1
    (bytes.fromhex("0020008403313233"), 0x6B00),            # no such PIN
])
def test_malformed_or_refused_apdus_get_their_status_word(card, command: bytes, sw: int) -> None:
    _, host = card
    assert host.send("bad", command, check=False)[1] == sw


@pytest.mark.parametrize("raw, error", [
    (bytes.fromhex("6f000000000101000000"), 5),             # slot 1: no such slot (bError = offset of bSlot)
    (bytes.fromhex("6f640000000002000000") + bytes(10), 1),  # dwLength 100, 10 bytes sent: truncated
    (bytes.fromhex("99000000000003000000"), 0),             # unknown message: CMD_NOT_SUPPORTED
    (bytes.fromhex("6f881300000004000000") + bytes(80), 1),  # dwLength 5000: more than the reader takes
    (bytes.fromhex("6f0000"), 1),                           # not even a header
])
def test_malformed_ccid_messages_get_ccid_errors(card, raw: bytes, error: int) -> None:
    session, _ = card
    ex = session.ccid(0, raw=raw)
    assert ex.status >> 6 == 1 and ex.error == error  # bmCommandStatus 1: failed


def test_put_data_needs_pw3(card) -> None:
    _, host = card
    host.send("VERIFY reset", bytes.fromhex("0020FF83"))
    assert host.send("PUT DATA", bytes.fromhex("00DA005B03414243"), check=False)[1] == 0x6982


def test_the_card_keeps_working_after_malformed_input(card) -> None:
    session, host = card
    for raw in (bytes.fromhex("6f640000000002000000") + bytes(10), bytes.fromhex("99000000000003000000")):
        session.ccid(0, raw=raw)
    host.send("bad", bytes.fromhex("00FF0000"), check=False)
    ciphertext = key(2048).public_key().encrypt(b"still alive", padding.PKCS1v15())
    assert host.decipher(ciphertext)[0] == b"still alive"


# ------------------------------------------------------------------ card state
def test_keys_survive_in_the_card_state_file(tmp_path: Path) -> None:
    state = tmp_path / "card.state"
    session, host = open_card(state=state)
    host.import_key(key(2048), "sig")
    session.save_state()
    session2, host2 = open_card(state=state)
    assert not host2.ensure_key(key(2048), "sig")  # already on the card
    sig, _ = host2.sign(b"after a power cycle")
    key(2048).public_key().verify(sig, b"after a power cycle", padding.PKCS1v15(), hashes.SHA256())


# ------------------------------------------------------------------ the trimmed clock
def _sign_4096(config) -> tuple[float, float, CardSession]:
    """(firmware's SysTick ms, host ms) of one RSA-4096 signature's computation: the
    host's span from the command's arrival to the reply's first packet armed."""
    session, host = open_card(config)
    host.import_key(key(4096), "sig")
    _, ex = host.sign(b"clock")
    return ex.breakdown.firmware_ms, ex.breakdown.compute_ms, session


@pytest.fixture(scope="module")
def nominal_sign() -> tuple[float, float, CardSession]:
    return _sign_4096(None)


def _firmware_error_ppm(nominal, fw: float, host: float, osc) -> float:
    """The firmware's measure against host time, in ppm. The host's span holds a little
    more than the firmware's (CCID parsing, the reply's first packet): that part is
    measured on the nominal chip and taken out, at the oscillator's frequency."""
    fw0, host0, _ = nominal
    outside = (host0 - fw0) / (1 + osc.error_ppm * 1e-6)
    return (fw / (host - outside) - 1) * 1e6


def test_with_2500_ppm_and_no_trim_firmware_time_runs_2500_ppm_ahead_of_host_time(nominal_sign) -> None:
    fw, host, session = _sign_4096(chip(error_ppm=2500, trim=False))
    assert _firmware_error_ppm(nominal_sign, fw, host, session.osc) == pytest.approx(2500, abs=5)
    # The same in the session's totals: device time (cycles at 48 MHz) against host time.
    device_ms = session.osc.device_ms(session.m.cycles)
    assert (device_ms / (session.host.now_ns() / 1e6) - 1) * 1e6 == pytest.approx(2500, abs=1)


def test_with_trimming_the_firmware_time_error_falls_within_the_trim_bound(nominal_sign) -> None:
    fw, host, session = _sign_4096(chip(error_ppm=2500, trim=True, trim_step_ppm=1000))
    assert session.osc.trims == 2 and session.osc.bound_ppm == 500
    assert abs(_firmware_error_ppm(nominal_sign, fw, host, session.osc)) <= session.osc.bound_ppm + 5


def test_device_time_equals_host_time_on_the_default_chip(signed_4096) -> None:
    _, _, ex = signed_4096
    assert ex.breakdown.device_ms == pytest.approx(ex.breakdown.total_ms, abs=1e-9)
