"""Real GnuPG with ECC keys on the emulated card: gpg -> scdaemon -> pcscd -> vsmartcard's
vpcd -> ``pkasim card`` -> the emulated USB bus -> card.elf (docs/ecc.md, docs/usb.md).

`gpg --card-edit` key-attr switches the card to ed25519 / cv25519 / ed25519 (and the
signature key to nistp256), keytocard moves gpg-generated keys onto it, then
`gpg --sign` / `--verify` (EdDSA, ECDSA) and `gpg --decrypt` (ECDH cv25519) run on the
card; `gpg --card-edit` generate makes the keys on the card from its TRNG.

Needs Debian's gnupg, scdaemon, pcscd and vsmartcard-vpcd (tests/test_gpg_card.py's
`missing()` says which is missing, and the tests skip saying so).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_gpg_card import CARD, PCSCD_SOCKET, ROOT, missing


def gpg(env, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["gpg", "--batch", "--pinentry-mode", "loopback", *args], env=env, input=stdin,
                          capture_output=True, text=True, timeout=120, check=False)
    if check and proc.returncode:
        raise AssertionError(f"gpg {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def card_status(env) -> str:
    """``gpg --card-status``, retried while pcscd has not seen the card yet."""
    for _ in range(40):
        proc = gpg(env, "--card-status", check=False)
        if proc.returncode == 0:
            return proc.stdout
        time.sleep(0.5)
    raise AssertionError(f"gpg --card-status never saw the card:\n{proc.stderr}")


pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")


@pytest.fixture
def reader(tmp_path):
    """pcscd (ours if none runs), ``pkasim card`` on a fresh card state, a GNUPGHOME."""
    pcscd = None
    running = subprocess.run(["pgrep", "-x", "pcscd"], capture_output=True, check=False).returncode == 0
    if not (running and PCSCD_SOCKET.exists()):
        pcscd = subprocess.Popen(["pcscd", "--foreground"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = tmp_path / "apdus.jsonl"
    card = subprocess.Popen([sys.executable, "-m", "pkasim.cli.main", "card", str(CARD), "--state",
                             str(tmp_path / "state"), "--log", str(log), "--wait", "20"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "card.err", "w"))  # noqa: SIM115
    home = Path(f"/tmp/pkasim-gpgecc-{os.getpid()}")  # short: gpg-agent's socket path has a length limit
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(mode=0o700)
    (home / "scdaemon.conf").write_text("disable-ccid\npcsc-shared\n")
    (home / "gpg-agent.conf").write_text("allow-loopback-pinentry\n")
    env = {**os.environ, "GNUPGHOME": str(home)}
    try:
        yield env, log
    finally:
        subprocess.run(["gpgconf", "--kill", "all"], env=env, check=False)
        card.terminate()
        card.wait(10)
        if pcscd is not None:
            pcscd.terminate()
            pcscd.wait(10)
        shutil.rmtree(home, ignore_errors=True)


def drive(env, args: list[str], commands: list[str], answers: dict[str, list[str]], batch: bool = True) -> str:
    """gpg with --command-fd: menu commands in order at each menu prompt, and the answer
    to each other prompt from ``answers`` (by gpg's status keyword, in order). The
    card's generate refuses --batch: ``batch=False`` leaves it out (the prompts still
    come through --command-fd)."""
    mode = ["--batch"] if batch else ["--no-tty"]
    proc = subprocess.Popen(["gpg", *mode, "--pinentry-mode", "loopback", "--command-fd", "0", "--status-fd", "1",
                             *args], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    queue = {k: list(v) for k, v in answers.items()}
    todo = iter(commands)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "[GNUPG:]" and parts[1] in ("GET_LINE", "GET_BOOL", "GET_HIDDEN"):
            if parts[2] in ("cardedit.prompt", "keyedit.prompt"):
                answer = next(todo, "quit")
            else:
                pending = queue.get(parts[2], [])
                answer = pending.pop(0) if pending else ""
            proc.stdin.write(answer + "\n")
            proc.stdin.flush()
    proc.wait(120)
    return "".join(seen) + proc.stderr.read()


def key_attr(env, curves: list[str]) -> str:
    """admin, key-attr: ECC with these curve choices (gpg's menu with --expert, which lists
    the NIST curves: 1 Curve 25519, 3 NIST P-256)."""
    return drive(env, ["--expert", "--card-edit"], ["admin", "key-attr", "quit"],
                 {"cardedit.genkeys.algo": ["2"] * 3, "keygen.algo": ["2"] * 3, "keygen.curve": curves,
                  "passphrase.enter": ["12345678"] * 6})


def fingerprint(env, email: str) -> str:
    out = gpg(env, "--list-keys", "--with-colons", email).stdout
    return next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:"))


def keytocard(env, fpr: str, subkey: bool) -> str:
    commands = ["keytocard"] + (["key 1", "keytocard"] if subkey else []) + ["save"]
    return drive(env, ["--edit-key", fpr], commands,
                 {"keyedit.keytocard.use_primary": ["y"], "cardedit.genkeys.storekeytype": ["1", "2"],
                  "passphrase.enter": ["12345678"] * 6, "cardedit.genkeys.replace_key": ["y", "y"]})


def signs_and_verifies(env, fpr: str, tmp_path: Path, log: Path) -> dict:
    doc = tmp_path / "doc.txt"
    doc.write_text("signed by GnuPG on pkasim's emulated OpenPGP card\n")
    before = len(log.read_text().splitlines())
    gpg(env, "--passphrase", "123456", "-u", fpr, "--sign", "-o", str(tmp_path / "doc.gpg"), str(doc))
    verify = gpg(env, "--verify", str(tmp_path / "doc.gpg"))
    assert "Good signature from" in verify.stderr, verify.stderr
    (cds,) = logged(log, before, "002a9e9a")
    assert cds["sw"] == "9000" and cds["response_bytes"] == 66  # 64 bytes of signature and the status word
    return cds


def logged(log: Path, before: int, prefix: str, count: int = 1) -> list[dict]:
    """The card's log entries of the commands starting with ``prefix`` after line
    ``before``; ``pkasim card`` writes a line once the answer has gone out, so it may
    come a moment after gpg has it."""
    for _ in range(100):
        entries = [json.loads(line) for line in log.read_text().splitlines()[before:]]
        found = [e for e in entries if e["command"].startswith(prefix)]
        if len(found) >= count:
            return found
        time.sleep(0.05)
    return found


def test_gpg_signs_with_ed25519_and_decrypts_with_cv25519_keys_moved_to_the_card(reader, tmp_path) -> None:
    env, log = reader
    card_status(env)
    out = key_attr(env, ["1", "1", "1"])
    assert "SC_OP_FAILURE" not in out, out
    assert "Key attributes ...: ed25519 cv25519 ed25519" in card_status(env)
    gpg(env, "--passphrase", "", "--quick-gen-key", "pkasim ecc <ecc@pkasim.test>", "ed25519", "sign", "never")
    fpr = fingerprint(env, "ecc@pkasim.test")
    gpg(env, "--passphrase", "", "--quick-add-key", fpr, "cv25519", "encr", "never")
    out = keytocard(env, fpr, subkey=True)
    assert "SC_OP_FAILURE" not in out, out
    status = card_status(env)
    assert "Signature key ....: [none]" not in status and "Encryption key....: [none]" not in status
    cds = signs_and_verifies(env, fpr, tmp_path, log)
    assert cds["breakdown"]["compute_ms"] < 30  # an Ed25519 signature: about 14 ms of card time
    plain = "for the card's cv25519 key\n"
    (tmp_path / "plain.txt").write_text(plain)
    gpg(env, "--trust-model", "always", "-r", fpr, "-e", "-o", str(tmp_path / "enc.gpg"), str(tmp_path / "plain.txt"))
    dec = gpg(env, "--passphrase", "123456", "-d", str(tmp_path / "enc.gpg"))
    assert dec.stdout == plain
    assert [e["sw"] for e in logged(log, 0, "002a8086")] == ["9000"]


def test_gpg_signs_with_a_nistp256_key_moved_to_the_card(reader, tmp_path) -> None:
    env, log = reader
    card_status(env)
    out = key_attr(env, ["3", "3", "3"])
    assert "SC_OP_FAILURE" not in out, out
    assert "Key attributes ...: nistp256 nistp256 nistp256" in card_status(env)
    gpg(env, "--passphrase", "", "--quick-gen-key", "pkasim p256 <p256@pkasim.test>", "nistp256", "sign", "never")
    fpr = fingerprint(env, "p256@pkasim.test")
    out = keytocard(env, fpr, subkey=False)
    assert "SC_OP_FAILURE" not in out, out
    signs_and_verifies(env, fpr, tmp_path, log)


def test_gpg_generates_ed25519_and_cv25519_keys_on_the_card(reader, tmp_path) -> None:
    """The keys come from the card's TRNG (GENERATE ASYMMETRIC KEY PAIR, 47 80)."""
    env, log = reader
    card_status(env)
    key_attr(env, ["1", "1", "1"])
    out = drive(env, ["--card-edit"], ["admin", "generate", "quit"],
                {"cardedit.genkeys.backup_enc": ["n"], "passphrase.enter": ["12345678", "123456"] + ["123456"] * 6,
                 "keygen.valid": ["0"], "keygen.name": ["pkasim generated"], "keygen.email": ["gen@pkasim.test"],
                 "keygen.comment": [""], "cardedit.genkeys.replace_keys": ["y"]}, batch=False)
    assert "KEY_CREATED" in out, "\n".join(line for line in out.splitlines() if "GNUPG" in line or "PIN" in line)
    assert [e["sw"] for e in logged(log, 0, "00478000", 3)] == ["9000"] * 3
    signs_and_verifies(env, fingerprint(env, "gen@pkasim.test"), tmp_path, log)
