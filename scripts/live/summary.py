"""Figures over seeds: each ratio Freshet / contestant as the mean over seeds with its
95 % t-interval, per-table staleness (mean of the per-seed means, the largest maximum), starvation
and CPU-seconds per committed row — from the per-seed JSON objects `scripts/bench_live.py` writes.

Two figures beside the plain ratio: the ratio of the staleness each adds **over the zero-latency
bound** of the seed's trace (`bound`: every partition committed the instant it arrives), (F − B) /
(C − B) — the part a scheduler can move; and the tables that **starved** longer than the benchmark
allows, 3 of their periods plus the burst.

    .venv/bin/python -m scripts.live.summary out/seeds/summary-seed*.json > out/seeds/resummary.json

summarises per-seed JSON files again (this module's figures on runs made at another commit).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

__all__ = ["T975", "interval", "starve_target", "summarise", "t975"]

STARVE_PERIODS = 3  # no table without a commit longer than 3 of its periods plus the burst


def starve_target(run: dict[str, Any], period: float) -> float:
    """The longest a table of this period may go without a fresher commit in a per-seed run:
    3 of its periods plus the run's burst."""
    burst = (run["burst"][1] - run["burst"][0]) if run.get("burst") else 0.0
    return STARVE_PERIODS * period + burst

# Student's t, 0.975 quantile, for 1 … 30 degrees of freedom (the two-sided 95 % interval);
# the seeds are few, so the normal quantile (1.96) would understate the interval badly.
T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010, 2.1788,
        2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639,
        2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom (beyond 30: the
    Cornish-Fisher expansion, Abramowitz & Stegun 26.7.5, within 1e-4 there)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be ≥ 1, not {df}")
    if df <= len(T975):
        return T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def interval(values: list[float]) -> dict[str, Any]:
    """{"mean", "low", "high", "n", "values"}: the mean and its 95 % t-interval (mean ± t·s/√n);
    with one value the interval is unknown (None)."""
    vals = [float(v) for v in values if v is not None and math.isfinite(v)]
    out: dict[str, Any] = {"mean": None, "low": None, "high": None, "n": len(vals), "values": [_sig(v) for v in vals]}
    if not vals:
        return out
    mean = statistics.fmean(vals)
    out["mean"] = _sig(mean)
    if len(vals) > 1:
        half = t975(len(vals) - 1) * statistics.stdev(vals) / math.sqrt(len(vals))
        out["low"], out["high"] = _sig(mean - half), _sig(mean + half)
    return out


def _sig(x: float) -> float:
    """Six significant digits (CPU-seconds per row are ~1e-6: a fixed number of decimals would lose them)."""
    return float(f"{x:.6g}")


def _ok(c: dict[str, Any]) -> bool:
    return c.get("status") == "ok" and c.get("weighted_staleness") is not None


LATE_SECONDS = 1.0  # a partition landed this long after its time: the run was not on its trace


def late(c: dict[str, Any]) -> bool:
    """The contestant's replay fell behind its trace (the machine paused, or was too loaded to replay it)."""
    return ((c.get("producer") or {}).get("max_lag") or 0.0) > LATE_SECONDS


def excess_over_bound(reference: float, contestant: float, bound: float) -> float | None:
    """(F − B) / (C − B): the staleness the reference adds over the trace's zero-latency bound, as a
    share of what the contestant adds; None where the contestant adds nothing."""
    return (reference - bound) / (contestant - bound) if contestant > bound else None


def summarise(runs: list[dict[str, Any]], *, reference: str = "freshet") -> dict[str, Any]:
    """The summary of per-seed results (each `{"seed", "contestants": [...]}` as bench_live writes
    it). A ratio's value for a seed is reference / contestant on that seed's trace, both run `ok`."""
    names: list[str] = []
    for r in runs:
        names += [c["name"] for c in r["contestants"] if c["name"] not in names]
    by = [{c["name"]: c for c in r["contestants"]} for r in runs]
    ratios: dict[str, Any] = {}
    for n in names:
        if n == reference:
            continue
        per = {}
        for key in ("weighted_staleness", "burst_weighted_staleness", "weighted_staleness_complete"):
            vals = [b[reference][key] / b[n][key] for b in by
                    if reference in b and n in b and _ok(b[reference]) and _ok(b[n])
                    and b[reference].get(key) is not None and b[n].get(key)]
            per[key] = interval(vals)
        excess = []
        for r, b in zip(runs, by, strict=True):
            bound = (r.get("bound") or {}).get("weighted_staleness")
            if bound is not None and reference in b and n in b and _ok(b[reference]) and _ok(b[n]):
                excess.append(excess_over_bound(b[reference]["weighted_staleness"], b[n]["weighted_staleness"], bound))
        per["excess_over_bound"] = interval(excess)
        ratios[n] = per
    contestants: dict[str, Any] = {}
    for n in names:
        entries = [(r["seed"], b[n]) for r, b in zip(runs, by, strict=True) if n in b]
        ok = [c for _, c in entries if _ok(c)]
        tables: dict[str, Any] = {}
        for t in (ok[0]["tables"] if ok else {}):
            rows = [c["tables"][t] for c in ok]
            tables[t] = {"mean_staleness": interval([x["mean_staleness"] for x in rows]),
                         "max_staleness": max(x["max_staleness"] for x in rows),
                         "starvation_seconds": max(x.get("starvation_seconds", 0.0) for x in rows),
                         "starvation_periods": max(x.get("starvation_periods", 0.0) for x in rows)}
        starved: dict[str, float] = {}  # table → its worst starvation beyond 3 periods + the burst
        for r, c in ((r, b[n]) for r, b in zip(runs, by, strict=True) if n in b and _ok(b[n])):
            for t, x in c["tables"].items():
                gone = x.get("starvation_seconds", 0.0)
                if x.get("period") and gone > starve_target(r, x["period"]):
                    starved[t] = max(starved.get(t, 0.0), gone)
        mism: dict[str, int] = {}
        for c in ok:
            for t, v in (c.get("check") or {}).items():
                mism[t] = mism.get(t, 0) + int(v.get("mismatched_windows", 0))
        over = [c["weighted_staleness"] - r["bound"]["weighted_staleness"] for r, b in zip(runs, by, strict=True)
                for c in [b.get(n)] if c is not None and _ok(c) and (r.get("bound") or {}).get("weighted_staleness")]
        contestants[n] = {
            **{k: interval([c.get(k) for c in ok]) for k in ("weighted_staleness", "weighted_staleness_complete",
                                                             "burst_weighted_staleness", "cpu_seconds_per_row",
                                                             "spark_jobs_per_update", "peak_rss_bytes")},
            "excess_over_bound": interval(over),  # C − B: what the contestant adds to the seed's bound
            **{f"peak_rss_bytes_{kind}": interval([(c.get("peak_rss_bytes_by_kind") or {}).get(kind) for c in ok])
               for kind in ("jvm", "python")},
            "failed_seeds": [s for s, c in entries if not _ok(c)],
            "flagged_seeds": [s for s, c in entries if (c.get("load_average") or {}).get("flagged")],
            "late_seeds": [s for s, c in entries if late(c)],
            "mismatched_windows": mism, "starved_beyond_target": starved, "tables": tables}
    bounds = [r["bound"]["weighted_staleness"] for r in runs if (r.get("bound") or {}).get("weighted_staleness")]
    return {"seeds": [r["seed"] for r in runs], "reference": reference, "bound": interval(bounds), "ratios": ratios,
            "contestants": contestants}


def of_files(paths: list[str], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary of per-seed results read from `paths`, as bench_live's own records it: with the
    commit and the trace kind when the seeds share them."""
    common = {k: runs[0].get(k) for k in ("commit", "trace_kind") if all(r.get(k) == runs[0].get(k) for r in runs)}
    return {"kind": "summary over seeds", "runs": paths, **common, **summarise(runs)}


def main(argv: list[str]) -> int:
    """Summarise per-seed JSON files (`<stem>-seed<S>.json`) again; the summary to stdout."""
    if not argv:
        print("usage: python -m scripts.live.summary SEED.json [SEED.json ...]", file=sys.stderr)
        return 2
    runs = [json.loads(Path(a).read_text()) for a in argv]
    sizes = sorted({len(r.get("priorities") or {}) for r in runs})
    if len(sizes) > 1:
        print(f"summary: the runs are of warehouses of {', '.join(map(str, sizes))} tables: summarise each size "
              "apart", file=sys.stderr)
        return 2
    print(json.dumps(of_files(argv, runs), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
