"""The paper's experiments (§4, Table 2, Figs. 4-11), one per figure, as utilization sweeps.

Every experiment is a job set (table classes, §4.1), a list of lines (the algorithms the figure
compares, as scheduler/sim overrides) and a list of utilizations (x-axis). A point is one run over
a fixed horizon T — the time in which the ideal run handles about `events` scheduler events — and
its relative lateness against the ideal run of the same workload, seed and horizon (§4.1). All lines
at one x share the seed and the horizon, so each ideal run is computed once and lines differ only in
the algorithm (common random numbers). Points run in parallel over worker processes.

Table 2: α=1, β=0.1, P=100, b=0.5, 4 tracks, 30 jobs; S=3 with slow and normal periods of
1000 time units each (so the mean execution time is double the normal one, as in Fig. 4).
Utilization is normalised as in `sim.workload` (offered work over capacity, slowdowns included)
and varied by scaling every α_i and β_i (§4.1, second type of experiment).
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.selftune import attach
from sim.simulator import Simulation, horizon_for, ideal_config, prepare
from sim.workload import TableClass, build_workload, config_of, with_utilization

__all__ = ["EXPERIMENTS", "Experiment", "Line", "SweepResult", "load_csv", "run_experiment", "write_outputs"]

TABLE2_SLOWDOWN = {"factor": 3.0, "normal": 1000.0, "slow": 1000.0}
NO_SLOWDOWN = {"factor": 1.0, "normal": 1000.0, "slow": 0.0}
UTILIZATIONS = (0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1)

Curves = dict[str, list[tuple[float, float]]]


@dataclass(frozen=True)
class Line:
    """One algorithm of a figure: scheduler (and sim) overrides on top of the experiment's."""

    label: str
    scheduler: dict[str, Any] = field(default_factory=dict)
    sim: dict[str, Any] = field(default_factory=dict)


# The scheduler settings the paper's figures were reproduced with (the defaults before issue 12);
# pinned so that a changed default never changes a paper figure.
PAPER_SETTINGS: dict[str, Any] = {"policy": "max-benefit", "partitioner": "proportional", "chop": 3.0}
ALGORITHM_KEYS = ("policy", "partitioner", "chop", "k", "allocation", "aggressive")


@dataclass(frozen=True)
class Workload:
    """A job set that a multi-workload experiment (`beyond`) runs every line on: table classes, or a
    config file (its scheduler section's algorithm settings are dropped, the lines choose them)."""

    name: str
    classes: tuple[TableClass, ...] = ()
    path: str | None = None
    scheduler: dict[str, Any] = field(default_factory=dict)
    sim: dict[str, Any] = field(default_factory=dict)

    def data(self, line: Line) -> dict[str, Any]:
        if self.path is not None:
            import yaml

            base = yaml.safe_load(Path(self.path).read_text())
        else:
            base = build_workload(self.classes)
        sched = {k: v for k, v in {**base.get("scheduler", {}), **self.scheduler}.items() if k not in ALGORITHM_KEYS}
        base["scheduler"] = {"tracks": 4, **sched, **line.scheduler}
        base["sim"] = {**base.get("sim", {}), **self.sim, **line.sim}
        return base


@dataclass(frozen=True)
class Experiment:
    name: str
    figure: str
    section: str
    title: str
    claim: str
    classes: tuple[TableClass, ...]
    lines: tuple[Line, ...]
    scheduler: dict[str, Any] = field(default_factory=dict)
    sim: dict[str, Any] = field(default_factory=lambda: {"slowdown": dict(TABLE2_SLOWDOWN)})
    xs: tuple[float, ...] = UTILIZATIONS
    events: int = 40_000
    seeds: int = 2
    choices: str = ""
    verdict: Callable[[Curves], tuple[bool, str]] | None = None
    workloads: tuple[Workload, ...] = ()  # several job sets (then `classes` is unused)

    def config(self, line: Line, x: float, workload: Workload | None = None) -> dict[str, Any]:
        """The workload dict of one point: the job set, the line's algorithm, utilization x."""
        if workload is not None:
            return with_utilization(workload.data(line), x)
        sched = {"tracks": 4, **PAPER_SETTINGS, **self.scheduler, **line.scheduler}
        sim = {**self.sim, **line.sim}
        return with_utilization(build_workload(self.classes, scheduler=sched, sim=sim), x)

    def workload_names(self) -> list[str]:
        return [w.name for w in self.workloads] or [self.name]


# ---- running a sweep -----------------------------------------------------------------------------
def _simulate_point(task: dict[str, Any]) -> dict[str, Any]:
    """Worker: one run (or one ideal run) over a fixed horizon."""
    t0 = time.perf_counter()
    cfg = prepare(config_of(task["config"]), task["seed"])
    if task["ideal"]:
        cfg = ideal_config(cfg)
    sim = Simulation(cfg, seed=task["seed"])
    tuner = None if task["ideal"] else attach(sim)  # the default's tuner, as the daemon runs it
    st = sim.run(until=task["until"])
    tuned = tuner.summary() if tuner is not None else {}
    return {
        "key": task["key"],
        "weighted_staleness": st.weighted_staleness,
        "events": st.events,
        "jobs": st.jobs,
        "chopped": st.chopped,
        "busy_fraction": st.busy_time / (st.horizon * cfg.scheduler.tracks),
        "seconds": time.perf_counter() - t0,
        "tuner_switches": len(tuned.get("switches", [])),
        "tuner_evaluations": tuned.get("evaluations", 0),
        "tuner_simulated": tuned.get("simulated", 0),  # evaluations that ran their simulations
        "tuner_cpu_seconds": tuner.cpu_seconds if tuner is not None else 0.0,  # measured, not seeded
    }


@dataclass
class SweepResult:
    experiment: Experiment
    rows: list[dict[str, Any]]
    events: int
    seeds: int
    seconds: float

    def curves(self, workload: str | None = None) -> Curves:
        """Mean relative lateness per line and x (over seeds), in x order; of one workload if the
        experiment has several (default: the first)."""
        workload = workload or self.experiment.workload_names()[0]
        acc: dict[tuple[str, float], list[float]] = {}
        for r in self.rows:
            if r.get("workload", workload) == workload:
                acc.setdefault((r["line"], r["utilization"]), []).append(r["relative_lateness"])
        out: Curves = {ln.label: [] for ln in self.experiment.lines}
        for (label, x), vals in sorted(acc.items(), key=lambda kv: kv[0][1]):
            out[label].append((x, sum(vals) / len(vals)))
        return out

    def all_curves(self) -> dict[str, Curves]:
        return {w: self.curves(w) for w in self.experiment.workload_names()}

    def verdict(self) -> tuple[bool | None, str]:
        if self.experiment.verdict is None:
            return None, "no automatic verdict"
        if self.experiment.workloads:
            return self.experiment.verdict(self.all_curves())  # type: ignore[arg-type]
        return self.experiment.verdict(self.curves())


def run_experiment(
    exp: Experiment,
    *,
    events: int | None = None,
    seeds: int | None = None,
    workers: int | None = None,
    xs: Sequence[float] | None = None,
    progress: Callable[[str], None] | None = None,
) -> SweepResult:
    """Run every (line, x, seed) point of `exp`, the ideal runs first, in parallel."""
    events = events or exp.events
    seeds = seeds or exp.seeds
    xs = tuple(xs) if xs is not None else exp.xs
    workers = max(1, workers or os.cpu_count() or 1)
    started = time.perf_counter()
    ideal_tasks: dict[str, dict[str, Any]] = {}
    run_tasks: list[dict[str, Any]] = []
    for wl in exp.workloads or (None,):
        wname = wl.name if wl is not None else exp.name
        for x in xs:
            for seed in range(1, seeds + 1):
                for line in exp.lines:
                    data = exp.config(line, x, wl)
                    cfg = config_of(data)
                    until = horizon_for(cfg, events)
                    ideal_data = ideal_config(prepare(cfg, seed)).model_dump(mode="json", by_alias=True)
                    ikey = json.dumps([ideal_data["streams"], ideal_data["tables"], ideal_data["sim"], seed, until],
                                      sort_keys=True)
                    ideal_tasks.setdefault(ikey, {"key": ikey, "config": data, "seed": seed, "until": until,
                                                  "ideal": True, "label": f"{wname} ideal", "x": x})
                    run_tasks.append({"key": (wname, line.label, x, seed), "config": data, "seed": seed,
                                      "until": until, "ideal": False, "ideal_key": ikey, "label": line.label,
                                      "x": x, "workload": wname})
    tasks = list(ideal_tasks.values()) + run_tasks
    results: dict[Any, dict[str, Any]] = {}
    total = len(tasks)

    def note(i: int, task: dict[str, Any], res: dict[str, Any]) -> None:
        if progress is not None:
            wl = f"{task['workload']} " if exp.workloads and "workload" in task else ""
            progress(f"[{i}/{total}] {exp.name}: {wl}{task['label']} U={task['x']:g} seed={task['seed']} "
                     f"({res['events']} events, {res['seconds']:.1f}s)")

    if workers == 1:
        for i, task in enumerate(tasks, 1):
            res = _simulate_point(task)
            results[_k(task["key"])] = res
            note(i, task, res)
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futs = {pool.submit(_simulate_point, t): t for t in tasks}
            for i, fut in enumerate(as_completed(futs), 1):
                task = futs[fut]
                res = fut.result()
                results[_k(task["key"])] = res
                note(i, task, res)
    rows = []
    for task in run_tasks:
        res = results[_k(task["key"])]
        ideal = results[_k(task["ideal_key"])]
        rows.append({
            "experiment": exp.name,
            "workload": task["workload"],
            "line": task["label"],
            "utilization": task["x"],
            "seed": task["seed"],
            "relative_lateness": res["weighted_staleness"] / ideal["weighted_staleness"],
            "weighted_staleness": res["weighted_staleness"],
            "ideal_weighted_staleness": ideal["weighted_staleness"],
            "busy_fraction": res["busy_fraction"],
            "events": res["events"],
            "ideal_events": ideal["events"],
            "jobs": res["jobs"],
            "chopped_jobs": res["chopped"],
            "horizon": task["until"],
            "tuner_switches": res["tuner_switches"],
            "tuner_evaluations": res["tuner_evaluations"],
            "tuner_simulated": res["tuner_simulated"],
            "tuner_cpu_seconds": res["tuner_cpu_seconds"],
        })
    names, labels = exp.workload_names(), [ln.label for ln in exp.lines]
    rows.sort(key=lambda r: (names.index(r["workload"]), labels.index(r["line"]), r["utilization"], r["seed"]))
    return SweepResult(exp, rows, events, seeds, time.perf_counter() - started)


def load_csv(exp: Experiment, path: Path) -> SweepResult:
    """A sweep read back from its CSV (to re-plot or re-judge without re-running)."""
    rows: list[dict[str, Any]] = []
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            row: dict[str, Any] = dict(r)
            row.setdefault("workload", exp.name)  # CSVs written before multi-workload experiments
            for k in ("utilization", "relative_lateness", "weighted_staleness", "ideal_weighted_staleness",
                      "busy_fraction", "horizon"):
                row[k] = float(row[k])
            for k in ("seed", "events", "ideal_events", "jobs", "chopped_jobs"):
                row[k] = int(row[k])
            rows.append(row)
    if not rows:
        raise ValueError(f"{path} has no rows")
    seeds = len({r["seed"] for r in rows})
    return SweepResult(exp, rows, events=max(r["ideal_events"] for r in rows), seeds=seeds, seconds=0.0)


def _k(key: Any) -> str:
    return key if isinstance(key, str) else json.dumps(key)


# ---- output --------------------------------------------------------------------------------------
def write_outputs(result: SweepResult, out: Path, *, csv_too: bool = True) -> dict[str, Path]:
    """CSV of every point, a PNG like the paper's figure, and a short Markdown summary."""
    exp = result.experiment
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / f"{exp.name}.csv", "png": out / f"{exp.name}.png", "summary": out / f"{exp.name}.md"}
    if csv_too:
        _write_csv(result, paths["csv"])
    plot(result, paths["png"])
    paths["summary"].write_text(summary(result))
    return paths


def _write_csv(result: SweepResult, path: Path) -> None:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(result.rows[0].keys()))
        w.writeheader()
        for r in result.rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def plot(result: SweepResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exp = result.experiment
    if exp.workloads:
        _plot_beyond(result, path, plt)
        return
    curves = result.curves()
    fig, ax = plt.subplots(figsize=(6.0, 4.2), dpi=110)
    markers = "osD^vx*+"
    top = 1.0
    for i, (label, pts) in enumerate(curves.items()):
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        top = max([top, *ys])
        ax.plot(xs, ys, marker=markers[i % len(markers)], label=label, linewidth=1.6, markersize=5)
    if top > 8:  # overload points (U ≥ 1) grow with the horizon; keep the knee readable
        ax.set_yscale("log")
    ax.set_xlabel("utilization U (offered work / capacity, slowdowns included)")
    ax.set_ylabel("relative lateness (weighted staleness / ideal)")
    ax.set_title(f"{exp.figure}: {exp.title}", fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.text(0.99, 0.01, f"{result.events:,} events/point, {result.seeds} seed(s)", transform=ax.transAxes,
            ha="right", va="bottom", fontsize=7, color="gray")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _plot_beyond(result: SweepResult, path: Path, plt: Any) -> None:
    """One line per workload: the default's lateness over the best paper configuration's."""
    ratios = beyond_ratios(result.all_curves())
    fig, ax = plt.subplots(figsize=(7.0, 4.6), dpi=110)
    markers = "osD^vx*+<>p"
    for i, (wl, row) in enumerate(ratios.items()):
        xs = sorted(row)
        ax.plot(xs, [row[x][0] for x in xs], marker=markers[i % len(markers)], label=wl, linewidth=1.3,
                markersize=4)
    ax.axhline(BEYOND_POINT_MAX, color="red", linestyle="--", linewidth=1, label=f"{BEYOND_POINT_MAX} (every point)")
    ax.axhline(BEYOND_GEO_MAX, color="green", linestyle=":", linewidth=1, label=f"{BEYOND_GEO_MAX} (mean, U ≥ 0.95)")
    ax.set_yscale("log")
    ax.set_xlabel("utilization U (offered work / capacity, slowdowns included)")
    ax.set_ylabel("default / best paper configuration (relative lateness)")
    holds, why = result.verdict()
    ax.set_title(f"{result.experiment.title}", fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2)
    ax.text(0.99, 0.01, f"{result.events:,} events/point, {result.seeds} seed(s)", transform=ax.transAxes,
            ha="right", va="bottom", fontsize=7, color="gray")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _summary_beyond(result: SweepResult) -> str:
    exp = result.experiment
    holds, why = result.verdict()
    ratios = beyond_ratios(result.all_curves())
    xs = sorted({x for row in ratios.values() for x in row})
    lines = ["| workload | " + " | ".join(f"U={x:g}" for x in xs) + " |", "|---|" + "---|" * len(xs)]
    for wl, row in ratios.items():
        lines.append(f"| {wl} | " + " | ".join(f"{row[x][0]:.3f}" if x in row else "" for x in xs) + " |")
    best = ["| workload | " + " | ".join(f"U={x:g}" for x in xs) + " |", "|---|" + "---|" * len(xs)]
    for wl, row in ratios.items():
        c = result.curves(wl)
        best.append(f"| {wl} | " + " | ".join(
            f"{_at(c, row[x][1])[x]:.3g} ({row[x][1]})" if x in row else "" for x in xs) + " |")
    return "\n".join([
        f"# {exp.title} (`{exp.name}`)", "", exp.claim, "",
        f"Verdict: the target **{'holds' if holds else 'does NOT hold'}** in this run. {why}", "",
        "Default / best paper configuration (relative lateness ratio; < 1: the default is better):", "",
        *lines, "", "Best paper configuration's relative lateness (and which):", "", *best, "",
        f"{result.events:,} events per point (ideal run), {result.seeds} seed(s)"
        + (f", {result.seconds:.0f} s wall time." if result.seconds else "."), "",
        f"Choices: {exp.choices}", "",
    ])


def summary(result: SweepResult) -> str:
    exp = result.experiment
    if exp.workloads:
        return _summary_beyond(result)
    curves = result.curves()
    holds, why = result.verdict()
    status = {True: "holds", False: "does NOT hold", None: "not judged"}[holds]
    xs = sorted({x for pts in curves.values() for x, _ in pts})
    head = "| line | " + " | ".join(f"U={x:g}" for x in xs) + " |"
    sep = "|---|" + "---|" * len(xs)
    body = []
    for label, pts in curves.items():
        d = dict(pts)
        body.append(f"| {label} | " + " | ".join(f"{d[x]:.3g}" if x in d else "" for x in xs) + " |")
    return "\n".join([
        f"# {exp.figure} — {exp.title} (`{exp.name}`)",
        "",
        f"Paper ({exp.section}): {exp.claim}",
        "",
        f"Verdict: the claim **{status}** in this run. {why}",
        "",
        "Mean relative lateness:",
        "",
        head,
        sep,
        *body,
        "",
        f"{result.events:,} events per point (ideal run), {result.seeds} seed(s)"
        + (f", {result.seconds:.0f} s wall time." if result.seconds else "."),
        "",
        f"Choices where the paper is open: {exp.choices}" if exp.choices else "",
        "",
    ])


# ---- verdict helpers -----------------------------------------------------------------------------
def _at(curves: Curves, label: str) -> dict[float, float]:
    return dict(curves[label])


def _mean(vals: Sequence[float]) -> float:
    return sum(vals) / len(vals) if vals else math.nan


def _geo_mean_ratio(a: dict[float, float], b: dict[float, float], xs: Sequence[float]) -> float:
    """Geometric mean of a/b over xs (how much larger a is than b, typically)."""
    xs = [x for x in xs if x in a and x in b]
    return math.exp(_mean([math.log(a[x] / b[x]) for x in xs])) if xs else math.nan


def _busy(curves: Curves, lo: float = 0.6) -> list[float]:
    return sorted({x for pts in curves.values() for x, _ in pts if x >= lo})


# ---- the figures -----------------------------------------------------------------------------------
def _v_fig4(c: Curves) -> tuple[bool, str]:
    labels = list(c)
    base = _at(c, labels[0])
    xs = [x for x in _busy(c, 0.4) if x < 1.0]  # U ≥ 1 is overload for every line
    ratios = {lb: _geo_mean_ratio(_at(c, lb), base, xs) for lb in labels[1:]}
    vals = list(ratios.values())
    monotone = all(a <= b for a, b in zip(vals, vals[1:], strict=False))
    return min(vals) > 1.2, (
        f"For 0.4 ≤ U < 1, relative to {labels[0]}: "
        + ", ".join(f"{lb} {r:.2f}×" for lb, r in ratios.items())
        + f" (geometric means); the worst is {max(ratios, key=ratios.__getitem__)}, and lateness "
        + ("rises" if monotone else "does not rise monotonically") + " with S.")


def _v_fig5(c: Curves) -> tuple[bool, str]:
    mb, edfp = _at(c, "Max-Benefit"), _at(c, "EDF-P")
    xs = sorted(mb)
    diff = {x: edfp[x] / mb[x] for x in xs}
    low = [x for x in xs if mb[x] > 1.05 or edfp[x] > 1.05][:2]
    high = xs[-2:]
    edfp_better_low = any(diff[x] < 0.99 for x in low)
    mb_better_high = all(diff[x] > 1.0 for x in high)
    la = _at(c, "Lookahead")
    la_same = max(abs(la[x] / mb[x] - 1) for x in xs)
    txt = ("EDF-P / Max-Benefit lateness ratio by U: " + ", ".join(f"{x:g}: {diff[x]:.2f}" for x in xs)
           + f". Lookahead differs from Max-Benefit by at most {la_same:.0%}.")
    return edfp_better_low and mb_better_high, txt


def _v_fig6(c: Curves) -> tuple[bool, str]:
    part, rnd = _at(c, "Partitioned"), _at(c, "Random")
    mb, prop = _at(c, "Max-Benefit"), _at(c, "Proportional")
    xs = sorted(mb)
    below = [x for x in xs if x <= 0.9]
    good = max(max(v[x] for x in below) for v in (mb, rnd, prop))
    worst = [x for x in xs if x >= 0.7 and part[x] >= max(rnd[x], mb[x], prop[x])]
    prop_vs_mb = _geo_mean_ratio(prop, mb, xs)
    ok = good < 1.5 and len(worst) >= len([x for x in xs if x >= 0.7]) - 1 and prop_vs_mb < 1.15
    return ok, (f"Below U=0.9 the global algorithms stay within {good:.2f}× ideal; Partitioned is the worst "
                f"(above Random too) at {len(worst)} of {len([x for x in xs if x >= 0.7])} points with U ≥ 0.7; "
                f"Proportional / Max-Benefit = {prop_vs_mb:.2f} (geometric mean).")


def _v_fig7(c: Curves) -> tuple[bool, str]:
    mb, edf, rnd = _at(c, "Max-Benefit"), _at(c, "EDF"), _at(c, "Random")
    xs = _busy(c)
    wins = [x for x in xs if mb[x] < edf[x] and mb[x] < rnd[x]]
    r1, r2 = _geo_mean_ratio(edf, mb, xs), _geo_mean_ratio(rnd, mb, xs)
    return len(wins) >= len(xs) - 1 and min(r1, r2) > 1.1, (
        f"For U ≥ 0.6 prioritized Max-Benefit is lowest at {len(wins)} of {len(xs)} points; "
        f"EDF is {r1:.2f}× and Random {r2:.2f}× its lateness (geometric mean).")


def _v_fig8(c: Curves) -> tuple[bool, str]:
    xs = _busy(c)
    none, s, m, mp = (_at(c, k) for k in ("none", "Sum", "Max", "Max-plus"))
    r_none = _geo_mean_ratio(none, m, xs)
    r_sum = _geo_mean_ratio(s, m, xs)
    r_mp = _geo_mean_ratio(mp, m, xs)
    ok = r_none > 1.1 and r_sum >= 1.0 and r_mp >= 0.99 and r_sum >= r_mp * 0.99
    return ok, (f"For U ≥ 0.6, relative to Max: none {r_none:.2f}×, Sum {r_sum:.2f}×, "
                f"Max-plus {r_mp:.2f}× (geometric means).")


def _v_fig9(c: Curves) -> tuple[bool, str]:
    g, part, prop = _at(c, "Max-Benefit (global)"), _at(c, "Partitioned"), _at(c, "Proportional")
    xs = sorted(g)
    low = [x for x in xs if x <= 0.6]
    high = [x for x in xs if x >= 0.9]
    part_low = _geo_mean_ratio(part, g, low)
    part_high = _geo_mean_ratio(part, g, high)
    prop_best = [x for x in xs if prop[x] <= min(g[x], part[x]) * 1.02]
    ok = part_low < 1.0 and part_high > 1.0 and len(prop_best) >= len(xs) - 1
    return ok, (f"Partitioned / global: {part_low:.2f} at U ≤ 0.6, {part_high:.2f} at U ≥ 0.9; Proportional "
                f"is best (within 2%) at {len(prop_best)} of {len(xs)} points.")


def _v_fig10(c: Curves) -> tuple[bool, str]:
    basic, all_, aggr = _at(c, "basic"), _at(c, "all"), _at(c, "all, aggr.")
    xs = sorted(basic)
    low = [x for x in xs if basic[x] > 1.02][:3]  # where lateness first rises
    r_all = _geo_mean_ratio(all_, basic, low)
    best = [x for x in xs if aggr[x] <= min(basic[x], all_[x]) * 1.02]
    ok = r_all < 0.97 and len(best) >= len(xs) - 1  # "significantly better": more than noise
    return ok, (f"'all' / 'basic' where lateness first rises (U = {', '.join(f'{x:g}' for x in low)}): "
                f"{r_all:.2f}; 'all, aggr.' is best (within 2%) at {len(best)} of {len(xs)} points.")


def _v_fig11(c: Curves) -> tuple[bool, str]:
    chop, none = _at(c, "c=3"), _at(c, "no chopping")
    chop_m, none_m = _at(c, "c=3, Max inheritance"), _at(c, "no chopping, Max inheritance")
    xs = _busy(c)
    r = _geo_mean_ratio(none, chop, xs)
    r_m = _geo_mean_ratio(none_m, chop_m, xs)
    worse = [x for x in xs if chop[x] > none[x] * 1.02]
    return r > 1.02 and not worse, (
        f"For U ≥ 0.6 no chopping is {r:.2f}× chopping (geometric mean); chopping is more than 2% worse at "
        f"{len(worse)} of {len(xs)} points; with Max inheritance the ratio is {r_m:.2f}.")


def _slowdown(s: float, cycle: float = 2000.0) -> dict[str, float]:
    """Slow share 1/(S−1) of the cycle, so the mean execution time is double the normal one (Fig. 4)."""
    slow = cycle / (s - 1.0)
    return {"factor": s, "normal": cycle - slow, "slow": slow}


HETERO = (TableClass(15, period=100.0, priorities=100.0, name="short"),
          TableClass(15, period=10_000.0, priorities=1.0, name="long"))

EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    Experiment(
        name="fig4-slowdown", figure="Fig. 4", section="§4.1", title="effect of slowdown on relative lateness",
        claim="The slowdown factor S has a significant effect on relative lateness (same mean execution time, "
              "burstier with larger S); S=3 is used for the rest.",
        classes=(TableClass(30),),
        scheduler={"tracks": 1, "partitioner": "global", "policy": "max-benefit"},
        lines=(Line("S=1 (no slowdown)", sim={"slowdown": dict(NO_SLOWDOWN)}),
               Line("S=3", sim={"slowdown": _slowdown(3)}),
               Line("S=5", sim={"slowdown": _slowdown(5)}),
               Line("S=9", sim={"slowdown": _slowdown(9)})),
        choices="one track, 30 identical jobs (Table 2), Max-Benefit. The normal+slow cycle is 2000 time units "
                "(20 periods) and the slow share is 1/(S−1), so the mean execution time is double the normal "
                "one for every S>1 (S=2 would be 'always slow', which at equal utilization is the S=1 line). "
                "Utilization is offered work over capacity (slow periods included), so the lines compare equal load.",
        verdict=_v_fig4,
    ),
    Experiment(
        name="fig5-basic", figure="Fig. 5", section="§4.2", title="Max-Benefit versus EDF-P",
        claim="Basic algorithms behave nearly alike; with two cost classes (β=0.1 and β=0.01) EDF-P is better "
              "when lateness first rises, Max-Benefit at higher utilization (a crossover); Lookahead ≈ Max-Benefit.",
        classes=(TableClass(15, beta=0.1, name="b1_"), TableClass(15, beta=0.01, name="b01_")),
        scheduler={"partitioner": "global"},
        lines=(Line("Max-Benefit", {"policy": "max-benefit"}), Line("EDF-P", {"policy": "edf-p"}),
               Line("Lookahead", {"policy": "lookahead"})),
        choices="4 tracks, Global (one queue over all tracks: the basic algorithm alone decides), priority 1 "
                "for all tables (the paper does not give priorities for this figure), 15 tables per class.",
        verdict=_v_fig5,
    ),
    Experiment(
        name="fig6-uniform", figure="Fig. 6", section="§4.3", title="no slowdowns, uniform jobs, five tracks",
        claim="With uniform jobs and no slowdown all algorithms are good until about 100% utilization; "
              "Partitioned is the worst, even worse than Random (no track promotion is possible); "
              "Proportional is on par with Max-Benefit.",
        classes=(TableClass(30),),
        scheduler={"tracks": 5},
        sim={"slowdown": dict(NO_SLOWDOWN)},
        lines=(Line("Max-Benefit", {"partitioner": "global", "policy": "max-benefit"}),
               Line("Random", {"partitioner": "global", "policy": "random"}),
               Line("Partitioned", {"partitioner": "edf-partitioned", "aggressive": False}),
               Line("Proportional", {"partitioner": "proportional", "allocation": "basic", "aggressive": False})),
        xs=(0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1),
        choices="'Max-Benefit' and 'Random' are global (one queue, the paper's 'local algorithm on a single "
                "track'); Partitioned and Proportional use Max-Benefit locally, non-aggressive, basic "
                "allocation, k=10. When EDF packing needs more than 5 tracks the engine folds the overflow "
                "onto the least-used tracks (the paper could not run it at all).",
        verdict=_v_fig6,
    ),
    Experiment(
        name="fig7-priorities", figure="Fig. 7", section="§4.4", title="effects of prioritized jobs",
        claim="With two priority classes (1 and 10), prioritized Max-Benefit has far lower lateness than the "
              "non-prioritized EDF and Random.",
        classes=(TableClass(15, priorities=1.0, name="lo"), TableClass(15, priorities=10.0, name="hi")),
        scheduler={"partitioner": "global"},
        lines=(Line("Max-Benefit", {"policy": "max-benefit"}), Line("EDF", {"policy": "edf"}),
               Line("Random", {"policy": "random"})),
        choices="4 tracks, Global, 15 tables per class.",
        verdict=_v_fig7,
    ),
    Experiment(
        name="fig8-hierarchy", figure="Fig. 8", section="§4.5", title="hierarchies and inheriting priorities",
        claim="Without inheritance performance is poor; among inheritance modes Max is best and Sum worst "
              "(often close).",
        classes=tuple(TableClass(3, depth=3, priorities=(0.001, 1.0, p), name=f"p{int(p)}_")
                      for p in (1.0, 10.0, 100.0)),
        scheduler={"partitioner": "global", "policy": "max-benefit"},
        lines=(Line("none", {"inheritance": "none"}), Line("Sum", {"inheritance": "sum"}),
               Line("Max", {"inheritance": "max"}), Line("Max-plus", {"inheritance": "max-plus"})),
        choices="9 chains of depth 3 (27 tables, three per top priority 1/10/100), base priority 0.001, middle 1; "
                "derived jobs cost α+β·n like base jobs; Max-plus with K=2; 4 tracks, Global.",
        verdict=_v_fig8,
    ),
    Experiment(
        name="fig9-heterogeneous", figure="Fig. 9", section="§4.6", title="effects of heterogeneous jobs",
        claim="With periods 100 and 10,000 (priorities 100 and 1), global Max-Benefit is clearly worst; "
              "Partitioned is much better at low utilization but worse than global at high utilization; "
              "Proportional (k=1) is best overall.",
        classes=HETERO,
        lines=(Line("Max-Benefit (global)", {"partitioner": "global"}),
               Line("Partitioned", {"partitioner": "edf-partitioned", "aggressive": False}),
               Line("Proportional", {"partitioner": "proportional", "k": 1.0, "allocation": "basic",
                                     "aggressive": False})),
        events=80_000,
        choices="15 tables per class; the same α, β for both classes (so a period-10,000 job is ~90× longer); "
                "4 tracks; Proportional as first described (basic allocation, non-aggressive), k=1; "
                "Partitioned non-aggressive.",
        verdict=_v_fig9,
    ),
    Experiment(
        name="fig10-proportional", figure="Fig. 10", section="§4.6", title="Proportional scheduling variations",
        claim="'all' allocation (M=N/U_tot, no free tracks) improves Proportional at low utilization; "
              "'all' plus aggressive promotion is good at all utilizations.",
        classes=HETERO,
        scheduler={"partitioner": "proportional", "k": 1.0},
        lines=(Line("basic", {"allocation": "basic", "aggressive": False}),
               Line("all", {"allocation": "all", "aggressive": False}),
               Line("all, aggr.", {"allocation": "all", "aggressive": True})),
        events=80_000,
        choices="the Fig. 9 workload; k=1.",
        verdict=_v_fig10,
    ),
    Experiment(
        name="fig11-chopping", figure="Fig. 11", section="§4.7", title="update chopping with two priority classes",
        claim="After slowdowns, chopping updates to at most c=3 periods of data improves relative lateness.",
        classes=(TableClass(15, depth=2, priorities=(1.0, 10.0)),),
        scheduler={"partitioner": "global", "policy": "max-benefit", "inheritance": "none"},
        lines=(Line("c=3", {"chop": 3.0}), Line("no chopping", {"chop": None}),
               Line("c=3, Max inheritance", {"chop": 3.0, "inheritance": "max"}),
               Line("no chopping, Max inheritance", {"chop": None, "inheritance": "max"})),
        choices="15 chains of depth 2 (base priority 1, derived priority 10; 30 tables), 4 tracks, Global, "
                "Max-Benefit. The main pair runs without priority inheritance, so the scheduler sees the two "
                "priority classes the figure is about; with Max inheritance every base table inherits 10, so "
                "both classes look alike to the scheduler — that pair is shown too.",
        verdict=_v_fig11,
    ),
)}


# ---- beyond the paper (issue 12) ----------------------------------------------------------------
DEFAULT_LABEL = "Freshet default"
PAPER_LINES = (
    Line("MB global, c=3", {"policy": "max-benefit", "partitioner": "global", "chop": 3.0}),
    Line("MB global", {"policy": "max-benefit", "partitioner": "global", "chop": None}),
    *(Line(f"Prop. k={k:g}{', c=3' if c else ''}",
           {"policy": "max-benefit", "partitioner": "proportional", "k": k, "allocation": "all",
            "aggressive": True, "chop": c})
      for k in (1.0, 10.0) for c in (3.0, None)),
)
BEYOND_XS = (0.6, 0.7, 0.8, 0.9, 0.95, 1.0, 1.1)
BEYOND_POINT_MAX = 1.03  # the default's lateness ≤ 1.03 × the best paper configuration, every point
BEYOND_GEO_MAX = 0.85  # and ≤ 0.85 × it as a geometric mean over U ≥ 0.95


def beyond_ratios(curves: dict[str, Curves]) -> dict[str, dict[float, tuple[float, str]]]:
    """Per workload and U: the default's lateness over the best paper line's, and that line."""
    out: dict[str, dict[float, tuple[float, str]]] = {}
    for wl, c in curves.items():
        d = _at(c, DEFAULT_LABEL)
        row: dict[float, tuple[float, str]] = {}
        for x in sorted(d):
            best = min((ln.label for ln in PAPER_LINES), key=lambda lb: _at(c, lb).get(x, math.inf))
            row[x] = (d[x] / _at(c, best)[x], best)
        out[wl] = row
    return out


def _v_beyond(curves: dict[str, Curves]) -> tuple[bool, str]:  # type: ignore[override]
    ratios = beyond_ratios(curves)
    points = [(wl, x, r) for wl, row in ratios.items() for x, (r, _) in row.items()]
    worst = max(points, key=lambda p: p[2])
    over = [p for p in points if p[2] > BEYOND_POINT_MAX]
    high = [r for _, x, r in points if x >= 0.95]
    geo = math.exp(_mean([math.log(r) for r in high])) if high else math.nan
    ok = not over and geo <= BEYOND_GEO_MAX
    return ok, (f"Default / best paper configuration: worst {worst[2]:.3f} ({worst[0]}, U={worst[1]:g}); "
                f"{len(over)} of {len(points)} points above {BEYOND_POINT_MAX}; geometric mean over U ≥ 0.95 "
                f"{geo:.3f} (target ≤ {BEYOND_GEO_MAX}), over all points "
                f"{math.exp(_mean([math.log(p[2]) for p in points])):.3f}.")


def _figure_workloads() -> tuple[Workload, ...]:
    """The job sets of Figs. 4-11 (Fig. 10 reuses Fig. 9's; Fig. 4 has one per slowdown S)."""
    out = [Workload("table2", path=str(Path(__file__).parent / "workloads" / "table2.yaml"))]
    for e in EXPERIMENTS.values():
        if e.name == "fig10-proportional":
            continue
        sched = {k: v for k, v in e.scheduler.items() if k not in ALGORITHM_KEYS}
        if e.name == "fig4-slowdown":
            out += [Workload(f"fig4-S{ln.sim['slowdown']['factor']:g}", e.classes, scheduler=sched,
                             sim={**e.sim, **ln.sim}) for ln in e.lines]
        else:
            out.append(Workload(e.name.split("-")[0], e.classes, scheduler=sched, sim=dict(e.sim)))
    return tuple(out)


BEYOND = Experiment(
    name="beyond", figure="Beyond", section="issue 12",
    title="Freshet's default against the paper's best configuration",
    claim="(not the paper's) The default — Max-Benefit, the auto partitioner, chopping that pays and time "
          "slices — is never more than 3% worse than the best of the paper's configurations "
          "(Max-Benefit global and Proportional all+aggressive k ∈ {1, 10}, each with and without c=3) "
          "and at least 15% better under overload (geometric mean over U ≥ 0.95).",
    classes=(),
    lines=(*PAPER_LINES, Line(DEFAULT_LABEL, {})),
    xs=BEYOND_XS,
    events=40_000,
    seeds=2,
    workloads=_figure_workloads(),
    choices="every job set of sim/workloads/ and of Figs. 4-11 (the figure's tracks, slowdowns and inheritance); "
            "the paper lines are Max-Benefit with the partitioner, k and chop shown; the default line leaves "
            "policy, partitioner and chop unset.",
    verdict=_v_beyond,  # type: ignore[arg-type]
)
EXPERIMENTS[BEYOND.name] = BEYOND


def stderr_progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
