"""The card commands' inputs (`pkasim sign`, `pkasim apdu`): keys, messages, card
states and APDU files as a hostile user or a broken disk leaves them.

Keys: the demo RSA-2048 key and its damaged copies (truncated, a flipped base64
character, the header of another kind, DER instead of PEM, encrypted), an EC key and
an RSA-1024 key (the card takes 2048 and 4096), empty, /dev/zero, a FIFO, a
directory. Card states: none, one a real session saved, the same truncated, grown by
a byte, with its magic broken, /dev/zero, a FIFO, a directory, a file in a missing
directory. APDU files: hex lines of every length, odd digits, not hex, comments, CRLF,
1 MiB and more. The property is the fuzzers' own: a documented exit code (sign: 0, 1,
65, 66, 74; apdu: 0, 1, 65, 66, 74), never 70, one error line.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from fuzzing import BUILD, REPO

CARD = BUILD / "card.elf"
KEY = REPO / "firmware" / "keys" / "demo-2048.pem"


def _write_keys(workdir: Path) -> dict[str, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    pem = KEY.read_bytes()
    lines = pem.splitlines(keepends=True)
    flipped = bytearray(pem)
    flipped[len(pem) // 2] = ord("A") if flipped[len(pem) // 2] != ord("A") else ord("B")
    key = serialization.load_pem_private_key(pem, None)
    out = {
        "good": pem,
        "truncated": b"".join(lines[: len(lines) // 2]),
        "flipped": bytes(flipped),
        "other-header": pem.replace(b"PRIVATE KEY", b"PUBLIC KEY"),
        "der": key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()),
        "encrypted": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.BestAvailableEncryption(b"pw")),
        "ec": ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        "rsa1024": rsa.generate_private_key(65537, 1024).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        "empty": b"",
        "garbage": bytes(random.Random(7).randrange(256) for _ in range(3000)),
    }
    paths = {}
    for name, data in out.items():
        path = workdir / f"key-{name}.pem"
        path.write_bytes(data)
        paths[name] = str(path)
    return paths


def files(workdir: Path) -> dict[str, dict[str, str]]:
    """Keys, messages, states and APDU files, made once per run."""
    for name in ("card-dir",):
        (workdir / name).mkdir(exist_ok=True)
    fifo = workdir / "card-fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    special = {"zero": "/dev/zero", "fifo": str(fifo), "dir": str(workdir / "card-dir"),
               "missing": str(workdir / "none")}
    keys = {**_write_keys(workdir), **special}
    (workdir / "msg-small").write_bytes(b"sign me")
    (workdir / "msg-empty").write_bytes(b"")
    messages = {"small": str(workdir / "msg-small"), "empty": str(workdir / "msg-empty"), "null": "/dev/null",
                **special}
    states = {"none": str(workdir / "state-new"), "in-missing-dir": str(workdir / "no" / "such" / "state"), **special}
    apdus = {"ok": "00A4040006D27600012401\n00CA006E00\n", "bad-hex": "00A4zz\n", "odd": "00A404000\n",
             "short": "00A4\n", "long": "00" * 2000 + "\n", "comments": "# hi\n\n00A4040006D27600012401 # select\n",
             "crlf": "00A4040006D27600012401\r\n00FF0000\r\n", "unicode": "00A4040006D27600012401 é\n",
             "many": "00CA006E00\n" * 20}
    apdu_paths = {}
    for name, text in apdus.items():
        path = workdir / f"apdu-{name}.txt"
        path.write_text(text)
        apdu_paths[name] = str(path)
    (workdir / "apdu-huge.txt").write_bytes(b"00" * (600 * 1024) + b"\n")
    apdu_paths["huge"] = str(workdir / "apdu-huge.txt")
    apdu_paths.update(special)
    return {"keys": keys, "messages": messages, "states": states, "apdus": apdu_paths}


def _state(rng: random.Random, pool: dict[str, dict[str, str]], workdir: Path) -> str:
    """A state path: special ones from the pool, or a real state (saved by an earlier
    case into state-new) bent in place."""
    name = rng.choice(list(pool["states"]) + ["bent"] * 3)
    if name != "bent":
        if name == "none":
            Path(pool["states"]["none"]).unlink(missing_ok=True)
        return pool["states"][name]
    path = workdir / "state-bent"
    saved = Path(pool["states"]["none"])
    data = bytearray(saved.read_bytes() if saved.is_file() else bytes(64))
    bend = rng.choice(["truncate", "grow", "magic", "flip", "same"])
    if bend == "truncate":
        data = data[: rng.randrange(len(data) + 1)]
    elif bend == "grow":
        data += b"\0"
    elif bend == "magic" and data:
        data[0] ^= 0xFF
    elif bend == "flip" and data:
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    return str(path)


def case(rng: random.Random, pool: dict[str, dict[str, str]], workdir: Path) -> tuple[list[str], str]:
    """(argv, what): one sign or apdu command line."""
    if rng.random() < 0.6:
        argv = ["sign", "--key", pool["keys"][rng.choice(list(pool["keys"]) + ["good"] * 4)],
                "--message", pool["messages"][rng.choice(list(pool["messages"]) + ["small"] * 4)]]
        if rng.random() < 0.3:
            argv += ["--out", rng.choice([str(workdir / "sig"), "/dev/full", str(workdir / "card-dir"),
                                          str(workdir / "no" / "sig")])]
        if rng.random() < 0.2:
            argv += ["--json", rng.choice(["-", str(workdir / "no" / "b.json"), "/dev/full"])]
        if rng.random() < 0.1:
            argv += ["--hash", rng.choice(["sha512", "md5"])]
    else:
        argv = ["apdu", "--file", pool["apdus"][rng.choice(list(pool["apdus"]))]]
    if rng.random() < 0.6:
        argv += ["--state", _state(rng, pool, workdir)]
    if rng.random() < 0.1:
        argv.append(rng.choice([str(BUILD / "hello.elf"), "/dev/zero", str(workdir / "none.elf")]))
    return argv, " ".join(argv)
