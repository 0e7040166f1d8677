"""``pkasim sign --key KEY.pem --message FILE [--out SIG] [FW.elf]``: sign on the card.

Brings the card up on the emulated USB bus, imports the key (PW3, algorithm
attributes, the extended header list: as gpg's keytocard does) unless the card's
state already holds it, verifies PW1, sends PSO:COMPUTE DIGITAL SIGNATURE with the
DigestInfo of the message, checks the signature against the public key on the host
and prints the latency breakdown of the signing command in modeled ms.

Exit codes: 0 a signature that verifies; 1 the card refused or answered a signature
that does not verify; 65 a key that is not an RSA-2048/4096 private key;
66 a missing file; 74 an output that cannot be written; 78 a bad chip file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from pkasim.base.errors import LoadError, OutputError
from pkasim.cli.cardcommon import add_card_options, open_session, print_breakdown
from pkasim.cli.common import read_file, write_text
from pkasim.usb.openpgp import DIGEST_INFO, OpenPgpHost
from pkasim.usb.session import CardError

KEY_MAX = 64 * 1024
MESSAGE_MAX = 64 * 1024 * 1024


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sign", help="sign a file on the emulated OpenPGP card over USB, with the latency breakdown")
    add_card_options(p)
    p.add_argument("--key", required=True, metavar="KEY.pem", help="RSA-2048 or RSA-4096 private key (PEM)")
    p.add_argument("--message", required=True, metavar="FILE", help="the file to sign")
    p.add_argument("--out", metavar="SIG", help="write the signature (raw, big-endian) here")
    p.add_argument("--hash", choices=sorted(DIGEST_INFO), default="sha256", help="digest (default %(default)s)")
    p.add_argument("--json", metavar="FILE", help="write the breakdown as JSON ('-' for stdout)")


def load_key(path: str):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    data = read_file(path, KEY_MAX, "not a key file")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise LoadError(f"{path}: not an unencrypted PEM private key ({str(exc).splitlines()[0]})") from None
    if not isinstance(key, rsa.RSAPrivateKey) or key.key_size not in (2048, 4096):
        raise LoadError(f"{path}: the card takes RSA-2048 and RSA-4096 keys")
    return key


def main(args: argparse.Namespace, console: Console) -> int:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    key = load_key(args.key)
    message = read_file(args.message, MESSAGE_MAX, "too large to sign here")
    session = open_session(args)
    session.power_on()
    host = OpenPgpHost(session)
    host.select()
    imported = host.ensure_key(key, "sig")
    signature, ex = host.sign(message, args.hash)
    session.save_state()
    algorithm = hashes.SHA256() if args.hash == "sha256" else hashes.SHA512()
    try:
        key.public_key().verify(signature, message, padding.PKCS1v15(), algorithm)
    except InvalidSignature:
        raise CardError(f"the card's RSA-{key.key_size} signature does not verify with {args.key}") from None
    if args.out:
        try:
            Path(args.out).write_bytes(signature)
        except OSError as exc:
            raise OutputError(f"{args.out}: cannot write the signature: {exc.strerror or exc}") from None
    b = ex.breakdown
    if args.json:
        doc = {"key_bits": key.key_size, "imported": imported, "signature": signature.hex(),
               "breakdown": b.as_dict(), "oscillator": session.osc.summary()}
        write_text(args.json, json.dumps(doc, indent=2) + "\n", "the breakdown JSON")
    print_breakdown(console, f"RSA-{key.key_size} signature on the card (PSO:CDS), verified", b, session)
    if imported:
        console.print("the key was imported first (PUT DATA with the extended header list)", highlight=False)
    return 0
