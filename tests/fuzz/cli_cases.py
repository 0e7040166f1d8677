"""Command lines as a script might build them: real and broken options, values and files.

Each case is drawn from a small grammar of the CLI: a command (run, bench, nonsense),
a firmware path (a real image, a directory, a missing file, /dev/zero, a text file),
and options with awkward values: --max-cycles in every spelling, --config pointing at
good, bad, missing and endless files, --json and --dump to stdout, /dev/full, a
directory or a missing directory, --load from /dev/zero, an empty file or a large
one, into data, code, zero-size and absolute symbols, --host-dir, and arguments for
the firmware after --.
"""

from __future__ import annotations

import random
from pathlib import Path

from fuzzing import BUILD, REPO

FIRMWARE = ("hello", "fault", "systick")
SYMBOLS = ("fault_kind", "fault_handler_mode", "systick_count", "main", "_ebss", "_estack", "_min_stack_size",
           "_sidata", "no_such_symbol", "", "a=b", "Reset_Handler")
CYCLES = ("0", "1", "100", "-1", "abc", "0x1000", "1_000_000", "1e6", "", " 7", "9" * 25, "9" * 5000,
          "18446744073709551615", "18446744073709551616", "0b101", "٣")


def files(workdir: Path) -> dict[str, str]:
    """The pool of paths a case picks from, created once per run."""
    (workdir / "empty.bin").write_bytes(b"")
    (workdir / "word.bin").write_bytes(b"\x01\x00\x00\x00")
    (workdir / "big.bin").write_bytes(bytes(70_000))
    (workdir / "text.txt").write_text("not an ELF\n")
    (workdir / "a_dir").mkdir(exist_ok=True)
    (workdir / "host").mkdir(exist_ok=True)
    (workdir / "bad.yaml").write_text("chip: [unclosed\n")
    (workdir / "overlay.yaml").write_text(f"extends: {REPO / 'configs' / 'ciu98320b.yaml'}\ncore:\n  muls_cycles: 32\n")
    (workdir / "deep.json").write_text("[" * 50_000 + "]" * 50_000)
    (workdir / "profile.json").write_text('{"schema": "pkasim-profile/1", "functions": [{"name": "f", "cycles": "x"}]}')
    (workdir / "laughs.yaml").write_text("a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9)))
    (workdir / "deep.yaml").write_text("cases: " + "[" * 3000 + "]" * 3000 + "\n")
    (workdir / "suite.yaml").write_text("cases:\n  - name: x\n    firmware: nowhere.elf\n")
    return {
        "hello": str(BUILD / "hello.elf"), "fault": str(BUILD / "fault.elf"), "systick": str(BUILD / "systick.elf"),
        "empty": str(workdir / "empty.bin"), "word": str(workdir / "word.bin"), "big": str(workdir / "big.bin"),
        "text": str(workdir / "text.txt"), "dir": str(workdir / "a_dir"), "missing": str(workdir / "missing"),
        "missing_dir": str(workdir / "no" / "such" / "dir" / "x"), "dev_zero": "/dev/zero", "dev_null": "/dev/null",
        "dev_full": "/dev/full", "bad_yaml": str(workdir / "bad.yaml"), "overlay": str(workdir / "overlay.yaml"),
        "reference": str(REPO / "configs" / "ciu98320b.yaml"), "out": str(workdir / "out.bin"),
        "host": str(workdir / "host"),
        "deep_json": str(workdir / "deep.json"), "profile": str(workdir / "profile.json"),
        "laughs": str(workdir / "laughs.yaml"), "deep_yaml": str(workdir / "deep.yaml"),
        "suite": str(workdir / "suite.yaml"),
        "verifypin": str(BUILD / "verifypin.elf"), "aes": str(BUILD / "aes.elf"),
    }


def case(rng: random.Random, pool: dict[str, str]) -> list[str]:
    """One command line."""
    command = rng.choice(["run"] * 12 + ["profile"] * 2 + ["bench", "diff", "regress", "frobnicate", "", "--help", "-v",
                          "gdbserver", "card", "usb", "faults", "power", "tvla", "cpa"])
    argv: list[str] = [command] if command else []
    if rng.random() < 0.1:
        argv.insert(0, rng.choice(["-v", "-vv", "-q", "--bogus"]))
    if command == "bench":
        # Only the options checked before anything runs: a bench takes seconds.
        argv += ["--only", rng.choice(["nosuch", "rsa2048 nosuch", ""])]
        if rng.random() < 0.5:
            argv += ["--config", pool[rng.choice(["missing", "bad_yaml", "dir", "dev_zero", "reference"])]]
        if rng.random() < 0.3:
            argv += ["--json", pool[rng.choice(["dev_full", "dir", "missing_dir"])]]
        return argv
    if command == "diff":
        names = ["deep_json", "profile", "dev_zero", "missing", "dir", "text", "empty", "out"]
        argv += [pool[rng.choice(names)] for _ in range(rng.choice([0, 1, 2, 2, 2, 3]))]
        if rng.random() < 0.3:
            argv += ["--json", pool[rng.choice(["dev_full", "dir", "missing_dir"])]]
        return argv
    if command == "regress":
        # Suites that fail before any case runs (a case runs firmware for seconds).
        argv.append(pool[rng.choice(["laughs", "deep_yaml", "bad_yaml", "dev_zero", "missing", "dir", "empty",
                                     "suite", "text"])])
        if rng.random() < 0.3:
            argv += [rng.choice(["--junit", "--markdown"]), pool[rng.choice(["dev_full", "dir", "missing_dir"])]]
        return argv
    if command == "gdbserver":
        # Every case is refused before the server would wait for gdb: a bad port or
        # host, or an image that does not load (it listens, then fails and closes).
        flaw = rng.choice(["port", "host", "firmware"])
        argv.append(pool[rng.choice(["missing", "dir", "dev_zero", "text", "empty"])] if flaw == "firmware"
                    else pool["hello"])
        argv += ["--port", rng.choice(["65536", "-1", "x", "99999999999999999999", "", "1e3"]) if flaw == "port"
                 else "0"]
        if flaw == "host":
            argv += ["--host", rng.choice(["", "0", "0.0", " ", "00"])]
        if rng.random() < 0.3:
            argv += ["--dump", f"main={pool[rng.choice(['out', 'dev_full', 'dir', 'missing_dir'])]}"]
        return argv
    if command == "card":  # nothing listens on port 9 (discard): refused at once
        return argv + rng.choice([["--vpcd", rng.choice(["127.0.0.1:9", "x", ":", "127.0.0.1:99999", "", "a:b:c"])],
                                  ["--wait", rng.choice(["nan", "-1", "inf", "x"]), "--vpcd", "127.0.0.1:9"],
                                  ["--vpcd", "127.0.0.1:9", "--state", pool[rng.choice(["dev_zero", "dir",
                                                                                         "missing_dir"])]]])
    if command == "faults":
        # One flaw each, refused before the golden run: a model, window, oracle, sample,
        # order or output that cannot be, or an image that does not load.
        flaw = rng.choice(["model", "window", "oracle", "sample", "firmware", "json", "replay"])
        if flaw == "replay":
            return argv + ["--replay", rng.choice(["x", "-1", "99999999999999999999"]), "--db", pool["missing"]]
        argv.append(pool[rng.choice(["missing", "dir", "dev_zero", "text", "empty"])] if flaw == "firmware"
                    else pool["verifypin"])
        argv += ["--model", rng.choice(["nosuch", "skip:0", "skip:99", "", "reg-flip:x"]) if flaw == "model" else "skip"]
        argv += ["--oracle", rng.choice(["exit=x", "nosuch", "mod:", "no_module_here:f", ""]) if flaw == "oracle"
                 else "exit=0"]
        if flaw == "window":
            argv += ["--window", rng.choice(["no_such_function", "verify_pin#0", "100-50", "x.c:1-2", "", "#"])]
        if flaw == "sample":
            argv += ["--sample", rng.choice(["0", "-1", "x", "9" * 30]), "--window", "verify_pin"]
        if flaw == "json":
            argv += ["--window", "verify_pin", "--json", pool[rng.choice(["dir", "missing_dir"])]]
        return argv
    if command in ("power", "tvla"):
        # Refused before the first trace: a count, symbol, value, window or output that cannot be.
        flaw = rng.choice(["traces", "fixed", "random", "window", "firmware", "out", "inputs"]
                          + (["pairs"] if command == "tvla" else []))
        argv.append(pool[rng.choice(["missing", "dir", "dev_zero", "text"])] if flaw == "firmware" else pool["aes"])
        argv += ["--traces", rng.choice(["0", "1", "-5", "x", "9" * 30]) if flaw == "traces" else "4"]
        if flaw == "fixed":
            argv += ["--fixed", rng.choice(["nosuch=00", "plaintext=zz", "plaintext=" + "00" * 4000, "=", "plaintext"])]
        if flaw == "random":
            argv += ["--random", rng.choice(["nosuch", "plaintext=bytes:x", "plaintext=bytes:-1", ""])]
        if flaw == "window":
            argv += ["--window", rng.choice(["no_such_function", "5-1", "x.c:9-1", ""])]
        if flaw == "inputs":
            argv += ["--inputs", rng.choice(["no_module_here:f", "os:no_such_function", "x", ""])]
        if flaw == "pairs":  # not a distance, or without --order 2
            argv += ["--pairs", rng.choice(["0", "-1", "x", "", "4"])]
        if command == "power":
            argv += ["--out", rng.choice([pool["dir"], pool["missing_dir"] + ".npy"]) if flaw == "out"
                     else str(Path(pool["out"]).with_suffix(".npy"))]
        elif flaw == "out":
            argv += ["--json", pool[rng.choice(["dir", "missing_dir"])]]
        return argv
    if command == "cpa":
        return argv + [pool[rng.choice(["missing", "dir", "dev_zero", "text", "empty", "big"])],
                       "--intermediate", rng.choice(["aes-sbox-hw:plaintext", "no_module_here:f", "x", ""])]
    if command == "usb":
        return argv + [rng.choice(["descriptors", "nonsense"])] + (
            [pool[rng.choice(["hello", "missing", "dir", "dev_zero", "text"])]] if rng.random() < 0.5 else []) + (
            ["--config", pool[rng.choice(["bad_yaml", "dev_zero", "missing"])]] if rng.random() < 0.3 else [])
    if command not in ("run", "profile"):
        return argv + [pool[rng.choice(["hello", "text"])]] * rng.randint(0, 1)
    firmware = rng.choice(["hello"] * 4 + ["fault"] * 3 + ["systick"] * 2
                          + ["missing", "dir", "dev_zero", "text", "empty", "dev_null"])
    if rng.random() > 0.05:
        argv.append(pool[firmware])
    bounded = False
    for _ in range(rng.randint(0, 5)):
        option = rng.choice(["--max-cycles", "--config", "--json", "--load", "--dump", "-q", "-v", "--bogus",
                             "--load", "--dump", "--host-dir", "--vcd", "--folded", "--trace-events", "--tarmac",
                             "--tarmac-range", "--tarmac-limit", "--top"])
        if option == "--max-cycles":
            value = rng.choice(CYCLES)
            bounded = bounded or value not in ("0",)
            argv += [option, value]
        elif option == "--config":
            argv += [option, pool[rng.choice(["reference", "overlay", "bad_yaml", "missing", "dir", "dev_zero",
                                               "dev_null", "text", "empty"])]]
        elif option == "--json":
            argv += [option, rng.choice(["-", pool["dev_full"], pool["dir"], pool["missing_dir"], pool["out"]])]
        elif option == "--load":
            symbol = rng.choice(SYMBOLS)
            source = rng.choice(["word", "empty", "big", "dev_zero", "dev_null", "missing", "dir"])
            if symbol in ("main", "Reset_Handler") and source == "word":
                source = "big"  # random code could loop for ever without a cycle budget
            argv += [option, f"{symbol}={pool[source]}" if rng.random() > 0.05 else symbol]
        elif option == "--dump":
            symbol = rng.choice(SYMBOLS)
            target = rng.choice(["out", "dev_full", "dir", "missing_dir", "dev_null"])
            argv += [option, f"{symbol}={pool[target]}"]
        elif option in ("--vcd", "--folded", "--trace-events", "--tarmac"):
            argv += [option, rng.choice([pool["out"], pool["dev_full"], pool["dir"], pool["missing_dir"]])]
        elif option == "--tarmac-range":
            argv += [option, rng.choice(["main", "nosuch", "0:4", "4:0", "0x0:0xFFFFFFFF", "x:y", ":", "", "9" * 50])]
        elif option in ("--tarmac-limit", "--top"):
            argv += [option, rng.choice(CYCLES)]
        elif option == "--host-dir":
            argv += [option, pool[rng.choice(["host", "missing", "word", "dev_null"])]]
        else:
            argv.append(option)
    if not bounded and rng.random() < 0.5:
        argv += ["--max-cycles", "2000000"]
    if rng.random() < 0.1:  # the firmware's own command line
        argv += ["--"] + rng.sample(["a", "--max-cycles", "-q", "", "x" * 300, "--", "é"], rng.randint(0, 3))
    return argv
