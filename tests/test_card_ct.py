"""`pkasim ct-check --apdus` on the OpenPGP card image (docs/ct-check.md, "Card images";
docs/ecc.md, "Constant time"): each run a USB card session, the private scalar of a
key slot (inside card_state) or the TRNG's seed as the secret.

card.elf's ECC operations, through the card's own command path: ECDSA P-256 and EdDSA
Ed25519 signing (PSO:COMPUTE DIGITAL SIGNATURE), Ed25519 INTERNAL AUTHENTICATE, ECDH
cv25519 and P-256 (PSO:DECIPHER), and on-card key generation from the TRNG, each run the
same blocks, memory addresses, PKA operations and cycles up to the answer for random
keys; a secret that does decide a branch (the slot's key status) is found and named;
the secret's offset and the TRNG seed reach the machine; bad secrets, APDU files and
state files get one line and their exit code.
"""

from __future__ import annotations

import hashlib
import json
from argparse import Namespace
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, x25519

from pkasim.analysis import ctinputs
from pkasim.chip.config import load_config
from pkasim.cli.ctcheck import Checker
from pkasim.cli.main import main
from pkasim.core.machine import Machine
from pkasim.usb.openpgp import OpenPgpHost, _ec_private
from pkasim.usb.session import CardSession

ROOT = Path(__file__).resolve().parent.parent
CARD = ROOT / "firmware" / "build" / "card.elf"
pytestmark = pytest.mark.skipif(not CARD.exists(), reason="firmware/build/card.elf is not built (make firmware)")

SELECT = "00A4040006D27600012401"
PW1_SIGN, PW1_OTHER, PW3 = "0020008106313233343536", "0020008206313233343536", "00200083083132333435363738"
SLOT_CRT = {"sig": "B6", "dec": "B8", "aut": "A4"}


def p256_key(n: int) -> ec.EllipticCurvePrivateKey:
    return ec.derive_private_key(int.from_bytes(hashlib.sha256(b"ct p256 %d" % n).digest(), "big") % 2**255 + 1,
                                 ec.SECP256R1())


def ed_key(n: int) -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"ct ed25519 %d" % n).digest())


def x_key(n: int) -> x25519.X25519PrivateKey:
    return x25519.X25519PrivateKey.from_private_bytes(hashlib.sha256(b"ct x25519 %d" % n).digest())


@pytest.fixture(scope="module")
def states(tmp_path_factory) -> dict[str, tuple[Path, dict[str, int]]]:
    """Two card states with keys imported as gpg imports them, and where each slot's
    private key lies in card_state (found by its bytes, not assumed):
    "p256": P-256 signing, cv25519 decryption, Ed25519 authentication keys;
    "ed": Ed25519 signing and P-256 decryption keys."""
    out = {}
    for name, keys in (("p256", {"sig": p256_key(1), "dec": x_key(1), "aut": ed_key(1)}),
                       ("ed", {"sig": ed_key(2), "dec": p256_key(2)})):
        path = tmp_path_factory.mktemp("state") / f"{name}.state"
        m = Machine(load_config())
        m.load(CARD)
        session = CardSession(m, state=path)
        session.attach()
        session.power_on()
        host = OpenPgpHost(session)
        host.select()
        for slot, key in keys.items():
            host.import_key(key, slot)
        state = m.read_symbol("card_state")
        offsets = {}
        for slot, key in keys.items():
            raw = _ec_private(key)
            raw = raw[::-1] if isinstance(key, x25519.X25519PrivateKey) else raw  # kept as RFC 7748 orders it
            assert state.count(raw) == 1
            offsets[slot] = state.index(raw)
        session.save_state()
        out[name] = (path, offsets)
    return out


def apdus(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "session.apdu"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def command(ins_p1_p2: str, data: bytes, le: str = "00") -> str:
    return f"00{ins_p1_p2}{len(data):02X}{data.hex()}{le}"


def decipher(point: bytes) -> str:
    def tl(tag: bytes, body: bytes) -> bytes:
        return tag + bytes([len(body)]) + body

    return command("2A8086", tl(b"\xa6", tl(b"\x7f\x49", tl(b"\x86", point))))


def ct_check(capsys, *argv) -> tuple[int, dict | None, str]:
    code = main(["ct-check", "-q", "--json", "-", str(CARD), *map(str, argv)])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def passes(capsys, *argv, inputs: int = 3) -> dict:
    code, doc, err = ct_check(capsys, *argv, "--random", inputs, "--seed", 1)
    assert code == 0, err
    assert doc["verdict"] == "identical" and all(doc["identical"].values())
    assert len(doc["runs"]) == inputs and len({r["cycles"] for r in doc["runs"]}) == 1
    assert {tuple(r["status_words"]) for r in doc["runs"]} == {("9000",) * 3}  # every run did the operation
    return doc


def key_secret(states, state: str, slot: str) -> list:
    path, offsets = states[state]
    return ["--state", path, "--secret", f"card_state+{offsets[slot]}=bytes:32"]


# --------------------------------------------------------------------------- the card's ECC operations

def test_ecdsa_p256_signing_is_constant_time_in_the_private_key(capsys, tmp_path, states):
    session = apdus(tmp_path, SELECT, PW1_SIGN, command("2A9E9A", hashlib.sha256(b"message").digest()))
    doc = passes(capsys, *key_secret(states, "p256", "sig"), "--apdus", session)
    assert doc["runs"][0]["pka"] == 5_480  # the signature's PKA operations, as ecc.elf's (docs/ecc.md)


def test_eddsa_ed25519_signing_is_constant_time_in_the_secret_key(capsys, tmp_path, states):
    session = apdus(tmp_path, SELECT, PW1_SIGN, command("2A9E9A", b"a message for EdDSA"))
    doc = passes(capsys, *key_secret(states, "ed", "sig"), "--apdus", session)
    assert doc["runs"][0]["pka"] > 4_000


def test_ed25519_internal_authenticate_is_constant_time_in_the_secret_key(capsys, tmp_path, states):
    session = apdus(tmp_path, SELECT, PW1_OTHER, command("880000", b"a challenge"))
    passes(capsys, *key_secret(states, "p256", "aut"), "--apdus", session)


def test_ecdh_cv25519_decipher_is_constant_time_in_the_private_scalar(capsys, tmp_path, states):
    session = apdus(tmp_path, SELECT, PW1_OTHER, decipher(x_key(9).public_key().public_bytes_raw()))
    doc = passes(capsys, *key_secret(states, "p256", "dec"), "--apdus", session)
    assert doc["runs"][0]["pka"] == 4_923  # one X25519 ladder (docs/ecc.md)


def test_ecdh_p256_decipher_is_constant_time_in_the_private_scalar(capsys, tmp_path, states):
    peer = p256_key(9).public_key().public_bytes(serialization.Encoding.X962,
                                                 serialization.PublicFormat.UncompressedPoint)
    session = apdus(tmp_path, SELECT, PW1_OTHER, decipher(peer))
    doc = passes(capsys, *key_secret(states, "ed", "dec"), "--apdus", session)
    assert doc["runs"][0]["pka"] == 12_181  # one P-256 ECDH (docs/ecc.md)


@pytest.mark.parametrize("state, slot", [("p256", "sig"), ("ed", "sig"), ("p256", "dec")],
                         ids=["p256", "ed25519", "cv25519"])
def test_on_card_key_generation_is_constant_time_in_the_trng_stream(capsys, tmp_path, states, state, slot):
    session = apdus(tmp_path, SELECT, PW3, f"00478000000002{SLOT_CRT[slot]}000000")
    doc = passes(capsys, "--state", states[state][0], "--secret", "@trng", "--apdus", session)
    assert doc["secrets"] == ["@trng"] and doc["runs"][0]["pka"] > 2_000


def test_a_secret_that_decides_a_branch_is_found_in_the_card_session(capsys, tmp_path, states):
    """The signature slot's key status (present[0], one byte before sig_count's 4 bytes
    and algo's 4): 0 answers 6A88, 1 signs, a branch in ec_sign."""
    path, offsets = states["p256"]
    present = offsets["sig"] - 12
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "1-imported").write_bytes(b"\x02")
    (inputs / "2-none").write_bytes(b"\x00")
    session = apdus(tmp_path, SELECT, PW1_SIGN, command("2A9E9A", bytes(32)))
    code, doc, err = ct_check(capsys, "--state", path, "--secret", f"card_state+{present}",
                              "--inputs", inputs, "--apdus", session)
    assert code == 1 and doc["verdict"] == "divergence"
    assert [r["status_words"][-1] for r in doc["runs"]] == ["9000", "6A88"]
    assert doc["divergence"]["kind"] == "control flow"
    assert doc["divergence"]["source"]["file"].endswith("openpgp.c")
    assert "card_state+0x" in err  # the report names the secret by symbol and offset


# --------------------------------------------------------------------------- the secrets themselves

def checker(tmp_path, secret: str, states) -> Checker:
    session = apdus(tmp_path, SELECT)
    args = Namespace(config=None, firmware=str(CARD), load=[], state=str(states["p256"][0]), apdus=str(session),
                     secret=[ctinputs.parse_secret(secret)], max_cycles=None, host_dir=None)
    return Checker(args)


def test_a_secret_at_an_offset_is_written_there_over_the_loaded_state(tmp_path, states):
    offset = states["p256"][1]["sig"]
    c = checker(tmp_path, f"card_state+{offset}=bytes:32", states)
    m = c.machine(ctinputs.Input("x", {f"card_state+0x{offset:x}": b"\xaa" * 32}))
    state = m.read_symbol("card_state", initial=True)
    loaded = states["p256"][0].read_bytes()[:len(state)]  # the file: card_state, then its checksum
    assert state[offset:offset + 32] == b"\xaa" * 32
    assert state[:offset] + state[offset + 32:] == loaded[:offset] + loaded[offset + 32:]


def test_the_trng_secret_seeds_the_trng(tmp_path, states):
    c = checker(tmp_path, "@trng", states)
    m = c.machine(ctinputs.Input("x", {"@trng": (123456789).to_bytes(8, "little")}))
    assert m.peripherals["trng"].seed == 123456789


@pytest.mark.parametrize("secret, code, text", [
    ("card_state+5000=bytes:4", 65, "past the end of 'card_state'"),
    ("card_state+4490=bytes:32", 65, "do not fit in 'card_state' from offset 4,490"),
    ("card_state+x", 64, "not a whole number"),
    ("@trng=bytes:4", 64, "takes no offset and no kind"),
])
def test_a_bad_secret_is_one_line_and_its_exit_code(capsys, tmp_path, secret, code, text):
    session = apdus(tmp_path, SELECT)
    try:
        got, _, err = ct_check(capsys, "--secret", secret, "--random", 2, "--apdus", session)
    except SystemExit as exc:  # argparse's usage error
        got, err = exc.code, capsys.readouterr().err
    assert got == code
    assert text in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 or got == 64


def test_a_damaged_state_file_is_refused_before_any_run(capsys, tmp_path, states):
    damaged = tmp_path / "damaged.state"
    data = bytearray(states["p256"][0].read_bytes())
    data[states["p256"][1]["sig"]] ^= 1  # one bit of the signature key
    damaged.write_bytes(bytes(data))
    code, doc, err = ct_check(capsys, "--state", damaged, "--secret", "@trng", "--random", 2,
                              "--apdus", apdus(tmp_path, SELECT))
    assert code == 65 and doc is None
    assert "the card state is damaged" in err and len(err.strip().splitlines()) == 1


def test_a_state_file_without_a_card_session_is_a_usage_error(capsys, tmp_path, states):
    code, _, err = ct_check(capsys, "--state", states["p256"][0], "--secret", "@trng", "--random", 2)
    assert code == 64 and "--apdus" in err


def test_a_cycle_budget_for_a_card_session_is_a_usage_error(capsys, tmp_path, states):
    code, _, err = ct_check(capsys, "--state", states["p256"][0], "--secret", "@trng", "--random", 2,
                            "--apdus", apdus(tmp_path, SELECT), "--max-cycles", 1000)
    assert code == 64 and "10 s of host time" in err


@pytest.mark.parametrize("content, code, text", [("", 65, "no APDU"), ("00A4 zz\n", 65, "not hex"), (None, 66, "no such")])
def test_a_bad_apdu_file_is_one_line_and_its_exit_code(capsys, tmp_path, content, code, text):
    path = tmp_path / "s.apdu"
    if content is not None:
        path.write_text(content)
    got, _, err = ct_check(capsys, "--secret", "card_state+0x154=bytes:32", "--random", 2, "--apdus", path)
    assert got == code and text in err and len(err.strip().splitlines()) == 1
