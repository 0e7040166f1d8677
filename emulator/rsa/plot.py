"""The bench chart: throughput per operation and where each operation's time goes.

matplotlib with its non-interactive Agg backend; the file's extension (.png or .svg)
picks the format.
"""

from __future__ import annotations

from pathlib import Path

from pkasim.base.errors import UsageError
from pkasim.base.extras import need


def bench_chart(results: list, path: str | Path) -> None:
    matplotlib = need("matplotlib", "plot", "pkasim bench --plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg"):
        raise UsageError(f"{path}: the chart is written as .png or .svg")
    labels = [j.label for j in results[0].jobs]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 0.6 * len(labels) * len(results) + 2.5))
    height = 0.8 / len(results)
    for k, res in enumerate(results):
        ys = [i + k * height for i in range(len(res.jobs))]
        name = f"{res.chip} ({Path(res.config).name})"
        left.barh(ys, [j.ops_per_second for j in res.jobs], height=height, label=name)
        for y, j in zip(ys, res.jobs):
            left.text(j.ops_per_second * 1.05, y, f"{j.ops_per_second:.3g}/s", va="center", fontsize="small")
        busy = [100 * j.pka_busy_share for j in res.jobs]
        cpu = [100 * j.cpu_only_share for j in res.jobs]
        right.barh(ys, busy, height=height, color=f"C{k}", alpha=0.9)
        right.barh(ys, cpu, left=busy, height=height, color=f"C{k}", alpha=0.35, hatch="//")
        for y, j in zip(ys, res.jobs):
            right.text(101, y, f"{j.modeled_ms:,.1f} ms", va="center", fontsize="small")
    centre = [i + (len(results) - 1) * height / 2 for i in range(len(labels))]
    for ax in (left, right):
        ax.set_yticks(centre)
        ax.set_yticklabels(labels)
        ax.invert_yaxis()
        ax.grid(axis="x", which="both", alpha=0.3)
    left.set_xscale("log")
    rates = [j.ops_per_second for r in results for j in r.jobs if j.ops_per_second > 0]
    if rates:
        left.set_xlim(min(rates) / 4, max(rates) * 4)
    left.set_xlabel("operations per second (log)")
    left.set_title("Throughput")
    right.set_xlim(0, 125)
    right.set_xticks([0, 25, 50, 75, 100])
    right.set_xlabel("% of the operation's time (modeled ms at the right)")
    right.set_title("Where the time goes")
    from matplotlib.patches import Patch

    fig.legend(*left.get_legend_handles_labels(), loc="lower left", fontsize="small", ncol=1, frameon=False)
    fig.legend(handles=[Patch(color="0.4", label="PKA busy"), Patch(facecolor="0.85", hatch="//", label="CPU only")],
               loc="lower right", fontsize="small", frameon=False)
    kinds = sorted({"ECC" if j.nbits <= 521 else "RSA" for r in results for j in r.jobs}, reverse=True)
    fig.suptitle(f"pkasim bench: {' and '.join(kinds)} operations (cycle-exact model)")
    inches = fig.get_figheight()  # the legends below take about 0.35 in, and 0.2 in per chip
    fig.tight_layout(rect=(0, (0.35 + 0.2 * len(results)) / inches, 1, 1 - 0.35 / inches))
    fig.savefig(path)
    plt.close(fig)
