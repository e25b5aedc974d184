"""The repeated runs as Markdown: the tables docs/benchmarks.md publishes, rendered from
the summary `scripts/bench_live.py --seeds N` writes and the per-seed JSON objects beside it, so a
reader can regenerate every figure of the page from the published JSON; or from one run's JSON
(without `--seeds`), as a summary of one (its intervals then undefined).

    .venv/bin/python -m scripts.live.report out/seeds/summary.json > tables.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from scripts.live.summary import late, of_files

__all__ = ["render"]


def _n(x: float | None, digits: int = 0) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def _iv(v: dict[str, Any], digits: int = 2) -> str:
    """`mean [low, high]` of a summary interval."""
    if v.get("mean") is None:
        return "–"
    if v.get("low") is None:
        return f"{v['mean']:.{digits}f}"
    return f"{v['mean']:.{digits}f} [{v['low']:.{digits}f}, {v['high']:.{digits}f}]"


def _seeds(summary: dict[str, Any], base: Path) -> list[dict[str, Any]]:
    """The per-seed JSON objects named in `summary["runs"]`, beside the summary (moved or not)."""
    return [json.loads((Path(r) if Path(r).exists() else base / Path(r).name).read_text()) for r in summary["runs"]]


def _gaps(runs: list[dict[str, Any]], ref: str, peer: str) -> dict[str, float]:
    """Per table, p × (mean staleness of `ref` − of `peer`) on complete windows, the mean over the
    traces both ran `ok`: where (positive) the peer keeps a table fresher, weighted as the total is."""
    per: dict[str, list[float]] = {}
    for r in runs:
        b = {c["name"]: c for c in r["contestants"] if c.get("status") == "ok"}
        if ref not in b or peer not in b:
            continue
        for t, x in b[ref]["tables"].items():
            y = b[peer]["tables"].get(t)
            if y is None:
                continue
            sx = x.get("mean_staleness_complete", x["mean_staleness"])
            sy = y.get("mean_staleness_complete", y["mean_staleness"])
            per.setdefault(t, []).append(r["priorities"][t] * (sx - sy))
    return {t: sum(v) / len(v) for t, v in per.items()}


def render(summary: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    """Markdown: staleness per seed, the ratios, valuable tables, footing (order, load, checks)."""
    ref = summary["reference"]
    names = [ref, *summary["ratios"]]
    seeds = [r["seed"] for r in runs]
    by = [{c["name"]: c for c in r["contestants"]} for r in runs]
    commit = summary.get("commit") or {}  # none when the seeds were made at different commits
    out = [f"Commit {commit.get('commit', '?')[:7]}{' (dirty tree)' if commit.get('dirty') else ''}, "
           f"trace kind `{summary.get('trace_kind', '?')}`, seeds {', '.join(map(str, seeds))}.", ""]

    out += ["| contestant | " + " | ".join(f"trace {s}" for s in seeds) + " | mean |",
            "|---|" + "---|" * (len(seeds) + 1)]
    out.append("| zero-latency bound | " + " | ".join(_n((r.get("bound") or {}).get("weighted_staleness")) for r in runs)
               + f" | {_n(summary['bound']['mean'])} |")
    for n in names:
        cells = []
        for b in by:
            c = b.get(n)
            if c is None or c.get("weighted_staleness") is None:
                cells.append("–" if c is None else c.get("status", "–"))
                continue
            ws, wc = c["weighted_staleness"], c.get("weighted_staleness_complete")
            cells.append(_n(ws) + (f" ({_n(wc)})" if wc is not None and abs(wc - ws) > 0.5 else ""))
        out.append(f"| {n} | " + " | ".join(cells) + f" | {_n(summary['contestants'][n]['weighted_staleness']['mean'])} |")

    out += ["", f"| {ref} / peer | plain | complete windows | over the bound | burst |", "|---|---|---|---|---|"]
    for n, r in summary["ratios"].items():
        out.append(f"| {n} | {_iv(r['weighted_staleness'])} | {_iv(r['weighted_staleness_complete'])} | "
                   f"{_iv(r['excess_over_bound'])} | {_iv(r['burst_weighted_staleness'])} |")

    tables = sorted(runs[0]["priorities"], key=lambda t: -runs[0]["priorities"][t])[:5]
    out += ["", "| contestant | " + " | ".join(f"`{t}` (p {runs[0]['priorities'][t]:g})" for t in tables)
            + " | longest without a commit | CPU µs / row | mismatched windows |",
            "|---|" + "---|" * (len(tables) + 3)]
    for n in names:
        c = summary["contestants"][n]
        cells = [f"{_n(c['tables'][t]['mean_staleness']['mean'], 1)} / {_n(c['tables'][t]['max_staleness'], 1)}"
                 if t in c["tables"] else "–" for t in tables]
        worst = max(c["tables"].items(), key=lambda kv: kv[1]["starvation_periods"], default=None)
        starve = f"`{worst[0]}` {worst[1]['starvation_seconds']:.0f} s" if worst else "–"
        cpu = c["cpu_seconds_per_row"]["mean"]
        mism = sum(c["mismatched_windows"].values())
        out.append(f"| {n} | " + " | ".join(cells) + f" | {starve} | {_n(cpu * 1e6 if cpu else None, 2)} | {mism} |")

    out += ["", f"| peer | where it beats {ref}: p × (S_{ref} − S_peer), mean over traces, complete windows |", "|---|---|"]
    for n in summary["ratios"]:
        gaps = _gaps(runs, ref, n)
        wins = [f"`{t}` {g:+,.0f}" for t, g in sorted(gaps.items(), key=lambda kv: -kv[1]) if g >= 1.0][:4]
        total = sum(gaps.values())
        out.append(f"| {n} | {', '.join(wins) or 'nowhere'} (all tables {total:+,.0f}) |")

    out += ["", "| trace | contestants as measured (* measured again from an earlier run: `--reuse`) | "
            "load average before each (1 min) | twin (Freshet) |", "|---|---|---|---|"]
    for r, b in zip(runs, by, strict=True):
        loads = ", ".join(f"{(c.get('load_average') or {}).get('before', ['?'])[0]}"
                          + (f" (partitions up to {c['producer']['max_lag']:.1f} s late)"
                             if late(c) else "") for c in b.values())
        twin = (b.get(ref, {}).get("twin") or {}).get("relative_error")
        names_run = ", ".join(n + ("*" if c.get("reused_from") else "") for n, c in b.items())
        out.append(f"| {r['seed']} | {names_run} | {loads} | "
                   f"{'–' if twin is None else f'{twin * 100:+.1f} %'} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m scripts.live.report SUMMARY.json (or one run's JSON)", file=sys.stderr)
        return 2
    path = Path(argv[0])
    data = json.loads(path.read_text())
    if "runs" in data:
        sys.stdout.write(render(data, _seeds(data, path.parent)))
    elif isinstance(data.get("contestants"), list):  # one run (bench_live without --seeds): a summary of one
        sys.stdout.write(render(of_files([str(path)], [data]), [data]))
    else:
        print(f"report: {path} is neither a summary over seeds (no \"runs\") nor one run (no \"contestants\")",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
