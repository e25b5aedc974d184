"""The scale figures of the live benchmark: summaries over seeds at several warehouse sizes
(`bench_live.py --tables N --seeds 3 --json out/scale/N.json`), side by side.

    python -m scripts.live.scale out/scale/15.json out/scale/60.json out/scale/240.json \\
        --png docs/figures/scale_excess.png

Prints a Markdown table per contestant and N — excess over the zero-latency bound (C − B, mean
and 95 % interval over the seeds), Freshet's excess / the contestant's (the target's ratio),
starvation beyond 3 periods plus the burst, mismatched windows, CPU-seconds per committed row,
peak RSS of the JVMs and of the Python processes, Spark jobs per committed table update — and
draws the excess over the bound against N, one line per contestant.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["main", "plot", "rows"]


def _size(summary: dict[str, Any]) -> int:
    """The warehouse's size of a summary: from its first per-seed run."""
    first = json.loads(Path(summary["runs"][0]).read_text())
    return int(first.get("tables", 15))


def _iv(x: dict[str, Any] | None, scale: float = 1.0, digits: int = 0) -> str:
    if not x or x.get("mean") is None:
        return "—"
    m = f"{x['mean'] / scale:,.{digits}f}"
    return m if x.get("low") is None else f"{m} [{x['low'] / scale:,.{digits}f}, {x['high'] / scale:,.{digits}f}]"


def rows(summaries: list[dict[str, Any]]) -> list[str]:
    """The Markdown table: one row per contestant and N."""
    out = ["| N | contestant | excess over bound | Freshet / it (excess) | starved beyond target | mismatched windows "
           "| CPU µs/row | JVM RSS MiB | Python RSS MiB | jobs/update |", "|---" * 10 + "|"]
    for s in sorted(summaries, key=_size):
        n = _size(s)
        for name, c in s["contestants"].items():
            ratio = s["ratios"].get(name, {}).get("excess_over_bound")
            out.append(f"| {n} | {name} | {_iv(c.get('excess_over_bound'))} | {_iv(ratio, digits=2) if ratio else '—'} "
                       f"| {len(c['starved_beyond_target'])} tables | {sum(c['mismatched_windows'].values())} "
                       f"| {_iv(c.get('cpu_seconds_per_row'), 1e-6, 2)} "
                       f"| {_iv(c.get('peak_rss_bytes_jvm'), 2**20)} | {_iv(c.get('peak_rss_bytes_python'), 2**20)} "
                       f"| {_iv(c.get('spark_jobs_per_update'), digits=2)} |")
    return out


def plot(summaries: list[dict[str, Any]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_n = sorted(((_size(s), s) for s in summaries), key=lambda x: x[0])
    names = list(dict.fromkeys(name for _, s in by_n for name in s["contestants"]))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name in names:
        pts = [(n, s["contestants"][name]["excess_over_bound"]) for n, s in by_n if name in s["contestants"]]
        pts = [(n, x) for n, x in pts if x.get("mean") is not None]
        if not pts:
            continue
        xs, means = [n for n, _ in pts], [x["mean"] for _, x in pts]
        err = [[x["mean"] - (x["low"] if x["low"] is not None else x["mean"]) for _, x in pts],
               [(x["high"] if x["high"] is not None else x["mean"]) - x["mean"] for _, x in pts]]
        ax.errorbar(xs, means, yerr=err, marker="o", capsize=3, label=name, lw=1.5 if name == "freshet" else 1.0)
    ax.set_xscale("log")
    ax.set_xticks([n for n, _ in by_n], [str(n) for n, _ in by_n])
    ax.set_xticks([], minor=True)  # no "2×10²" between the sizes run
    ax.set_xlabel("tables in the warehouse (N)")
    ax.set_ylabel("weighted staleness over the bound (C − B)")
    ax.set_title("Excess over the zero-latency bound against the warehouse's size\n(mean and 95 % interval over traces)",
                 fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("summaries", nargs="+", help="bench_live summaries over seeds, one per N")
    ap.add_argument("--png", help="write the figure here")
    args = ap.parse_args(argv)
    summaries = [json.loads(Path(p).read_text()) for p in args.summaries]
    print("\n".join(rows(summaries)))
    if args.png:
        plot(summaries, Path(args.png))
        print(f"wrote {args.png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
