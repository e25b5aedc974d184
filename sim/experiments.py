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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.bound import lower_bound, relaxation_key
from sim.figures import (
    BEYOND,
    BEYOND_LINES,
    BEYOND_POINT_MAX,
    DEFAULT_LABEL,
    EXPERIMENTS,
    PAPER_LINES,
    ROLLOUT_LINE,
    Curves,
    Experiment,
    Line,
    Workload,
    beyond_ratios,
    curve_at,
)
from sim.selftune import attach
from sim.simulator import Simulation, horizon_for, ideal_config, prepare
from sim.workload import config_of

__all__ = ["BEYOND", "BEYOND_LINES", "DEFAULT_LABEL", "EXPERIMENTS", "PAPER_LINES", "ROLLOUT_LINE", "Experiment",
           "Line", "SweepResult", "Workload", "beyond_ratios", "bound_curves", "load_csv", "run_experiment", "write_outputs"]


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


def _bound_point(task: dict[str, Any]) -> dict[str, Any]:
    """Worker: the lower bound (sim.bound) of one point's workload, tracks and horizon."""
    t0 = time.perf_counter()
    cfg = prepare(config_of(task["config"]), task["seed"])
    b = lower_bound(cfg, horizon=task["until"])
    return {"key": task["key"], "weighted_staleness": b.weighted_staleness, "events": 0,
            "seconds": time.perf_counter() - t0}


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

    def bounds(self, workload: str | None = None) -> list[tuple[str, dict[float, float]]]:
        """The lower bound relative to the ideal (mean over seeds), per x: see `bound_curves`."""
        return bound_curves(self.rows, self.experiment, workload)

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
    bound_tasks: dict[str, dict[str, Any]] = {}  # one per distinct workload, tracks, chops and horizon
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
                    bkey = relaxation_key(cfg, until)
                    chop = cfg.scheduler.chop  # the bounds of one point differ by the chops their lines may use
                    bound_tasks.setdefault(bkey, {"key": bkey, "config": data, "seed": seed, "until": until,
                                                  "bound": True, "x": x,
                                                  "label": f"{wname} bound (chop {'none' if chop is None else chop})"})
                    run_tasks.append({"key": (wname, line.label, x, seed), "config": data, "seed": seed,
                                      "until": until, "ideal": False, "ideal_key": ikey, "label": line.label,
                                      "x": x, "workload": wname, "bound_key": bkey})
    tasks = list(ideal_tasks.values()) + run_tasks + list(bound_tasks.values())
    results: dict[Any, dict[str, Any]] = {}
    total = len(tasks)

    def note(i: int, task: dict[str, Any], res: dict[str, Any]) -> None:
        if progress is not None:
            wl = f"{task['workload']} " if exp.workloads and "workload" in task else ""
            what = f"seed={task['seed']} ({res['events']} events" if not task.get("bound") else "(lower bound"
            progress(f"[{i}/{total}] {exp.name}: {wl}{task['label']} U={task['x']:g} {what}, {res['seconds']:.1f}s)")

    if workers == 1:
        for i, task in enumerate(tasks, 1):
            res = (_bound_point if task.get("bound") else _simulate_point)(task)
            results[_k(task["key"])] = res
            note(i, task, res)
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futs = {pool.submit(_bound_point if t.get("bound") else _simulate_point, t): t for t in tasks}
            for i, fut in enumerate(as_completed(futs), 1):
                task = futs[fut]
                res = fut.result()
                results[_k(task["key"])] = res
                note(i, task, res)
    rows = []
    for task in run_tasks:
        res = results[_k(task["key"])]
        ideal = results[_k(task["ideal_key"])]
        bound = results[_k(task["bound_key"])]
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
            # the lower bound on Σ p·∫S of this line's workload and tracks (sim.bound), and over the ideal
            "bound_weighted_staleness": bound["weighted_staleness"],
            "relative_bound": bound["weighted_staleness"] / ideal["weighted_staleness"],
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
            for k in ("bound_weighted_staleness", "relative_bound"):  # (CSVs from before the bound lack them)
                if row.get(k) not in (None, ""):
                    row[k] = float(row[k])
                else:
                    row.pop(k, None)
            for k in ("seed", "events", "ideal_events", "jobs", "chopped_jobs"):
                row[k] = int(row[k])
            rows.append(row)
    if not rows:
        raise ValueError(f"{path} has no rows")
    seeds = len({r["seed"] for r in rows})
    return SweepResult(exp, rows, events=max(r["ideal_events"] for r in rows), seeds=seeds, seconds=0.0)


def bound_curves(rows: list[dict[str, Any]], exp: Experiment,
                 workload: str | None = None) -> list[tuple[str, dict[float, float]]]:
    """The lower bound over the ideal (sim.bound), mean over seeds, per x: one curve when the lines
    share the workload (the same ideal run at every x and seed) — the least of the lines' bounds,
    valid for each line — else one per line (`lower bound (LINE)`). Empty for CSVs without it."""
    workload = workload or exp.workload_names()[0]
    mine = [r for r in rows if r.get("workload", workload) == workload and "relative_bound" in r]
    if not mine:
        return []
    per: dict[str, dict[float, list[float]]] = {}
    ideals: dict[tuple[float, Any], set[float]] = {}
    for r in mine:
        per.setdefault(r["line"], {}).setdefault(r["utilization"], []).append(r["relative_bound"])
        ideals.setdefault((r["utilization"], r["seed"]), set()).add(r["ideal_weighted_staleness"])
    mean = {ln: {x: sum(v) / len(v) for x, v in sorted(d.items())} for ln, d in per.items()}
    labels = [ln.label for ln in exp.lines if ln.label in mean]
    if all(len(v) == 1 for v in ideals.values()):
        xs = sorted({x for d in mean.values() for x in d})
        return [("lower bound", {x: min(mean[ln][x] for ln in labels if x in mean[ln]) for x in xs})]
    return [(f"lower bound ({ln})", mean[ln]) for ln in labels]


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
    for label, d in result.bounds():
        xs = sorted(d)
        ax.plot(xs, [d[x] for x in xs], color="black", linestyle="--", linewidth=1.0, label=label)
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


_EXTRA_STYLES = ("--", "-.", (0, (4, 1, 1, 1, 1, 1)))  # rollout, whittle, amortized: dashed, dash-dot, dash-dot-dot


def _colour(i: int, n: int) -> Any:
    """Workload i's colour: matplotlib's ten, or tab20's twenty when there are more than ten."""
    if n <= 10:
        return f"C{i}"
    import matplotlib

    return matplotlib.colormaps["tab20"](i % 20)


def _plot_beyond(result: SweepResult, path: Path, plt: Any) -> None:
    """One line per workload: the default's lateness over the best paper configuration's."""
    curves = result.all_curves()
    ratios = beyond_ratios(curves)
    extra = _extra_lines(result)
    style = {label: _EXTRA_STYLES[j % len(_EXTRA_STYLES)] for j, label in enumerate(extra)}
    fig, ax = plt.subplots(figsize=(7.0, 4.6), dpi=110)
    markers = "osD^vx*+<>p"
    for i, (wl, row) in enumerate(ratios.items()):
        xs = sorted(row)
        color = _colour(i, len(ratios))
        ax.plot(xs, [row[x][0] for x in xs], marker=markers[i % len(markers)], label=wl, linewidth=1.3,
                markersize=4, color=color)
        for label in extra:  # a line beyond the paper's: dashed, the workload's colour
            other = beyond_ratios({wl: curves[wl]}, label)[wl]
            ox = [x for x in xs if x in other]
            ax.plot(ox, [other[x][0] for x in ox], linestyle=style[label], linewidth=1.0, color=color,
                    marker=markers[i % len(markers)], markersize=3, markerfacecolor="none")
        bnd = dict(result.bounds(wl)).get("lower bound", {})
        if bnd:  # no schedule does better (sim.bound): dotted, over the same best paper line
            bx = [x for x in xs if bnd.get(x)]
            ax.plot(bx, [bnd[x] / curve_at(curves[wl], row[x][1])[x] for x in bx], linestyle=":", linewidth=1.0,
                    color=color)
    for label in extra:
        ax.plot([], [], linestyle=style[label], color="gray", label=f"{label} (each workload's colour)")
    if any(dict(result.bounds(wl)).get("lower bound") for wl in ratios):
        ax.plot([], [], linestyle=":", color="gray", label="lower bound (sim.bound)")
    ax.axhline(BEYOND_POINT_MAX, color="red", linestyle="--", linewidth=1, label=f"{BEYOND_POINT_MAX} (every point)")
    if result.experiment.gain is not None:
        gain, of = result.experiment.gain
        ax.axhline(gain, color="green", linestyle=":", linewidth=1, label=f"{gain} ({of})")
    ax.set_yscale("log")
    ax.set_xlabel("utilization U (offered work / capacity, slowdowns included)")
    ax.set_ylabel("line / best paper configuration (relative lateness)" if extra else
                  "default / best paper configuration (relative lateness)")
    holds, why = result.verdict()
    ax.set_title(f"{result.experiment.title}", fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2)
    ax.text(0.99, 0.01, f"{result.events:,} events/point, {result.seeds} seed(s)", transform=ax.transAxes,
            ha="right", va="bottom", fontsize=7, color="gray")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _extra_lines(result: SweepResult) -> list[str]:
    """The labels of the lines that are neither the paper's nor the default (rollout, whittle,
    amortized) and that the sweep ran (a CSV from before a line was added has no rows of it)."""
    paper, ran = {ln.label for ln in PAPER_LINES}, {r["line"] for r in result.rows}
    return [ln.label for ln in result.experiment.lines
            if ln.label not in paper and ln.label != DEFAULT_LABEL and ln.label in ran]


def _per_point(result: SweepResult) -> list[str]:
    """Per workload and U, relative lateness (mean over seeds): the default, each line beyond the
    paper's (with its ratio to the best paper line), the best paper line and the lower bound."""
    extra = _extra_lines(result)
    if not extra:
        return []
    curves = result.all_curves()
    ratios = {label: beyond_ratios(curves, label) for label in [DEFAULT_LABEL, *extra]}
    out = ["Per point, relative lateness (each line's ratio to the best paper configuration):", "",
           "| workload | U | " + " | ".join([DEFAULT_LABEL, *extra]) + " | best paper configuration | lower bound |",
           "|---|---|" + "---|" * (len(extra) + 3)]
    for wl, row in ratios[DEFAULT_LABEL].items():
        bnd = dict(result.bounds(wl)).get("lower bound", {})
        for x, (_, best) in sorted(row.items()):
            cells = [f"{curve_at(curves[wl], label)[x]:.3f} ({ratios[label][wl][x][0]:.3f})"
                     if x in ratios[label][wl] else "" for label in [DEFAULT_LABEL, *extra]]  # (a CSV without it)
            out.append(f"| {wl} | {x:g} | " + " | ".join(cells) + f" | {curve_at(curves[wl], best)[x]:.3f} ({best}) | "
                       + (f"{bnd[x]:.3f}" if bnd.get(x) else "") + " |")
    for label in extra:
        pts = [(r, wl, x) for wl, row in ratios[label].items() for x, (r, _) in row.items()]
        if not pts:
            continue
        within = sum(1 for r, _, _ in pts if r <= BEYOND_POINT_MAX)
        geo = math.exp(sum(math.log(r) for r, _, _ in pts) / len(pts))
        worst = max(pts)
        out.append(f"\n{label} / best paper configuration: within {BEYOND_POINT_MAX} at {within} of {len(pts)} "
                   f"points (worst {worst[0]:.3f}, {worst[1]} U={worst[2]:g}), geometric mean {geo:.3f}.")
    return [*out, ""]


def _header(xs: list[float]) -> list[str]:
    """The head of a workload × U table."""
    return ["| workload | " + " | ".join(f"U={x:g}" for x in xs) + " |", "|---|" + "---|" * len(xs)]


def _ratio_table(ratios: dict[str, dict[float, tuple[float, str]]], xs: list[float]) -> list[str]:
    """Workload × U: one line's lateness over the best paper configuration's."""
    return [*_header(xs),
            *(f"| {wl} | " + " | ".join(f"{row[x][0]:.3f}" if x in row else "" for x in xs) + " |"
              for wl, row in ratios.items())]


def _summary_beyond(result: SweepResult) -> str:
    exp = result.experiment
    holds, why = result.verdict()
    ratios = beyond_ratios(result.all_curves())
    xs = sorted({x for row in ratios.values() for x in row})
    lines = _ratio_table(ratios, xs)
    for label in _extra_lines(result):  # beside the default's: each line beyond the paper's, not judged
        lines += ["", f"{label} / best paper configuration (shown, not judged):", "",
                  *_ratio_table(beyond_ratios(result.all_curves(), label), xs)]
    best = _header(xs)
    for wl, row in ratios.items():
        c = result.curves(wl)
        best.append(f"| {wl} | " + " | ".join(
            f"{curve_at(c, row[x][1])[x]:.3g} ({row[x][1]})" if x in row else "" for x in xs) + " |")
    over = []
    for wl, row in ratios.items():
        c, bnd = result.curves(wl), dict(result.bounds(wl)).get("lower bound", {})
        if bnd:
            over.append(f"| {wl} | " + " | ".join(
                f"{curve_at(c, row[x][1])[x]:.3g} / {bnd[x]:.3g} = {curve_at(c, row[x][1])[x] / bnd[x]:.2f}"
                if x in row and bnd.get(x) else "" for x in xs) + " |")
    bound_part = ["Best paper configuration over the lower bound (sim.bound), both relative to the ideal run "
                  "(best / bound = ratio):", "", "| workload | " + " | ".join(f"U={x:g}" for x in xs) + " |",
                  "|---|" + "---|" * len(xs), *over, ""] if over else []
    return "\n".join([
        f"# {exp.title} (`{exp.name}`)", "", exp.claim, "",
        f"Verdict: the target **{'holds' if holds else 'does NOT hold'}** in this run. {why}", "",
        "Default / best paper configuration (relative lateness ratio; < 1: the default is better):", "",
        *lines, "", "Best paper configuration's relative lateness (and which):", "", *best, "", *bound_part,
        *_per_point(result),
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
    for label, d in result.bounds():  # no schedule on the figure's tracks does better (sim.bound)
        body.append(f"| *{label}* | " + " | ".join(f"{d[x]:.3g}" if x in d else "" for x in xs) + " |")
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


def stderr_progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
