"""`pkasim ct-check` on the ECC images (docs/ecc.md, "Constant time"; docs/ct-check.md):
with the private key (the P-256 d, the X25519 scalar, the Ed25519 seed) as the secret,
every operation that handles one runs the same blocks, memory addresses, PKA operations
and cycles for random keys, on the PKA image and on the software one."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, x25519

from pkasim.cli.main import main
from pkasim.ecc.image import Op

# operation -> (the public input's symbol, its bytes) it needs besides the key
PUBLIC = {
    Op.P256_PUBLIC: None,
    Op.P256_SIGN: ("ecc_msg", bytes(range(32))),
    Op.P256_ECDH: ("ecc_peer", ec.derive_private_key(7, ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)),
    Op.X25519: ("ecc_peer", x25519.X25519PrivateKey.from_private_bytes(bytes(range(32))).public_key()
                .public_bytes_raw()),
    Op.ED25519_PUBLIC: None,
    Op.ED25519_SIGN: ("ecc_msg", b"ct-check"),
}


def ct_check(capsys, tmp_path, image, op: Op, inputs: int) -> dict:
    args = ["ct-check", "-q", "--json", "-", str(image), "--secret", "ecc_key=bytes:32", "--random", str(inputs)]
    files = {"ecc_op": int(op).to_bytes(4, "little"), "ecc_check": bytes(4)}
    if PUBLIC[op] is not None:
        files[PUBLIC[op][0]] = PUBLIC[op][1]
        if PUBLIC[op][0] == "ecc_msg":
            files["ecc_msg_len"] = len(PUBLIC[op][1]).to_bytes(4, "little")
    for name, data in files.items():
        path = tmp_path / f"{name}.bin"
        path.write_bytes(data)
        args += ["--load", f"{name}={path}"]
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("op", list(PUBLIC), ids=lambda op: op.name.lower())
def test_pka_image_is_constant_time_in_the_private_key(capsys, tmp_path, elf, op):
    doc = ct_check(capsys, tmp_path, elf("ecc"), op, 3)
    assert doc["verdict"] == "identical" and all(doc["identical"].values())
    assert {r["exit_code"] for r in doc["runs"]} == {0}
    assert doc["runs"][0]["pka"] > 1_000  # the scalar multiplication ran on the PKA


@pytest.mark.parametrize("op", list(PUBLIC), ids=lambda op: op.name.lower())
def test_software_image_is_constant_time_in_the_private_key(capsys, tmp_path, elf, op):
    doc = ct_check(capsys, tmp_path, elf("ecc_soft"), op, 2)
    assert doc["verdict"] == "identical" and all(doc["identical"].values())
    assert doc["runs"][0]["pka"] == 0


@pytest.mark.parametrize("image, inputs", [("ecc", 3), ("ecc_soft", 2)])
@pytest.mark.parametrize("op", [Op.P256_KEYGEN, Op.ED25519_KEYGEN], ids=lambda op: op.name.lower())
def test_key_generation_is_constant_time_in_the_trng_stream(capsys, tmp_path, elf, image, inputs, op):
    """The private key of ecc_op 10 and 11 comes from the TRNG: the TRNG's seed is the
    secret (--secret @trng), each run draws another key."""
    files = {"ecc_op": int(op).to_bytes(4, "little"), "ecc_check": bytes(4)}
    args = ["ct-check", "-q", "--json", "-", str(elf(image)), "--secret", "@trng", "--random", str(inputs)]
    for name, data in files.items():
        path = tmp_path / f"{name}.bin"
        path.write_bytes(data)
        args += ["--load", f"{name}={path}"]
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["verdict"] == "identical" and all(doc["identical"].values())
    assert {r["exit_code"] for r in doc["runs"]} == {0}
