"""The host side of the OpenPGP card application: the APDUs gpg's scdaemon sends for
key import, signing, deciphering and authentication (OpenPGP card 3.4, ISO 7816-4),
built from a ``cryptography`` key: RSA-2048/4096, NIST P-256 (ECDSA, or ECDH in the
decryption slot), Ed25519 (EdDSA) or X25519 (ECDH cv25519, decryption slot)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from pkasim.usb.session import CardError, CardSession, Exchange
from pkasim.usb.session import short_or_extended as apdu

AID = bytes.fromhex("D27600012401")
PW1 = b"123456"
PW3 = b"12345678"
SLOTS = {"sig": (0xB6, 0xC1, 0xC7), "dec": (0xB8, 0xC2, 0xC8), "aut": (0xA4, 0xC3, 0xC9)}
SW_NAMES = {0x9000: "success", 0x6700: "wrong length", 0x6A80: "incorrect data", 0x6A82: "not found",
            0x6A88: "data object not found", 0x6982: "security status not satisfied", 0x6983: "PIN blocked",
            0x6B00: "wrong P1-P2", 0x6D00: "INS not supported", 0x6E00: "CLA not supported",
            0x6985: "conditions of use not satisfied", 0x6A81: "function not supported"}
# DigestInfo prefixes (RFC 8017 9.2, note 1)
DIGEST_INFO = {"sha256": bytes.fromhex("3031300d060960864801650304020105000420"),
               "sha512": bytes.fromhex("3051300d060960864801650304020305000440")}


def sw_text(sw: int) -> str:
    if sw & 0xFFF0 == 0x63C0:
        return f"wrong PIN, {sw & 0xF} tries left"
    return SW_NAMES.get(sw, "error")


class CardStatusError(CardError):
    def __init__(self, what: str, sw: int) -> None:
        super().__init__(f"{what}: the card answered {sw:04X} ({sw_text(sw)})")
        self.sw = sw


def _tl(tag: int, length: int) -> bytes:
    t = tag.to_bytes(2 if tag > 0xFF else 1, "big")
    if length < 0x80:
        return t + bytes([length])
    if length < 0x100:
        return t + bytes([0x81, length])
    return t + bytes([0x82]) + length.to_bytes(2, "big")


def _be(value: int, length: int | None = None) -> bytes:
    n = length if length is not None else max(1, (value.bit_length() + 7) // 8)
    return value.to_bytes(n, "big")


# ECC algorithm attributes (OpenPGP card 3.4 4.4.3.10): algorithm ID, then the curve's OID.
OID_P256 = bytes.fromhex("2A8648CE3D030107")
OID_ED25519 = bytes.fromhex("2B06010401DA470F01")
OID_CV25519 = bytes.fromhex("2B060104019755010501")
ALGO_ECDH, ALGO_ECDSA, ALGO_EDDSA = 0x12, 0x13, 0x16


def key_kind(key: Any) -> str:
    """"rsa", "p256", "ed25519" or "x25519"; CardError for any other key."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa, x25519

    if isinstance(key, rsa.RSAPrivateKey) and key.key_size in (2048, 4096):
        return "rsa"
    if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
        return "p256"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "ed25519"
    if isinstance(key, x25519.X25519PrivateKey):
        return "x25519"
    raise CardError(f"the card takes RSA-2048, RSA-4096, NIST P-256, Ed25519 and X25519 keys, not {describe_key(key)}")


def describe_key(key: Any) -> str:
    """What a key is, for messages: "RSA-3072", "secp384r1", "Ed448"."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if isinstance(key, rsa.RSAPrivateKey):
        return f"RSA-{key.key_size}"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.curve.name
    return type(key).__name__.replace("PrivateKey", "").lstrip("_") or "this key"


def algorithm_attributes(key: Any, slot: str = "sig") -> bytes:
    """The C1/C2/C3 value for ``key`` in ``slot`` (as gpg's key-attr writes it)."""
    kind = key_kind(key)
    if kind == "rsa":
        bits = key.key_size
        return bytes([1, bits >> 8, bits & 0xFF, 0, 0x20, 2])
    if kind == "p256":
        return bytes([ALGO_ECDH if slot == "dec" else ALGO_ECDSA]) + OID_P256
    if kind == "ed25519":
        if slot == "dec":
            raise CardError("an Ed25519 key signs: it goes in the signature or authentication slot")
        return bytes([ALGO_EDDSA]) + OID_ED25519
    if slot != "dec":
        raise CardError("an X25519 key deciphers: it goes in the decryption slot")
    return bytes([ALGO_ECDH]) + OID_CV25519


def public_bytes(key: Any) -> bytes:
    """The public key as the card gives it (7F49/86): 04 || x || y, or 32 bytes."""
    from cryptography.hazmat.primitives import serialization

    kind = key_kind(key)
    if kind == "rsa":
        return _be(key.public_key().public_numbers().n)
    if kind == "p256":
        return key.public_key().public_bytes(serialization.Encoding.X962,
                                             serialization.PublicFormat.UncompressedPoint)
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _ec_private(key: Any) -> bytes:
    """The private key as gpg sends it: P-256 d big-endian, the Ed25519 secret key, the
    X25519 secret in OpenPGP's byte order (big-endian: RFC 7748's string reversed)."""
    kind = key_kind(key)
    if kind == "p256":
        return key.private_numbers().private_value.to_bytes(32, "big")
    raw = key.private_bytes_raw()
    return raw[::-1] if kind == "x25519" else raw


def key_import_data(key: Any, slot: str = "sig") -> bytes:
    """The extended header list for PUT DATA (DB 3FFF), as scdaemon builds it (OpenPGP
    card 3.4, 4.4.3.12): for RSA the CRT format (tags 91-96, import format 02); for ECC
    the private key (92) and the public key (99)."""
    if key_kind(key) != "rsa":
        priv, pub = _ec_private(key), public_bytes(key)
        template = _tl(0x92, len(priv)) + _tl(0x99, len(pub))
        values = priv + pub
        body = bytes([SLOTS[slot][0], 0x00]) + _tl(0x7F48, len(template)) + template + _tl(0x5F48, len(values)) + values
        return _tl(0x4D, len(body)) + body
    nums = key.private_numbers()
    pub = nums.public_numbers
    half = key.key_size // 16
    parts = [(0x91, _be(pub.e)), (0x92, _be(nums.p, half)), (0x93, _be(nums.q, half)),
             (0x94, _be(nums.iqmp, half)), (0x95, _be(nums.dmp1, half)), (0x96, _be(nums.dmq1, half))]
    template = b"".join(_tl(tag, len(v)) for tag, v in parts)
    values = b"".join(v for _, v in parts)
    body = bytes([SLOTS[slot][0], 0x00]) + _tl(0x7F48, len(template)) + template + _tl(0x5F48, len(values)) + values
    return _tl(0x4D, len(body)) + body


def fingerprint(key: Any) -> bytes:
    """An identification of the key for the card's fingerprint DO (SHA-1 of n, or of the
    public key of an EC key): pkasim's own hosts compare it; gpg writes its own OpenPGP
    v4 fingerprint there."""
    return hashlib.sha1(public_bytes(key)).digest()


@dataclass
class Step:
    name: str
    sw: int
    exchange: Exchange


class OpenPgpHost:
    """SELECT, VERIFY, key import and the private-key operations on a CardSession."""

    def __init__(self, session: CardSession) -> None:
        self.s = session
        self.steps: list[Step] = []

    def send(self, name: str, command: bytes, *, check: bool = True) -> tuple[bytes, int, Exchange]:
        data, sw, ex = self.s.apdu(command)
        self.steps.append(Step(name, sw, ex))
        if check and sw != 0x9000:
            raise CardStatusError(name, sw)
        return data, sw, ex

    def select(self) -> None:
        self.send("SELECT", apdu(0x00, 0xA4, 0x04, 0x00, AID))

    def verify(self, which: int, pin: bytes) -> int:
        return self.send(f"VERIFY {which:02X}", apdu(0x00, 0x20, 0x00, which, pin), check=False)[1]

    def get_data(self, tag: int) -> bytes:
        return self.send(f"GET DATA {tag:04X}", apdu(0x00, 0xCA, tag >> 8, tag & 0xFF, le=0))[0]

    def fingerprints(self) -> list[bytes]:
        fpr = self.get_data(0xC5)
        return [fpr[i:i + 20] for i in range(0, 60, 20)]

    def import_key(self, key: Any, slot: str = "sig") -> None:
        """Algorithm attributes, the key, its fingerprint: PW3 first."""
        crt, attr, fpr_tag = SLOTS[slot]
        attributes = algorithm_attributes(key, slot)
        sw = self.verify(0x83, PW3)
        if sw != 0x9000:
            raise CardStatusError("VERIFY PW3", sw)
        self.send("PUT DATA algorithm", apdu(0x00, 0xDA, 0x00, attr, attributes))
        self.send("PUT DATA key", apdu(0x00, 0xDB, 0x3F, 0xFF, key_import_data(key, slot)))
        self.send("PUT DATA fingerprint", apdu(0x00, 0xDA, 0x00, fpr_tag, fingerprint(key)))

    def ensure_key(self, key: Any, slot: str = "sig") -> bool:
        """Import the key unless the card holds it already; True if it was imported."""
        index = list(SLOTS).index(slot)
        if self.fingerprints()[index] == fingerprint(key):
            return False
        self.import_key(key, slot)
        return True

    def sign(self, message: bytes, hash_name: str = "sha256", kind: str = "rsa") -> tuple[bytes, Exchange]:
        """PSO:CDS with the signature key, whose kind says what the card is given: RSA
        the DigestInfo of the message's hash, ECDSA the hash, EdDSA the message (RFC 8032's
        pure Ed25519 signs the message itself). The card's answer as it comes: RSA's
        signature, ECDSA's r || s, Ed25519's R || S."""
        sw = self.verify(0x81, PW1)
        if sw != 0x9000:
            raise CardStatusError("VERIFY PW1", sw)
        if kind == "ed25519":
            data = message
        elif kind == "p256":
            data = hashlib.new(hash_name, message).digest()
        else:
            data = DIGEST_INFO[hash_name] + hashlib.new(hash_name, message).digest()
        data, _, ex = self.send("PSO:CDS", apdu(0x00, 0x2A, 0x9E, 0x9A, data, le=0x10000))
        return data, ex

    def generate(self, slot: str = "sig") -> bytes:
        """GENERATE ASYMMETRIC KEY PAIR (47 80) in ``slot``, whose algorithm attributes
        must name a curve: the new public key (7F49/86), PW3 first."""
        sw = self.verify(0x83, PW3)
        if sw != 0x9000:
            raise CardStatusError("VERIFY PW3", sw)
        data, _, _ = self.send("GENERATE", apdu(0x00, 0x47, 0x80, 0x00, bytes([SLOTS[slot][0], 0x00]), le=0x10000))
        return _public_from_7f49(data)

    def read_public(self, slot: str = "sig") -> bytes:
        """The public key of ``slot`` (47 81): RSA's n, or the EC public key."""
        data, _, _ = self.send("READ PUBLIC KEY", apdu(0x00, 0x47, 0x81, 0x00, bytes([SLOTS[slot][0], 0x00]),
                                                       le=0x10000))
        return _public_from_7f49(data)

    def set_attributes(self, slot: str, attributes: bytes) -> int:
        """PUT DATA C1/C2/C3 (PW3 first); the status word."""
        sw = self.verify(0x83, PW3)
        if sw != 0x9000:
            raise CardStatusError("VERIFY PW3", sw)
        return self.send("PUT DATA algorithm", apdu(0x00, 0xDA, 0x00, SLOTS[slot][1], attributes), check=False)[1]

    def ecdh(self, point: bytes) -> tuple[bytes, Exchange]:
        """PSO:DECIPHER with an ECC decryption key: A6 { 7F49 { 86 point } }; the shared secret."""
        sw = self.verify(0x82, PW1)
        if sw != 0x9000:
            raise CardStatusError("VERIFY PW1", sw)
        inner = _tl(0x86, len(point)) + point
        outer = _tl(0x7F49, len(inner)) + inner
        data, _, ex = self.send("PSO:DECIPHER", apdu(0x00, 0x2A, 0x80, 0x86, _tl(0xA6, len(outer)) + outer,
                                                     le=0x10000))
        return data, ex

    def decipher(self, ciphertext: bytes) -> tuple[bytes, Exchange]:
        sw = self.verify(0x82, PW1)
        if sw != 0x9000:
            raise CardStatusError("VERIFY PW1", sw)
        data, _, ex = self.send("PSO:DECIPHER", apdu(0x00, 0x2A, 0x80, 0x86, b"\x00" + ciphertext, le=0x10000))
        return data, ex

    def authenticate(self, challenge: bytes) -> tuple[bytes, Exchange]:
        sw = self.verify(0x82, PW1)
        if sw != 0x9000:
            raise CardStatusError("VERIFY PW1", sw)
        data, _, ex = self.send("INTERNAL AUTHENTICATE", apdu(0x00, 0x88, 0x00, 0x00, challenge, le=0x10000))
        return data, ex


def _public_from_7f49(data: bytes) -> bytes:
    """The 86 (EC point) or 81 (RSA modulus) value of a 7F49 template."""
    i = 2
    i += 1 if data[2] < 0x80 else 1 + (data[2] & 0x7F)
    while i < len(data):
        tag = data[i]
        length = data[i + 1]
        j = i + 2
        if length == 0x81:
            length, j = data[i + 2], i + 3
        elif length == 0x82:
            length, j = int.from_bytes(data[i + 2:i + 4], "big"), i + 4
        if tag in (0x86, 0x81):
            return data[j:j + length]
        i = j + length
    raise CardError("the card's public key template holds no key")
