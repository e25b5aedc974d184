"""The live benchmark's two plots (scripts/bench_live.py): the highest-priority table's staleness
per contestant, and the priority-weighted staleness per contestant over the window and the burst."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["plot"]


def plot(result: dict[str, Any], series: dict[str, dict[str, list]], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prios = result["priorities"]
    top = max(prios, key=lambda t: prios[t])
    b0, b1 = result["burst"]
    files = []
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for c in result["contestants"]:
        s = series.get(c["name"], {}).get(top)
        if s:
            ax.plot([x for x, _ in s], [y for _, y in s], label=c["name"], lw=1.2)
    ax.axvspan(b0, b1, color="grey", alpha=0.2, label="burst")
    ax.set_xlabel("seconds since the trace started")
    ax.set_ylabel(f"staleness of {top} (p={prios[top]:g}), s")
    ax.set_title("Staleness of the highest-priority table, from the Delta logs")
    ax.legend(fontsize=8)
    files.append(_save(fig, out, "-top.png"))
    fig, ax = plt.subplots(figsize=(8, 4))
    names = [c["name"] for c in result["contestants"]]
    whole = [c.get("weighted_staleness") or 0 for c in result["contestants"]]
    burst = [c.get("burst_weighted_staleness") or 0 for c in result["contestants"]]
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], whole, width=0.4, label=f"window [{result['window'][0]:g}, {result['window'][1]:g}] s")
    ax.bar([x + 0.2 for x in xs], burst, width=0.4, label=f"burst [{b0:g}, {b1:g}] s")
    ax.set_xticks(list(xs), names, rotation=15, fontsize=8)
    ax.set_ylabel("average Σ p·S  (priority-seconds)")
    ax.set_title("Priority-weighted staleness per contestant (lower is better)")
    ax.legend(fontsize=8)
    files.append(_save(fig, out, "-weighted.png"))
    return files


def _save(fig: Any, out: Path, suffix: str) -> str:
    """Write `fig` beside `out` (its stem + `suffix`), close it, return the path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    p = out.with_name(out.stem + suffix)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return str(p)
