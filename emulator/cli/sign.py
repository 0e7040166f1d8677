"""``pkasim sign --key KEY.pem --message FILE [--out SIG] [FW.elf]``: sign on the card.

Brings the card up on the emulated USB bus, imports the key (PW3, algorithm
attributes, the extended header list: as gpg's keytocard does) unless the card's
state already holds it, verifies PW1, sends PSO:COMPUTE DIGITAL SIGNATURE, checks the
signature against the public key on the host and prints the latency breakdown of the
signing command in modeled ms.

Keys (unencrypted PEM, PKCS#8 or the older forms): RSA-2048 and RSA-4096 (the card is
given the DigestInfo of the message's hash; the signature is written raw, big-endian),
NIST P-256 (ECDSA: the card is given the hash, RFC 6979 nonce; the signature is written
DER-encoded, as ``openssl dgst -sign`` writes it) and Ed25519 (RFC 8032: the card is
given the message itself, at most MESSAGE_MAX_ED25519 bytes through its APDU buffer;
the 64-byte signature R || S is written).

Exit codes: 0 a signature that verifies; 1 the card refused or answered a signature
that does not verify; 65 a key of another kind (the message names the supported ones),
an encrypted key, an Ed25519 message too long for the card; 66 a missing file; 74 an
output that cannot be written; 78 a bad chip file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from pkasim.base import limits
from pkasim.base.errors import LoadError, OutputError
from pkasim.cli.cardcommon import add_card_options, check_output, open_session, print_breakdown
from pkasim.cli.common import read_file, write_text
from pkasim.usb.openpgp import DIGEST_INFO, OpenPgpHost, describe_key, key_kind
from pkasim.usb.session import CardError

KEY_MAX = limits.KEY_MAX_BYTES
MESSAGE_MAX = limits.MESSAGE_MAX_BYTES
MESSAGE_MAX_ED25519 = 1536  # the card's command-chaining buffer (1600 bytes) less the APDU headers
SUPPORTED = "RSA-2048, RSA-4096, NIST P-256 (ECDSA) and Ed25519 private keys"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sign", help="sign a file on the emulated OpenPGP card over USB, with the latency breakdown")
    add_card_options(p)
    p.add_argument("--key", required=True, metavar="KEY.pem",
                   help="RSA-2048, RSA-4096, P-256 or Ed25519 private key (unencrypted PEM, PKCS#8)")
    p.add_argument("--message", required=True, metavar="FILE", help="the file to sign")
    p.add_argument("--out", metavar="SIG", help="write the signature here (RSA: raw big-endian; ECDSA: DER; "
                                                "Ed25519: the 64 bytes R || S)")
    p.add_argument("--hash", choices=sorted(DIGEST_INFO), default="sha256", help="digest (default %(default)s)")
    p.add_argument("--json", metavar="FILE", help="write the breakdown as JSON ('-' for stdout)")


def load_key(path: str):
    """The signing key, or a LoadError (exit 65) naming what the card takes."""
    from cryptography.hazmat.primitives import serialization

    data = read_file(path, KEY_MAX, "not a key file")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise LoadError(f"{path}: an encrypted private key; give it unencrypted (the card takes {SUPPORTED})") from None
    except ValueError as exc:
        raise LoadError(f"{path}: not an unencrypted PEM private key ({str(exc).splitlines()[0]}); the card signs "
                        f"with {SUPPORTED}") from None
    try:
        kind = key_kind(key)
    except CardError:
        kind = ""
    if kind not in ("rsa", "p256", "ed25519"):
        raise LoadError(f"{path}: {describe_key(key)} keys are not supported; the card signs with {SUPPORTED}")
    return key


def main(args: argparse.Namespace, console: Console) -> int:
    check_output(args.out, "the signature")  # outputs first: no signature is made only to be lost
    check_output(args.json, "the breakdown JSON")
    key = load_key(args.key)
    kind = key_kind(key)
    message = read_file(args.message, MESSAGE_MAX, "too large to sign here")
    if kind == "ed25519" and len(message) > MESSAGE_MAX_ED25519:
        raise LoadError(f"{args.message}: {len(message):,} bytes; Ed25519 signs the message itself and the card "
                        f"takes at most {MESSAGE_MAX_ED25519:,} bytes (sign a hash of it instead)")
    session = open_session(args)
    session.power_on()
    host = OpenPgpHost(session)
    host.select()
    imported = host.ensure_key(key, "sig")
    signature, ex = host.sign(message, args.hash, kind)
    session.save_state()
    signature = _checked(key, kind, signature, message, args)
    if args.out:
        try:
            Path(args.out).write_bytes(signature)
        except OSError as exc:
            raise OutputError(f"{args.out}: cannot write the signature: {exc.strerror or exc}") from None
    b = ex.breakdown
    name = {"rsa": f"RSA-{getattr(key, 'key_size', 0)}", "p256": "ECDSA P-256", "ed25519": "Ed25519"}[kind]
    if args.json:
        doc = {"key": name, "key_bits": getattr(key, "key_size", 256), "imported": imported,
               "signature": signature.hex(), "breakdown": b.as_dict(), "oscillator": session.osc.summary()}
        write_text(args.json, json.dumps(doc, indent=2) + "\n", "the breakdown JSON")
    print_breakdown(console, f"{name} signature on the card (PSO:CDS), verified", b, session)
    if imported:
        console.print("the key was imported first (PUT DATA with the extended header list)", highlight=False)
    return 0


def _checked(key, kind: str, signature: bytes, message: bytes, args: argparse.Namespace) -> bytes:
    """The signature as written (ECDSA DER-encoded), verified with the public key."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    algorithm = hashes.SHA256() if args.hash == "sha256" else hashes.SHA512()
    try:
        if kind == "rsa":
            key.public_key().verify(signature, message, padding.PKCS1v15(), algorithm)
        elif kind == "p256":
            if len(signature) != 64:
                raise InvalidSignature
            signature = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
            key.public_key().verify(signature, message, ec.ECDSA(algorithm))
        else:
            key.public_key().verify(signature, message)
    except InvalidSignature:
        raise CardError(f"the card's {describe_key(key)} signature does not verify with {args.key}") from None
    return signature
