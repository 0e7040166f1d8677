"""Real GnuPG signs with a 4096-bit key on the emulated card: gpg -> scdaemon -> pcscd
-> vsmartcard's vpcd -> ``pkasim card`` -> the emulated USB bus -> card.elf.

The gpg steps are docs/gnupg.md's script, run as written (scdaemon.conf, card-status,
import, keytocard with the Admin PIN, sign with the User PIN, verify); this file
starts pcscd and ``pkasim card`` as that page's steps 1 and 2 say, in a throw-away
GNUPGHOME with a throw-away card state.

Needs Debian's gnupg, scdaemon, pcscd and vsmartcard-vpcd (.ci/run installs them);
skips, saying which is missing, where they are not. Starts its own pcscd when none
runs (and stops it after).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CARD = ROOT / "firmware" / "build" / "card.elf"
DOC = ROOT / "docs" / "gnupg.md"
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
        pcscd = subprocess.Popen(["pcscd", "-f"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = tmp / "apdus.jsonl"
    card = subprocess.Popen([sys.executable, "-m", "pkasim.cli.main", "card", str(CARD), "--state", str(tmp / "state"),
                             "--log", str(log), "--wait", "20"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=open(tmp / "card.err", "w"))  # noqa: SIM115
    home = Path(f"/tmp/pkasim-gpg-{os.getpid()}")  # short: gpg-agent's socket path has a length limit
    home.mkdir(mode=0o700, exist_ok=True)
    env = {**os.environ, "GNUPGHOME": str(home), "TMPDIR": str(tmp)}  # the script's mktemp -d goes in tmp
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


def doc_script() -> str:
    """The block of docs/gnupg.md that follows its marker comment."""
    text = DOC.read_text()
    after = text.split("<!-- tests/test_gpg_card.py runs the next block -->", 1)[1]
    match = re.match(r"\s*```sh\n(.*?)^```", after, re.S | re.M)
    assert match, "docs/gnupg.md: no sh block after the marker"
    return match.group(1)


def test_gpg_signs_with_a_4096_bit_key_moved_to_the_emulated_card(reader) -> None:
    env, log, card = reader
    proc = subprocess.run(["bash", "-c", doc_script()], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Application ID ...: D276000124010304FF00000000010000" in out
    assert "Version ..........: 3.4" in out
    assert "SC_OP_FAILURE" not in out and "Bad PIN" not in out, out
    assert "Key attributes ...: rsa4096" in out  # keytocard switched the signature slot
    assert "Signature key ....: 9352 081B 108B 4798 62AD  84F3 E5EC 3AA8 12EE A906" in out
    assert 'Good signature from "pkasim card <card@pkasim.test>"' in out
    # The card's own record: two Admin PIN checks around the key import, one PSO:CDS.
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(e["command"].startswith("00200083") and e["sw"] == "9000" for e in entries) == 2
    cds = [e for e in entries if e["command"].startswith("002a9e9a")]
    assert len(cds) == 1 and cds[0]["sw"] == "9000" and cds[0]["response_bytes"] == 514
    b = cds[0]["breakdown"]
    parts = b["usb_out_ms"] + b["compute_ms"] + b["time_ext_ms"] + b["usb_in_ms"] + b["idle_ms"]
    assert parts == pytest.approx(b["total_ms"], abs=1e-9)
    assert b["in_packets"] == 9 and b["time_extensions"] == int(b["compute_ms"] // 100)
    assert card.poll() is None  # still serving
