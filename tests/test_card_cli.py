"""``pkasim usb descriptors``, ``pkasim sign`` and ``pkasim apdu``: outputs, files and
exit codes (docs/usb.md)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

from pkasim.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
CARD = ROOT / "firmware" / "build" / "card.elf"
KEY = ROOT / "firmware" / "keys" / "demo-2048.pem"

pytestmark = pytest.mark.skipif(not CARD.exists(), reason="firmware/build/card.elf is not built (make firmware)")


def run(argv: list) -> int:
    try:
        return main([str(a) for a in argv])
    except SystemExit as exc:
        return int(exc.code)


def test_usb_descriptors_prints_them_like_lsusb(capsys) -> None:
    assert run(["usb", "descriptors"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Bus 001 Device 001: ID 1209:0001")
    assert "ChipCard Interface Descriptor:" in out and "bEndpointAddress      0x82 EP 2 IN" in out


def test_sign_writes_a_signature_that_verifies_and_a_breakdown_that_sums(tmp_path: Path, capsys) -> None:
    message = tmp_path / "msg"
    message.write_bytes(b"signed by pkasim sign")
    sig, doc = tmp_path / "sig", tmp_path / "b.json"
    assert run(["sign", "--key", KEY, "--message", message, "--out", sig, "--json", doc]) == 0
    key = serialization.load_pem_private_key(KEY.read_bytes(), None)
    key.public_key().verify(sig.read_bytes(), message.read_bytes(), padding.PKCS1v15(), hashes.SHA256())
    b = json.loads(doc.read_text())["breakdown"]
    parts = b["usb_out_ms"] + b["compute_ms"] + b["time_ext_ms"] + b["usb_in_ms"] + b["idle_ms"]
    assert parts == pytest.approx(b["total_ms"], abs=1e-9)
    assert "total (host time)" in capsys.readouterr().err  # the summary goes to stderr, like run's


def test_sign_with_a_state_file_imports_the_key_once(tmp_path: Path) -> None:
    message, state = tmp_path / "msg", tmp_path / "card.state"
    message.write_bytes(b"twice")
    for imported in (True, False):
        doc = tmp_path / f"{imported}.json"
        assert run(["sign", "--key", KEY, "--message", message, "--state", state, "--json", doc]) == 0
        assert json.loads(doc.read_text())["imported"] is imported


def test_sign_refuses_a_key_that_is_not_rsa_2048_or_4096_with_one_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n")
    assert run(["sign", "--key", bad, "--message", KEY]) == 65
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not an unencrypted PEM private key" in err[0]


def test_apdu_reads_hex_lines_from_stdin_and_prints_status_words(monkeypatch, capsys) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"00A4040006D27600012401\n00FF0000 # no such INS\n")))
    assert run(["apdu"]) == 0
    out = capsys.readouterr().out
    assert "< 9000" in out and "< 6D00" in out


def test_apdu_refuses_a_line_that_is_not_hex(tmp_path: Path, capsys) -> None:
    f = tmp_path / "apdus"
    f.write_text("00A40400\nxyz\n")
    assert run(["apdu", "--file", f]) == 65
    assert f"{f}:2: not hex" in capsys.readouterr().err


def test_sign_on_an_untrimmed_fast_oscillator_reports_device_time_ahead_of_host_time(tmp_path: Path) -> None:
    message, doc = tmp_path / "msg", tmp_path / "b.json"
    message.write_bytes(b"fast clock")
    assert run(["sign", "--key", KEY, "--message", message, "--json", doc,
                "--config", ROOT / "configs" / "ciu98320b-usb2500.yaml"]) == 0
    report = json.loads(doc.read_text())
    b = report["breakdown"]
    assert report["oscillator"]["error_ppm"] == 2500
    assert (b["device_ms"] / b["total_ms"] - 1) * 1e6 == pytest.approx(2500, abs=1)


# --------------------------------------------------------------------------- hostile state files and outputs

def test_sign_with_a_state_of_dev_zero_is_refused_before_any_work(tmp_path: Path, capsys) -> None:
    """Read until the kernel killed the process; now refused as not a file, nothing made."""
    message = tmp_path / "msg"
    message.write_bytes(b"m")
    assert run(["sign", "--key", KEY, "--message", message, "--state", "/dev/zero"]) == 66
    err = capsys.readouterr().err
    assert err.count("pkasim: error:") == 1 and "/dev/zero: cannot read the card state: not a regular file" in err
    assert "total (host time)" not in err


def test_apdu_with_a_state_of_dev_zero_is_refused(monkeypatch, capsys) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"00A4040006D27600012401\n")))
    assert run(["apdu", "--state", "/dev/zero"]) == 66
    assert "not a regular file but a character device" in capsys.readouterr().err


@pytest.mark.parametrize(("where", "code", "phrase"), [
    ("missing", 74, "cannot write the card state: no such directory"),
    ("directory", 66, "cannot read the card state: not a regular file but a directory"),
])
def test_sign_with_a_state_it_could_not_write_back_is_refused_before_the_signature(tmp_path: Path, capsys, where,
                                                                                   code, phrase) -> None:
    """Once exit 70 after the signature was made, the card state (the imported key) lost."""
    message, sig = tmp_path / "msg", tmp_path / "sig"
    message.write_bytes(b"m")
    state = tmp_path / "no" / "such" / "card.state" if where == "missing" else tmp_path
    assert run(["sign", "--key", KEY, "--message", message, "--state", state, "--out", sig]) == code
    err = capsys.readouterr().err
    assert err.count("pkasim: error:") == 1 and phrase in err and "internal error" not in err
    assert "total (host time)" not in err and not sig.exists()


def test_sign_with_an_output_in_a_missing_directory_is_refused_before_the_signature(tmp_path: Path,
                                                                                    capsys) -> None:
    message, state = tmp_path / "msg", tmp_path / "card.state"
    message.write_bytes(b"m")
    assert run(["sign", "--key", KEY, "--message", message, "--state", state,
                "--out", tmp_path / "no" / "sig"]) == 74
    assert "cannot write the signature" in capsys.readouterr().err
    assert not state.exists()  # nothing ran, nothing saved


def test_sign_writes_the_state_whole_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    message, state = tmp_path / "msg", tmp_path / "card.state"
    message.write_bytes(b"m")
    assert run(["sign", "--key", KEY, "--message", message, "--state", state]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["card.state", "msg"]


def test_sign_with_a_key_of_dev_zero_reads_only_the_key_limit(tmp_path: Path, capsys) -> None:
    message = tmp_path / "msg"
    message.write_bytes(b"m")
    assert run(["sign", "--key", "/dev/zero", "--message", message]) == 65
    assert "/dev/zero: more than 65,536 bytes, not a key file" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--wait", "nan"], ["--wait", "-1"], ["--wait", "inf"], ["--vpcd", "x"],
                                  ["--vpcd", "127.0.0.1:99999"], ["--vpcd", "127.0.0.1:0"]])
def test_card_with_a_malformed_wait_or_vpcd_is_a_usage_error(argv: list, capsys) -> None:
    """--wait nan once retried for ever (no deadline is ever reached)."""
    assert run(["card", *argv]) == 64
    err = capsys.readouterr().err
    assert "pkasim: error:" in err and "internal error" not in err
