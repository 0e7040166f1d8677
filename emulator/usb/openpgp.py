"""The host side of the OpenPGP card application: the APDUs gpg's scdaemon sends for
key import, signing, deciphering and authentication (OpenPGP card 3.4, ISO 7816-4),
built from a ``cryptography`` RSA key."""

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


def key_import_data(key: Any, slot: str = "sig") -> bytes:
    """The extended header list for PUT DATA (DB 3FFF), CRT format (tags 91-96), as
    scdaemon builds it for import format 02 (OpenPGP card 3.4, 4.4.3.12)."""
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
    """An identification of the key for the card's fingerprint DO (SHA-1 of n): pkasim's
    own hosts compare it; gpg writes its own OpenPGP v4 fingerprint there."""
    return hashlib.sha1(_be(key.public_key().public_numbers().n)).digest()


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
        """Algorithm attributes (key size), the key, its fingerprint: PW3 first."""
        crt, attr, fpr_tag = SLOTS[slot]
        sw = self.verify(0x83, PW3)
        if sw != 0x9000:
            raise CardStatusError("VERIFY PW3", sw)
        bits = key.key_size
        if bits not in (2048, 4096):
            raise CardError(f"the card takes RSA-2048 and RSA-4096 keys, not {bits}-bit ones")
        self.send("PUT DATA algorithm", apdu(0x00, 0xDA, 0x00, attr, bytes([1, bits >> 8, bits & 0xFF, 0, 0x20, 2])))
        self.send("PUT DATA key", apdu(0x00, 0xDB, 0x3F, 0xFF, key_import_data(key, slot)))
        self.send("PUT DATA fingerprint", apdu(0x00, 0xDA, 0x00, fpr_tag, fingerprint(key)))

    def ensure_key(self, key: Any, slot: str = "sig") -> bool:
        """Import the key unless the card holds it already; True if it was imported."""
        index = list(SLOTS).index(slot)
        if self.fingerprints()[index] == fingerprint(key):
            return False
        self.import_key(key, slot)
        return True

    def sign(self, message: bytes, hash_name: str = "sha256") -> tuple[bytes, Exchange]:
        sw = self.verify(0x81, PW1)
        if sw != 0x9000:
            raise CardStatusError("VERIFY PW1", sw)
        digest = hashlib.new(hash_name, message).digest()
        data, _, ex = self.send("PSO:CDS", apdu(0x00, 0x2A, 0x9E, 0x9A, DIGEST_INFO[hash_name] + digest, le=0x10000))
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
