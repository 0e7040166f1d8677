"""Real GnuPG signs with a 4096-bit key on the emulated card: gpg -> scdaemon -> pcscd
-> vsmartcard's vpcd -> ``pkasim card`` -> the emulated USB bus -> card.elf.

Needs Debian's gnupg, scdaemon, pcscd and vsmartcard-vpcd (.ci/run installs them);
skips, saying which is missing, where they are not. Starts its own pcscd when none
runs (and stops it after); uses a throw-away GNUPGHOME and card state.
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

ROOT = Path(__file__).resolve().parent.parent
CARD = ROOT / "firmware" / "build" / "card.elf"
KEY = ROOT / "tests" / "data" / "gpg-card-4096.asc"
FPR = "9352081B108B479862AD84F3E5EC3AA812EEA906"
VPCD_DRIVER = Path("/usr/lib/pcsc/drivers/serial/libifdvpcd.so")
PCSCD_SOCKET = Path("/run/pcscd/pcscd.comm")


def missing() -> str | None:
    for tool in ("gpg", "gpgconf", "pcscd", "pgrep"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: gnupg, pcscd; .ci/run installs them)"
    if not Path("/usr/lib/gnupg/scdaemon").exists() and shutil.which("scdaemon") is None:
        return "scdaemon is not installed (Debian: scdaemon)"
    if not VPCD_DRIVER.exists():
        return f"{VPCD_DRIVER} is missing (Debian: vsmartcard-vpcd)"
    if not CARD.exists():
        return "firmware/build/card.elf is not built (make firmware)"
    return None


pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")



@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    """pcscd (ours if none runs) and ``pkasim card`` serving card.elf to its vpcd."""
    tmp = tmp_path_factory.mktemp("gpgcard")
    pcscd = None
    running = subprocess.run(["pgrep", "-x", "pcscd"], capture_output=True, check=False).returncode == 0
    if not (running and PCSCD_SOCKET.exists()):  # none, or a stale socket: start ours
        pcscd = subprocess.Popen(["pcscd", "--foreground"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = tmp / "apdus.jsonl"
    card = subprocess.Popen([sys.executable, "-m", "pkasim.cli.main", "card", str(CARD), "--state", str(tmp / "state"),
                             "--log", str(log), "--wait", "20"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=open(tmp / "card.err", "w"))  # noqa: SIM115
    home = Path(f"/tmp/pkasim-gpg-{os.getpid()}")  # short: gpg-agent's socket path has a length limit
    home.mkdir(mode=0o700, exist_ok=True)
    (home / "scdaemon.conf").write_text("disable-ccid\npcsc-shared\n")
    (home / "gpg-agent.conf").write_text("allow-loopback-pinentry\n")
    env = {**os.environ, "GNUPGHOME": str(home)}
    try:
        yield env, log, card
    finally:
        subprocess.run(["gpgconf", "--kill", "all"], env=env, check=False)
        card.terminate()
        card.wait(10)
        if pcscd is not None:
            pcscd.terminate()
            pcscd.wait(10)
        shutil.rmtree(home, ignore_errors=True)


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


def keytocard(env) -> str:
    """gpg --edit-key ... keytocard, answering gpg's prompts from its status lines."""
    proc = subprocess.Popen(["gpg", "--batch", "--pinentry-mode", "loopback", "--command-fd", "0", "--status-fd", "1",
                             "--edit-key", FPR], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    commands = iter(["keytocard", "save"])
    answers = {"keyedit.keytocard.use_primary": "y", "cardedit.genkeys.storekeytype": "1",
               "passphrase.enter": "12345678", "cardedit.genkeys.replace_key": "y"}
    seen = []
    for line in proc.stdout:
        seen.append(line)
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "[GNUPG:]" and parts[1] in ("GET_LINE", "GET_BOOL", "GET_HIDDEN"):
            answer = next(commands, "quit") if parts[2] == "keyedit.prompt" else answers.get(parts[2], "")
            proc.stdin.write(answer + "\n")
            proc.stdin.flush()
    proc.wait(60)
    return "".join(seen) + proc.stderr.read()


def test_gpg_signs_with_a_4096_bit_key_moved_to_the_emulated_card(reader, tmp_path: Path) -> None:
    env, log, card = reader
    status = card_status(env)
    assert "Application ID ...: D276000124010304FF00000000010000" in status
    assert "Version ..........: 3.4" in status
    gpg(env, "--import", str(KEY))
    out = keytocard(env)
    assert "SC_OP_FAILURE" not in out, out
    status = card_status(env)
    assert "Key attributes ...: rsa4096" in status
    assert "Signature key ....: 9352 081B 108B 4798 62AD  84F3 E5EC 3AA8 12EE A906" in status
    doc = tmp_path / "doc.txt"
    doc.write_text("signed by GnuPG on pkasim's emulated OpenPGP card\n")
    before = len(log.read_text().splitlines())
    gpg(env, "--passphrase", "123456", "-u", FPR, "--sign", "-o", str(tmp_path / "doc.gpg"), str(doc))
    verify = gpg(env, "--verify", str(tmp_path / "doc.gpg"))
    assert 'Good signature from "pkasim card <card@pkasim.test>"' in verify.stderr
    # The card's own record of that sign: PSO:CDS and its breakdown (docs/reproduction.md).
    entries = [json.loads(line) for line in log.read_text().splitlines()[before:]]
    cds = [e for e in entries if e["command"].startswith("002a9e9a")]
    assert len(cds) == 1 and cds[0]["sw"] == "9000" and cds[0]["response_bytes"] == 514
    b = cds[0]["breakdown"]
    parts = b["usb_out_ms"] + b["compute_ms"] + b["time_ext_ms"] + b["usb_in_ms"] + b["idle_ms"]
    assert parts == pytest.approx(b["total_ms"], abs=1e-9)
    assert b["in_packets"] == 9 and b["time_extensions"] == int(b["compute_ms"] // 100)
    assert card.poll() is None  # still serving
