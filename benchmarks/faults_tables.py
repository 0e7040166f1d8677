"""The tables of docs/faults.md: exploitable faults per demo firmware and fault model.

VerifyPIN (unprotected and hardened), window verify_pin (the function and its callees,
as FISSC counts), every fault of each model, oracle exit=0 (the PIN was accepted),
detection exit=3. RSA-CRT on the PKA (without and with verify-after-sign), window
crt_recombine exhaustively, and the whole signature sampled, oracle rsa-crt-bellcore.
Prints Markdown; every figure comes from a campaign run here (in this process).

    .venv/bin/python benchmarks/faults_tables.py [--rsa-sample N] [--only verifypin|rsa]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "firmware" / "build"

from pkasim.analysis.faults import Setup, run_campaign  # noqa: E402
from pkasim.analysis.faults.campaign import prepared  # noqa: E402
from pkasim.analysis.faults.oracles import OUTCOMES  # noqa: E402
from pkasim.chip.config import load_config  # noqa: E402

PIN_MODELS = ("skip", "skip:2", "instr-flip", "reg-flip", "reg-zero", "reg-ones", "flag-flip", "load-flip")
RSA_MODELS = ("skip", "reg-flip", "pka-result:flip", "pka-result:zero", "pka-result:random", "pka-skip")


def table(title: str, rows: list[tuple[str, str, dict, float]]) -> None:
    shown = [o for o in OUTCOMES if o != "oracle-error"]
    print(f"\n{title}\n")
    print("| firmware | model | faults | " + " | ".join(shown) + " | faults/s |")
    print("|---|---|---:|" + "---:|" * len(shown) + "---:|")
    for fw, model, counts, rate in rows:
        total = sum(counts.values())
        cells = [f"**{counts.get(o, 0):,}**" if o == "exploitable" and counts.get(o) else f"{counts.get(o, 0):,}"
                 for o in shown]
        print(f"| {fw} | {model} | {total:,} | " + " | ".join(cells) + f" | {rate:,.0f} |")


def campaign(config, image: str, window: str, model: str, oracle: str, detected: tuple[str, ...],
             sample: int | None = None) -> tuple[dict, float]:
    path = BUILD / f"{image}.elf"
    setup = Setup(str(path), path.read_bytes(), config, window=window, models=(model,), oracles=(oracle,),
                  detected=detected)
    try:
        prepared(setup)  # the golden run and its trace: not in the rate
        start = time.process_time()
        result = run_campaign(setup, sample=sample, seed=1, keep_rows=False)
    except Exception as exc:  # noqa: BLE001 - a model with no fault in the window: an empty row
        if "no fault of these models" in str(exc):
            return {}, 0.0
        raise
    n = sum(result.summary.outcomes.values())
    return dict(result.summary.outcomes), n / max(1e-9, time.process_time() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rsa-sample", type=int, default=3000)
    ap.add_argument("--only", choices=("verifypin", "rsa"))
    args = ap.parse_args()
    config = load_config()
    if args.only in (None, "verifypin"):
        rows = []
        for image in ("verifypin", "verifypin_hardened"):
            for model in PIN_MODELS:
                counts, rate = campaign(config, image, "verify_pin", model, "exit=0", ("exit=3",))
                rows.append((image, model, counts, rate))
        table("VerifyPIN, window verify_pin, every fault (faults/s: per CPU second, the golden run apart)", rows)
    if args.only in (None, "rsa"):
        rows = []
        for image in ("rsacrt", "rsacrt_checked"):
            for model in RSA_MODELS:
                counts, rate = campaign(config, image, "crt_recombine", model, "rsa-crt-bellcore", ("exit=3",))
                rows.append((image, model, counts, rate))
        table("RSA-CRT on the PKA, window crt_recombine, every fault", rows)
        rows = []
        for image in ("rsacrt", "rsacrt_checked"):
            for model in RSA_MODELS:
                counts, rate = campaign(config, image, "all", model, "rsa-crt-bellcore", ("exit=3",),
                                        sample=args.rsa_sample)
                rows.append((image, model, counts, rate))
        table(f"RSA-CRT on the PKA, the whole run, {args.rsa_sample:,} faults sampled per model (seed 1)", rows)


if __name__ == "__main__":
    main()
