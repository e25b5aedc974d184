"""`freshet sim run|experiment` (README.md): one simulation, or one of the paper's figures.

    freshet sim run --config FILE [--policy P] [--partitioner X] [--tracks N] [--inheritance I]
                    [--chop C|none|auto] [--autotune off|apply] [--events N] [--seed S] [--trace FILE] [--write-trace FILE] [--json]
    freshet sim tune --config FILE [--trace FILE] [--events N] [--tracks 4,6] [--workers W] [--json]
    freshet sim experiment NAME [--out DIR] [--events N] [--seeds K] [--workers W]
    freshet sim experiment --list
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, get_args

from warehouse.config import Inheritance, Partitioner, Policy, load_config, parse_config
from warehouse.errors import ConfigError

__all__ = ["add_arguments", "main", "positive_float"]

# the config schema's own choices, so the CLI never drifts from it
POLICIES = get_args(Policy)
PARTITIONERS = get_args(Partitioner)
INHERITANCE = get_args(Inheritance)


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0 (also the diagnostic scripts')."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return v


def _chop(text: str) -> float | str | None:
    """--chop: as `scheduler.chop` reads it (warehouse.config.parse_chop)."""
    from warehouse.config import parse_chop

    try:
        return parse_chop(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--chop takes c ≥ 1, 'none' or 'auto', got {text!r}") from None


def _track_list(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected track counts like 4,6,8, got {text!r}") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"expected track counts like 4,6,8, got {text!r}")
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="sim_command", metavar="{run,tune,experiment}", required=True)
    run = sub.add_parser("run", help="simulate one workload (a config file, optionally a recorded trace)",
                         description="Simulate a workload with the daemon's Scheduler (§4.1) and report its "
                                     "relative lateness against the no-contention ideal.")
    run.add_argument("--config", required=True, help="the Freshet YAML config (streams, tables, scheduler, sim)")
    run.add_argument("--policy", choices=POLICIES, help="basic algorithm (§3.1)")
    run.add_argument("--partitioner", choices=PARTITIONERS, help="track partitioner (§3.2)")
    run.add_argument("--tracks", type=_positive_int, help="number of tracks N")
    run.add_argument("--inheritance", choices=INHERITANCE, help="priority inheritance (§3.3)")
    run.add_argument("--chop", type=_chop, default=argparse.SUPPRESS, metavar="C",
                     help="update chopping c (§3.4), 'none', or 'auto' (chop only when it pays)")
    run.add_argument("--k", type=float, help="Proportional clustering constant (§3.2.3)")
    run.add_argument("--allocation", choices=("basic", "all"), help="Proportional allocation M (§3.2.3)")
    run.add_argument("--aggressive", action=argparse.BooleanOptionalAction, default=None,
                     help="aggressive promotion (§3.2.2, §3.2.3 step e)")
    run.add_argument("--autotune", choices=("off", "apply"),
                     help="simulate the daemon's tuner (sim.selftune; default: apply when policy, partitioner "
                          "and chop are auto)")
    run.add_argument("--events", type=_positive_int, help="scheduler events to simulate (default: sim.events)")
    run.add_argument("--utilization", type=positive_float, metavar="U",
                     help="scale the tables' costs (α, β) so that U is this (§4.1), as an experiment's point does")
    run.add_argument("--seed", type=int, default=0, help="random seed (same seed, same output)")
    run.add_argument("--trace", help="replay arrivals (and measured durations) from a JSON-lines trace")
    run.add_argument("--write-trace", metavar="FILE", help="record this run's arrivals and jobs as a trace")
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.set_defaults(_sim=_run)

    tune = sub.add_parser("tune", help="rank candidate scheduler settings on a workload or a trace",
                          description="Simulate the config's workload (or a trace the daemon wrote) under "
                                      "candidate settings — policy, partitioner, k, allocation, aggressive, "
                                      "chop, tracks — in parallel, and print the best by predicted weighted "
                                      "staleness with a table of the runners-up.")
    tune.add_argument("--config", required=True, help="the Freshet YAML config")
    tune.add_argument("--trace", help="replay arrivals (and measured durations) from a JSON-lines trace")
    tune.add_argument("--events", type=_positive_int, default=20_000,
                      help="scheduler events per candidate without a trace (default: 20000)")
    tune.add_argument("--tracks", type=_track_list, help="track counts to try, e.g. 4,6,8 (default: the config's)")
    tune.add_argument("--seed", type=int, default=1, help="random seed shared by every candidate")
    tune.add_argument("--workers", type=_positive_int, help="worker processes (default: all cores)")
    tune.add_argument("--top", type=_positive_int, default=10, help="runners-up to show (default: 10)")
    tune.add_argument("--quiet", action="store_true", help="no progress on stderr")
    tune.add_argument("--json", action="store_true", help="print the ranking as JSON")
    tune.set_defaults(_sim=_tune)

    exp = sub.add_parser("experiment", help="reproduce one of the paper's figures (§4) as CSV + PNG",
                         description="Reproduce an experiment of the paper's §4 (Figs. 4-11) as a utilization "
                                     "sweep: CSV, PNG plot and a Markdown summary with the verdict.")
    exp.add_argument("name", nargs="?", help="experiment name (see --list)")
    exp.add_argument("--list", action="store_true", help="list the experiments")
    exp.add_argument("--out", default="out/experiments", help="output directory (default: out/experiments)")
    exp.add_argument("--events", type=_positive_int, help="events per point (paper: 1000000)")
    exp.add_argument("--seeds", type=_positive_int, help="seeds per point (averaged)")
    exp.add_argument("--workers", type=_positive_int, help="worker processes (default: all cores)")
    exp.add_argument("--quiet", action="store_true", help="no progress on stderr")
    exp.add_argument("--replot", action="store_true",
                     help="re-draw the PNG and summary from the CSV already in --out (no simulation)")
    exp.set_defaults(_sim=_experiment)


def main(args: argparse.Namespace) -> int:
    return int(args._sim(args))


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("policy", "partitioner", "tracks", "inheritance", "k", "allocation", "aggressive", "autotune"):
        v = getattr(args, name, None)
        if v is not None:
            out[name] = v
    if hasattr(args, "chop"):
        out["chop"] = args.chop
    return out


def _sets_autotune(path: str) -> bool:
    """Does the config file itself say `scheduler.autotune`? (Else it follows the algorithm.)"""
    import yaml

    data = yaml.safe_load(Path(path).read_text())
    return isinstance(data, dict) and isinstance(data.get("scheduler"), dict) and "autotune" in data["scheduler"]


def _run(args: argparse.Namespace) -> int:
    from sim.selftune import attach
    from sim.simulator import simulate
    from sim.trace import TraceWriter, read_trace

    cfg = load_config(args.config)
    over = _overrides(args)
    if over:
        data = cfg.model_dump(mode="json", by_alias=True)
        data["scheduler"] = {**data["scheduler"], **over}
        if over.keys() & {"policy", "partitioner", "chop"} and "autotune" not in over and \
                not _sets_autotune(args.config):
            del data["scheduler"]["autotune"]  # derived again: a chosen algorithm has no tuner
        flags = " ".join((f"--{'' if v else 'no-'}{k}" if isinstance(v, bool) else f"--{k} {'none' if v is None else v}")
                         for k, v in over.items())
        cfg = parse_config(data, source=f"{args.config} with {flags}")  # an error names the flag, not the file alone
    if args.utilization is not None and args.trace:
        print("freshet sim run: --utilization scales a generated workload's costs; a trace replays its own "
              "arrivals and measured durations", file=sys.stderr)
        return 2
    if args.utilization is not None:  # after the flags: U counts the tracks (sim.workload.utilization)
        from sim.workload import with_utilization

        data = with_utilization(cfg.model_dump(mode="json", by_alias=True), args.utilization)
        cfg = parse_config(data, source=f"{args.config} at U = {args.utilization:g}")
    trace = read_trace(args.trace) if args.trace else None
    fh = None
    try:
        writer = None
        if args.write_trace:
            try:
                fh = open(args.write_trace, "w")  # noqa: SIM115 - closed below
            except OSError as e:
                raise ConfigError(f"cannot write trace {args.write_trace}: {e.strerror}") from None
            writer = TraceWriter(fh, {"seed": args.seed, "config": str(args.config)})
        # the daemon's tuner when the config applies one (sim.selftune)
        result = simulate(cfg, seed=args.seed, events=args.events, trace=trace, writer=writer, tuner=attach)
    finally:
        if fh is not None:
            fh.close()
    out = result.to_json()
    out["bound"] = _bound(result) if trace is None else None  # (a replayed trace's arrivals: no bound)
    if args.json:
        print(json.dumps(out, sort_keys=True))
        return 0
    chop = "none" if out["chop"] is None else out["chop"]
    switched = bool(out.get("autotune", {}).get("switches"))
    print(f"{out['tables']} tables on {out['tracks']} track{'s' * (out['tracks'] != 1)}: {out['policy']}, "
          f"{out['partitioner']}, inheritance {out['inheritance']}, chop {chop}"
          f"{' (at the start: the tuner switched, below)' if switched else ''}")
    print(f"utilization {out['utilization']:.3f} (§4.1: U_tot·(b + ½)·mean slowdown / N; busy "
          f"{out['busy_fraction']:.1%}), {out['events']} events, "
          f"{out['jobs']} jobs ({out['chopped_jobs']} chopped), horizon {out['horizon']:.0f} s")
    print(f"relative lateness {out['relative_lateness']:.4f}  "
          f"(weighted staleness {out['weighted_staleness']:.6g} vs ideal {out['ideal_weighted_staleness']:.6g})")
    if out["bound"] is not None:
        b = out["bound"]
        rel = "—" if b["relative"] is None else f"{b['relative']:.4f}"
        ratio = "—" if b["ratio"] is None else f"{b['ratio']:.3f}"
        print(f"lower bound {b['weighted_staleness']:.6g} on {b['tracks']} tracks (no schedule does better on "
              f"average over the job durations' draws; {rel} × the ideal): the run is {ratio}× the bound")
        if "least" in b:
            print(f"  (this run's draws beat that average: with every draw at its shortest the bound is "
                  f"{b['least']['weighted_staleness']:.6g}, which no run beats; the run is {b['least']['ratio']:.3f}× it)")
        if b["loose"]:
            shown, more = b["loose"][:4], len(b["loose"]) - 4
            print(f"  (loose here: the bound does not model {', '.join(shown)}{f' and {more} more' if more > 0 else ''})")
    else:
        print("lower bound: none for a replayed trace (the bound is computed from the workload's periodic arrivals)")
    if "rollout" in out:  # policy rollout (README, "Basic algorithms"): its settings and what its rounds did
        ro, rs = out["rollout"], cfg.scheduler.rollout
        print(f"rollout: k {rs.k}, horizon {rs.horizon:g} s, terminal credit {'at ' + rs.credit if rs.terminal else 'off'}, "
              f"{rs.budget_events} events a decision, base {rs.base}: {ro['decisions']} rounds weighed, "
              f"{ro['overrides']} changed from the base rule's, {ro['fallbacks']} left to it (the budget)")
    if "autotune" in out:
        at = out["autotune"]
        moves = "; ".join(f"at {s['time']:.0f} s to {s['to']}" for s in at["switches"]) or "none"
        print(f"tuner: {at['evaluations']} evaluations ({at['simulations']} simulations), switches: {moves}")
    elif cfg.scheduler.autotune == "recommend":  # it never switches, so the run is the same without it
        print("tuner: `recommend` never switches, so it is not simulated (--autotune apply shows its switches)")
    rows = sorted(out["per_table"].items(), key=lambda kv: -kv[1]["weighted_staleness"])
    print(f"\n{'table':<24} {'priority':>9} {'avg staleness':>14} {'jobs':>7} {'mean ΔF':>9}")
    for name, t in rows[:15]:
        print(f"{name:<24} {t['priority']:>9g} {t['staleness']:>14.2f} {t['jobs']:>7} {t['mean_delta_f']:>9.2f}")
    if len(rows) > 15:
        print(f"… {len(rows) - 15} more (use --json)")
    return 0


def _bound(result: Any) -> dict[str, Any]:
    """The run's lower bound (sim.bound) over its horizon: its value, over the ideal (the unit of
    relative lateness) and the run over it."""
    from sim.bound import loose, lower_bound

    span = result.run.horizon - result.extra.get("origin", 0.0)
    b = lower_bound(result.config, horizon=span)
    out = b.to_json()
    out["loose"] = loose(result.config, span)  # what the bound leaves out, so that it may sit far below any run
    ws, ideal = b.weighted_staleness, result.ideal.weighted_staleness
    out["relative"] = float(f"{ws / ideal:.10g}") if ideal > 0 else None
    out["ratio"] = float(f"{result.run.weighted_staleness / ws:.10g}") if ws > 0 else None
    if result.run.weighted_staleness < ws:  # short draws: the bound that holds for every run, beside it
        least = lower_bound(result.config, horizon=span, draw="least").weighted_staleness
        out["least"] = {"weighted_staleness": least,
                        "ratio": float(f"{result.run.weighted_staleness / least:.10g}") if least > 0 else None}
    return out


def _tune(args: argparse.Namespace) -> int:
    from sim.progress import ProgressReporter
    from sim.tune import TIE, tune

    cfg = load_config(args.config)
    if args.trace:
        from sim.trace import read_trace

        read_trace(args.trace)  # a bad trace fails here, before any worker starts
    with ProgressReporter("tune") as progress:  # a bar with an ETA on a terminal, lines elsewhere
        res = tune(cfg, trace_path=args.trace, events=args.events, seed=args.seed, tracks=args.tracks,
                   workers=args.workers, progress=None if args.quiet else progress)
    best, mine = res.ranked[0], res.configured
    ratio, keep = res.written()
    if args.json:
        print(json.dumps({"best": best.settings, "horizon": res.horizon, "seconds": round(res.seconds, 1),
                          "written": None if mine is None else {"settings": mine.settings, "keep": keep,
                                                                "over_best": ratio if math.isfinite(ratio) else None},
                          "ranking": [{"settings": c.settings, "weighted_staleness": c.weighted_staleness,
                                       "relative_lateness": c.relative_lateness} for c in res.ranked]},
                         sort_keys=True))
        return 0
    print(f"{len(res.ranked)} candidates simulated over {res.horizon:.0f} s of "
          f"{'the trace' if args.trace else 'generated arrivals'} in {res.seconds:.0f} s")
    print(f"best: {best.label()}")
    print(f"  predicted weighted staleness {best.weighted_staleness:.6g} (relative lateness "
          f"{best.relative_lateness:.3f})")
    if mine is not None and keep:
        print(f"the config as written ({mine.label()}, rank {res.ranked.index(mine) + 1}) is {ratio:.4f}× the best: "
              f"within {TIE - 1:.0%}, one seed's noise; keep it")
    else:
        print(f"  scheduler: {json.dumps(best.settings)}")
        if mine is not None:
            print(f"the config as written: {mine.label()} — {ratio:.3f}× the best (rank {res.ranked.index(mine) + 1})")
    print(f"\n{'rank':>4}  {'relative lateness':>17}  {'× best':>7}  settings")
    for i, c in enumerate(res.ranked[: args.top], 1):
        over = c.weighted_staleness / best.weighted_staleness if best.weighted_staleness > 0 else 1.0
        print(f"{i:>4}  {c.relative_lateness:>17.3f}  {over:>7.3f}  "
              f"{c.label()}")
    return 0


def _experiment(args: argparse.Namespace) -> int:
    from sim import unseen
    from sim.experiments import EXPERIMENTS as PAPER
    from sim.experiments import load_csv, run_experiment, write_outputs
    from sim.progress import ProgressReporter

    EXPERIMENTS = {**PAPER, **unseen.EXPERIMENTS}

    if args.list or not args.name:
        for e in EXPERIMENTS.values():
            print(f"{e.name:<20} {e.figure:<8} {e.title}")
        return 0 if args.list else 2
    exp = EXPERIMENTS.get(args.name)
    if exp is None:
        import difflib

        close = difflib.get_close_matches(args.name, list(EXPERIMENTS), n=1)
        hint = f" — did you mean {close[0]!r}?" if close else ""
        print(f"freshet sim experiment: unknown experiment {args.name!r}{hint} (see --list)", file=sys.stderr)
        return 2
    if args.replot:
        csv_path = Path(args.out) / f"{exp.name}.csv"
        if not csv_path.exists():
            print(f"freshet sim experiment: --replot needs {csv_path}", file=sys.stderr)
            return 2
        result = load_csv(exp, csv_path)
        paths = write_outputs(result, Path(args.out), csv_too=False)
    else:
        with ProgressReporter(exp.name) as progress:  # a bar with an ETA on a terminal, lines elsewhere
            result = run_experiment(exp, events=args.events, seeds=args.seeds, workers=args.workers,
                                    progress=None if args.quiet else progress)
        paths = write_outputs(result, Path(args.out))
    holds, why = result.verdict()
    print(f"{exp.figure} {exp.title}: claim {'holds' if holds else 'does NOT hold'} — {why}")
    cost = unseen.tuner_cost(result)
    if cost["evaluations"]:
        print(f"  the default's tuner: {cost['evaluations']} evaluations over {cost['runs']} runs, "
              f"{cost['switches']} switches ({cost['runs_with_a_switch']} runs switched), "
              f"{cost['cpu_seconds_per_evaluation']:.2f} CPU-s per evaluation")
    for kind, p in paths.items():
        print(f"  {kind}: {p}")
    return 0
