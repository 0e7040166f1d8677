"""The OpenPGP card's ECC keys (firmware/src/openpgp.c over src/p256.c and src/c25519.c;
docs/usb.md, docs/ecc.md) on the emulated USB bus: algorithm attributes, key import,
on-card generation from the TRNG, signatures that verify (ECDSA P-256, Ed25519), ECDH
(cv25519, P-256) against `cryptography`, refused curves and slots, the state file and
its checksum (a damaged one refused whole);
and `pkasim sign --key` with P-256 and Ed25519 PKCS#8 keys and its refusals."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, x25519
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from pkasim.base.errors import LoadError
from pkasim.chip.config import load_config
from pkasim.cli.main import main
from pkasim.core.machine import Machine
from pkasim.usb.openpgp import OID_CV25519, OID_ED25519, OID_P256, OpenPgpHost, public_bytes
from pkasim.usb.session import CardError, CardSession

ROOT = Path(__file__).resolve().parent.parent
CARD = ROOT / "firmware" / "build" / "card.elf"

pytestmark = pytest.mark.skipif(not CARD.exists(), reason="firmware/build/card.elf is not built (make firmware)")


def open_card(state=None) -> tuple[CardSession, OpenPgpHost]:
    m = Machine(load_config())
    m.load(CARD)
    session = CardSession(m, state=state)
    session.load_state()
    session.attach()
    session.power_on()
    host = OpenPgpHost(session)
    host.select()
    return session, host


def p256_key(n: int) -> ec.EllipticCurvePrivateKey:
    return ec.derive_private_key(int.from_bytes(hashlib.sha256(b"card p256 %d" % n).digest(), "big") % 2**255 + 1,
                                 ec.SECP256R1())


def ed_key(n: int) -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"card ed25519 %d" % n).digest())


def x_key(n: int) -> x25519.X25519PrivateKey:
    return x25519.X25519PrivateKey.from_private_bytes(hashlib.sha256(b"card x25519 %d" % n).digest())


@pytest.fixture(scope="module")
def card() -> tuple[CardSession, OpenPgpHost]:
    """ECDSA P-256 for signing, cv25519 for deciphering, Ed25519 for authentication."""
    session, host = open_card()
    host.import_key(p256_key(1), "sig")
    host.import_key(x_key(1), "dec")
    host.import_key(ed_key(1), "aut")
    return session, host


def test_imported_keys_give_their_attributes_and_public_keys(card) -> None:
    _, host = card
    assert host.get_data(0xC1) == bytes([0x13]) + OID_P256
    assert host.get_data(0xC2) == bytes([0x12]) + OID_CV25519
    assert host.get_data(0xC3) == bytes([0x16]) + OID_ED25519
    assert host.read_public("sig") == public_bytes(p256_key(1))
    assert host.read_public("dec") == public_bytes(x_key(1))
    assert host.read_public("aut") == public_bytes(ed_key(1))


def test_ecdsa_signature_of_the_hash_verifies_and_is_rfc6979(card) -> None:
    _, host = card
    msg = b"ECDSA on the card"
    sig, _ = host.sign(msg, "sha256", "p256")
    assert len(sig) == 64
    der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
    p256_key(1).public_key().verify(der, msg, ec.ECDSA(hashes.SHA256()))
    ref = p256_key(1).sign(msg, ec.ECDSA(hashes.SHA256(), deterministic_signing=True))
    assert decode_dss_signature(ref) == decode_dss_signature(der)


def test_cv25519_decipher_gives_the_x25519_shared_secret(card) -> None:
    _, host = card
    eph = x_key(2)
    point = public_bytes(eph)
    expected = eph.exchange(x_key(1).public_key())
    assert host.ecdh(point)[0] == expected
    assert host.ecdh(b"\x40" + point)[0] == expected  # OpenPGP's native-point prefix is taken too


def test_ecdh_with_a_point_of_small_order_is_refused(card) -> None:
    from pkasim.usb.openpgp import CardStatusError

    _, host = card
    with pytest.raises(CardStatusError, match="6A80"):
        host.ecdh(bytes(32))  # u = 0: an all-zero secret


def test_ed25519_internal_authenticate_signs_the_challenge(card) -> None:
    _, host = card
    challenge = b"authenticate me"
    sig, _ = host.authenticate(challenge)
    ed_key(1).public_key().verify(sig, challenge)


def test_p256_in_the_decryption_slot_does_ecdh(tmp_path: Path) -> None:
    _, host = open_card()
    host.import_key(p256_key(3), "dec")
    assert host.get_data(0xC2) == bytes([0x12]) + OID_P256
    peer = p256_key(4)
    assert host.ecdh(public_bytes(peer))[0] == peer.exchange(ec.ECDH(), p256_key(3).public_key())


@pytest.mark.parametrize("slot, attributes", [
    ("sig", bytes([0x13]) + OID_P256), ("sig", bytes([0x16]) + OID_ED25519), ("dec", bytes([0x12]) + OID_CV25519),
])
def test_on_card_generation_gives_a_working_key(slot, attributes) -> None:
    _, host = open_card()
    assert host.set_attributes(slot, attributes) == 0x9000
    pub = host.generate(slot)
    assert host.read_public(slot) == pub
    msg = b"generated on the card"
    if attributes[0] == 0x13:
        sig, _ = host.sign(msg, "sha256", "p256")
        der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), pub).verify(der, msg, ec.ECDSA(hashes.SHA256()))
    elif attributes[0] == 0x16:
        sig, _ = host.sign(msg, "sha256", "ed25519")
        ed25519.Ed25519PublicKey.from_public_bytes(pub).verify(sig, msg)
    else:
        eph = x_key(5)
        assert host.ecdh(public_bytes(eph))[0] == eph.exchange(x25519.X25519PublicKey.from_public_bytes(pub))


def test_generation_is_refused_for_rsa_slots_and_without_pw3() -> None:
    from pkasim.usb.session import short_or_extended as apdu

    _, host = open_card()
    _, sw, _ = host.send("GENERATE", apdu(0x00, 0x47, 0x80, 0x00, b"\xb6\x00", le=0x10000), check=False)
    assert sw == 0x6982  # PW3 not verified
    with pytest.raises(CardError, match="6A81"):
        host.generate("sig")  # an RSA slot: not generated on the card


@pytest.mark.parametrize("slot, attributes", [
    ("sig", bytes([0x13]) + bytes.fromhex("2B81040022")),  # secp384r1
    ("sig", bytes([0x16]) + bytes.fromhex("2B06010401DA470F02")),  # not Ed25519's OID
    ("dec", bytes([0x16]) + OID_ED25519),  # EdDSA cannot decipher
    ("sig", bytes([0x12]) + OID_CV25519),  # cv25519 cannot sign
])
def test_unsupported_curves_and_slots_are_refused(slot, attributes) -> None:
    _, host = open_card()
    assert host.set_attributes(slot, attributes) == 0x6A80


def test_ecc_keys_survive_in_the_card_state_file(tmp_path: Path) -> None:
    state = tmp_path / "card.state"
    session, host = open_card(state)
    host.import_key(ed_key(6), "sig")
    session.save_state()
    session2, host2 = open_card(state)
    assert not host2.ensure_key(ed_key(6), "sig")
    sig, _ = host2.sign(b"after a power cycle", "sha256", "ed25519")
    ed_key(6).public_key().verify(sig, b"after a power cycle")


def _damaged_state(tmp_path: Path, damage: str) -> Path:
    """A state file holding an Ed25519 signing key, then damaged."""
    state = tmp_path / "card.state"
    session, host = open_card(state)
    host.import_key(ed_key(7), "sig")
    session.save_state()
    data = bytearray(state.read_bytes())
    key_at = bytes(data).index(ed_key(7).private_bytes_raw())
    if damage == "truncated":
        data = data[:-10]
    elif damage == "old magic":
        data[:4] = b"PGP1"[::-1]
    elif damage == "a flipped key bit":
        data[key_at + 5] ^= 0x10  # right size and magic: only the checksum tells
    elif damage == "no checksum":
        data = data[:-32]  # card_state alone
    state.write_bytes(bytes(data))
    return state


@pytest.mark.parametrize("damage", ["truncated", "old magic", "a flipped key bit", "no checksum"])
def test_a_corrupted_card_state_file_is_refused(tmp_path: Path, damage: str) -> None:
    state = _damaged_state(tmp_path, damage)
    with pytest.raises(LoadError, match="not a card-state file|the card state is damaged") as info:
        open_card(state)
    assert info.value.exit_code == 65


def test_sign_with_a_damaged_state_file_is_one_line_and_exit_65_and_leaves_it_alone(tmp_path: Path, capsys) -> None:
    state = _damaged_state(tmp_path, "a flipped key bit")
    before = state.read_bytes()
    msg = tmp_path / "msg"
    msg.write_bytes(b"x")
    assert run(["sign", "--key", _pem(ed_key(7), tmp_path / "k.pem"), "--message", msg, "--state", state]) == 65
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the card state is damaged" in err[0]
    assert state.read_bytes() == before  # never half-used, never overwritten


# --------------------------------------------------------------------------- pkasim sign --key

def _pem(key, path: Path, password: bytes | None = None) -> Path:
    enc = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc))
    return path


def run(argv: list) -> int:
    try:
        return main([str(a) for a in argv])
    except SystemExit as exc:
        return int(exc.code)


def test_sign_with_a_p256_key_writes_a_der_signature_that_verifies(tmp_path: Path) -> None:
    key = p256_key(8)
    msg, sig = tmp_path / "msg", tmp_path / "sig"
    msg.write_bytes(b"pkasim sign with P-256")
    assert run(["sign", "--key", _pem(key, tmp_path / "k.pem"), "--message", msg, "--out", sig]) == 0
    key.public_key().verify(sig.read_bytes(), msg.read_bytes(), ec.ECDSA(hashes.SHA256()))  # DER, as openssl's


def test_sign_with_an_ed25519_key_writes_the_64_byte_signature(tmp_path: Path) -> None:
    key = ed_key(9)
    msg, sig = tmp_path / "msg", tmp_path / "sig"
    msg.write_bytes(b"pkasim sign with Ed25519")
    assert run(["sign", "--key", _pem(key, tmp_path / "k.pem"), "--message", msg, "--out", sig]) == 0
    assert sig.read_bytes() == key.sign(msg.read_bytes())


@pytest.mark.parametrize("kind", ["secp384r1", "Ed448", "encrypted", "x25519"])
def test_sign_refuses_other_keys_naming_what_it_takes(tmp_path: Path, capsys, kind: str) -> None:
    keys = {"secp384r1": ec.generate_private_key(ec.SECP384R1()), "Ed448": ed448.Ed448PrivateKey.generate(),
            "encrypted": p256_key(10), "x25519": x_key(10)}
    pem = _pem(keys[kind], tmp_path / "k.pem", b"secret" if kind == "encrypted" else None)
    msg = tmp_path / "msg"
    msg.write_bytes(b"x")
    assert run(["sign", "--key", pem, "--message", msg]) == 65
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "P-256" in err[0] and "Ed25519" in err[0]


@pytest.mark.parametrize("content", [b"not a key", b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"])
def test_sign_refuses_a_file_that_is_not_a_private_key_naming_what_it_takes(tmp_path: Path, capsys, content) -> None:
    pem, msg = tmp_path / "k.pem", tmp_path / "msg"
    pem.write_bytes(content)
    msg.write_bytes(b"x")
    assert run(["sign", "--key", pem, "--message", msg]) == 65
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "P-256" in err[0] and "Ed25519" in err[0]


def test_sign_refuses_an_ed25519_message_too_long_for_the_card(tmp_path: Path, capsys) -> None:
    msg = tmp_path / "msg"
    msg.write_bytes(bytes(4096))
    assert run(["sign", "--key", _pem(ed_key(11), tmp_path / "k.pem"), "--message", msg]) == 65
    assert "at most" in capsys.readouterr().err
