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
