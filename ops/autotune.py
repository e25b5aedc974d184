"""The tuner in the daemon: every `scheduler.autotune_every` of wall time, evaluate the
recent trace (sim.autotune) in a separate process, and switch the scheduler's setting through the
daemon's one reconfigure path when a candidate wins.

It never hurts the daemon:
- the evaluation runs in its own process (multiprocessing `forkserver`, never a fork of the
  daemon with its Spark JVM threads) at the lowest CPU priority (`os.nice`), one core at most,
  with an address-space limit (`resource.setrlimit(RLIMIT_AS)`) and a CPU-time limit;
- `poll(now)` never blocks: the loop calls it on every turn; the config is serialised for the
  evaluation and the process started in a thread of its own (at 10,000 tables that is tenths of a
  second); a process past its deadline is killed; one that crashes or reports an error is counted
  and logged; when the machine is busy (load per core above `busy`) the evaluation is skipped. In
  every such case nothing changes;
- a decision is judged on one config: each config the daemon installs is a new `generation`, and a
  decision judged on a generation that is no longer in force (a reload installed another meanwhile)
  is dropped (`stale`: logged and counted), never applied over the new one;
- it reads the trace file the daemon already writes (`warehouse.trace` / `--trace`; with neither,
  the daemon keeps one for it: `trace_file`, decided again on every reload), from its end.

Metrics (on the registry passed in): `freshet_autotune_runs_total{result}`,
`freshet_autotune_predicted_staleness{setting}` (the last evaluation's mean over seeds) and
`freshet_autotune_setting_info` (the setting in force). `status()` is what `/v1/status` shows.

Wiring in the scheduler loop (ops.loop), the only caller of the Scheduler:
    tuner = AutoTuner(config, trace_file(config, opts.trace)[0], registry, reconfigure, now=time.time())
    every turn of the loop: tuner.poll(now); after a SIGHUP reload: tuner.reconfigured(config, now)
    and tuner.follow_trace(path); at stop: tuner.close(); in /v1/status: tuner.status().
`reconfigure(new)` is the daemon's reconfigure path: hand `Reconfigure(config=new)` to
`Scheduler.handle(event, now)`, dispatch the jobs it starts, and make `new` the loop's config.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Info

from sim.autotune import Rules, current_setting, with_settings
from sim.tune import label
from warehouse.config import FreshetConfig, parse_config
from warehouse.paths import local_path, state_dir
from warehouse.times import iso

__all__ = ["RESULTS", "TRACE_ROTATE", "AutoTuner", "switch", "trace_file"]

log = logging.getLogger("freshet")

# the `result` label of freshet_autotune_runs_total: what the evaluation decided (sim.autotune),
# what the daemon made of it, or why it did not finish
RESULTS = ("switch", "recommend", "keep", "cooldown", "too_few_jobs",
           "timeout", "crashed", "error", "busy", "no_trace", "failed", "stale")


TRACE_ROTATE = 64 * 2**20  # bytes: the tuner's own trace (none configured) starts a new file at this size


def trace_file(config: FreshetConfig, given: str | None) -> tuple[str | None, int | None]:
    """The trace the daemon appends to and its tuner reads, and the size it rotates at: `--trace`
    (`given`) or `warehouse.trace`, kept whole; else, while the tuner is on (`recommend`, `apply`),
    `trace.jsonl` in the daemon's state directory (warehouse.paths.state_dir), rotated at
    TRACE_ROTATE bytes, the file before kept as `.1` (the tuner reads on into it); else none."""
    if path := given or config.warehouse.trace:
        return path, None
    base = state_dir(config.warehouse.root, config.warehouse.landing, config.warehouse.state)
    if config.scheduler.autotune == "off" or base is None:
        return None, None
    return str(base / "trace.jsonl"), TRACE_ROTATE


def switch(config: FreshetConfig, settings: dict[str, Any], reconfigure: Callable[[FreshetConfig], object]) -> FreshetConfig:
    """The one way the tuner changes the daemon: `config` with its scheduler section's `settings`
    replaced (validated like a file; `autotune` and everything else kept) handed to `reconfigure`,
    the daemon's reconfigure path (warehouse.events.Reconfigure through Scheduler.handle: no job
    lost, the running jobs finish). Returns the new config; raises if it is invalid or refused."""
    new = with_settings(config, settings)
    reconfigure(new)
    return new


def config_json(config: FreshetConfig) -> str:
    """`config` as JSON text (what `parse_config` reads back), built a stream and a table at a time:
    each piece holds the interpreter's lock briefly, so the loop runs between them (one dump of
    10,000 tables holds it for tenths of a second)."""
    fields = type(config).model_fields
    head = config.model_dump(mode="json", by_alias=True, exclude={"streams", "tables"})
    parts = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()]
    for key in ("streams", "tables"):
        items = ",".join(json.dumps(x.model_dump(mode="json", by_alias=True)) for x in getattr(config, key))
        parts.append(f"{json.dumps(fields[key].alias or key)}: [{items}]")
    return "{" + ", ".join(parts) + "}"


def _child(conn: Any, config: str, trace: str, rules: dict[str, Any], now: float,
           last_switch: float | None, nice: int, memory: int | None, cpu: float | None,
           memo: dict[str, Any] | None = None) -> None:
    """The evaluation process: lower itself, bound itself, evaluate, send the decision (or the error)."""
    import resource

    try:
        os.nice(nice)
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if cpu is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (int(cpu) + 1, int(cpu) + 2))
        from sim.autotune import Memo, Rules, evaluate, read_window  # preloaded by the forkserver

        cfg = parse_config(json.loads(config), source="<autotune>")
        t0 = time.process_time()
        r = Rules(**rules)
        window = read_window(trace, cfg, cfg.scheduler.autotune_window, min_jobs=r.min_jobs, stretch=r.stretch)
        decision = evaluate(cfg, window, r, now=now, last_switch=last_switch, memo=Memo.from_json(memo))
        decision.cpu_seconds = time.process_time() - t0  # reading the trace included
        bounds = {"pid": os.getpid(), "nice": os.nice(0), "memory": resource.getrlimit(resource.RLIMIT_AS)[0],
                  "cpu": resource.getrlimit(resource.RLIMIT_CPU)[0]}
        conn.send(("ok", {**decision.to_json(), "process": bounds}))
    except BaseException as e:  # noqa: BLE001 — reported to the daemon, which goes on
        conn.send(("error", f"{type(e).__name__}: {e}"[:2000]))
    finally:
        conn.close()


class AutoTuner:
    """Runs the tuner for one daemon. `poll(now)` on every turn of its loop; `reconfigured(config,
    now)` after a reload; `status()` for the API; `close()` on shutdown."""

    def __init__(
        self,
        config: FreshetConfig,
        trace: str | None,
        registry: CollectorRegistry,
        reconfigure: Callable[[FreshetConfig], object],
        *,
        now: float,
        deadline: float = 300.0,
        memory: int | None = 2 << 30,
        busy: float | None = 1.5,
        nice: int = 19,
        seeds: int = Rules.seeds,
        context: str = "forkserver",
    ) -> None:
        self.config = config
        self.trace: str | None = None
        self.follow_trace(trace)
        self.reconfigure = reconfigure
        self.deadline, self.memory, self.busy, self.nice, self.seeds = deadline, memory, busy, nice, seeds
        self._ctx = mp.get_context(context if context in mp.get_all_start_methods() else "spawn")
        if self._ctx.get_start_method() == "forkserver":  # each evaluation forks a warm interpreter
            self._ctx.set_forkserver_preload(["ops.autotune", "sim.autotune"])
        self.since = now  # the setting in force since
        self.generation = 0  # one more for every config installed (a reload, a switch)
        self._judged: int | None = None  # the generation the running evaluation judges
        self._launching: threading.Thread | None = None  # serialising the config, starting the process
        self._launch_error: str | None = None
        self.last_switch: float | None = None
        self.last: dict[str, Any] | None = None  # the last evaluation, as logged
        self.memo: dict[str, Any] | None = None  # what the last evaluation handed on (sim.reuse), for the next
        self.next_at = now + config.scheduler.autotune_every
        self._proc: Any = None
        self._conn: Any = None
        self._started = 0.0  # monotonic
        self.runs = Counter("freshet_autotune_runs", "Tuner evaluations by result (ops.autotune)", ["result"],
                            registry=registry)
        for r in RESULTS:
            self.runs.labels(result=r)
        self.predicted = Gauge("freshet_autotune_predicted_staleness",
                               "Predicted weighted staleness Σ p ∫ S dτ over the last window, per setting "
                               "(mean over seeds)", ["setting"], registry=registry)
        self.setting = Info("freshet_autotune_setting", "The scheduler setting in force and the tuner's mode",
                            registry=registry)
        self._publish_setting()

    # ---- the loop's calls ---------------------------------------------------------------------
    @property
    def mode(self) -> str:
        return self.config.scheduler.autotune

    @property
    def running(self) -> bool:
        return self._proc is not None or self._launching is not None

    def poll(self, now: float) -> None:
        """Collect a finished evaluation, kill a late one, or start one when it is due. Never blocks."""
        if self._launching is not None:
            if self._launching.is_alive():
                return
            self._launching = None
            if self._launch_error is not None:
                error, self._launch_error = self._launch_error, None
                self._done(now, "error", {"reason": f"starting the evaluation: {error}"})
                return
        if self._proc is not None:
            self._check(now)
            return
        if self.mode == "off" or now < self.next_at:
            return
        self.next_at = now + self.config.scheduler.autotune_every
        if not self.trace or not os.path.exists(self.trace):
            self._done(now, "no_trace", {"reason": f"no trace file to replay ({self.trace or 'none configured'})"})
            return
        if self.busy is not None:
            load = os.getloadavg()[0] / (os.cpu_count() or 1)
            if load > self.busy:
                self._done(now, "busy", {"reason": f"load {load:.2f} per core is above {self.busy:g}"})
                return
        rules = dataclasses.asdict(Rules.of(self.config, self.seeds))
        self._judged = self.generation
        self._launching = threading.Thread(target=self._launch, name="freshet-autotune-start", daemon=True,
                                           args=(self.config, self.trace, rules, now, self.last_switch, self.memo))
        self._launching.start()

    def _launch(self, config: FreshetConfig, trace: str, rules: dict[str, Any], now: float,
                last_switch: float | None, memo: dict[str, Any] | None) -> None:
        """Off the loop (a thread): the config serialised, the evaluation process started."""
        try:
            recv, send = self._ctx.Pipe(duplex=False)
            proc = self._ctx.Process(target=_child, name="freshet-autotune", daemon=True,
                                     args=(send, config_json(config), trace, rules, now, last_switch,
                                           self.nice, self.memory, self.deadline, memo))
            proc.start()
            send.close()
        except Exception as e:  # noqa: BLE001 — reported by the next poll; nothing changes
            self._launch_error = f"{type(e).__name__}: {e}"
            return
        self._conn, self._started, self._proc = recv, time.monotonic(), proc

    def reconfigured(self, config: FreshetConfig, now: float) -> None:
        """The daemon installed another config (a reload): follow it. A running evaluation judges
        the config before: its decision will be dropped."""
        if label(_setting(config)) != label(_setting(self.config)):
            self.since = now
        if self.mode == "off" and config.scheduler.autotune != "off":  # turned on: a window from now
            self.next_at = now + config.scheduler.autotune_every
        self.config = config
        self.generation += 1
        self.memo = None  # another config: the next evaluation starts afresh (sim.reuse)
        self._publish_setting()

    def follow_trace(self, trace: str | None) -> None:
        """The trace file the daemon decided again (a reload: `trace_file`), read from now on."""
        local = local_path(trace) if trace else None  # the path the daemon's TraceWriter appends to
        self.trace = str(local) if local is not None else None

    def close(self) -> None:
        """Stop a running evaluation (shutdown)."""
        if self._launching is not None:
            self._launching.join(10)
            self._launching = None
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(5)
            self._conn.close()
            self._proc = self._conn = None

    def status(self) -> dict[str, Any]:
        """What `/v1/status` shows under `autotune`."""
        return {"mode": self.mode, "setting": label(_setting(self.config)), "settings": _setting(self.config),
                "since": self.since, "since_iso": iso(self.since), "running": self.running,
                "next_evaluation": None if self.mode == "off" else self.next_at, "trace": self.trace,
                "generation": self.generation, "last_decision": self.last}

    # ---- internals ----------------------------------------------------------------------------
    def _check(self, now: float) -> None:
        msg = None
        try:
            if self._conn.poll():
                msg = self._conn.recv()
        except (EOFError, OSError):  # the process died without a word
            msg = None
        if msg is None and self._proc.is_alive():
            if time.monotonic() - self._started <= self.deadline:
                return
            self._proc.kill()
            self._reap()
            self._done(now, "timeout", {"reason": f"no decision within the deadline of {self.deadline:g}s; killed"})
            return
        proc = self._proc
        self._reap()
        if msg is None:
            self._done(now, "crashed", {"reason": f"the evaluation process exited with code {proc.exitcode}"})
        elif msg[0] == "error":
            self._done(now, "error", {"reason": msg[1]})
        else:
            self._decided(now, msg[1])

    def _reap(self) -> None:
        self._proc.join(5)
        self._conn.close()
        self._proc = self._conn = None

    def _decided(self, now: float, decision: dict[str, Any]) -> None:
        judged, self._judged = self._judged, None
        if judged != self.generation:  # judged on a config a reload replaced meanwhile
            self._done(now, "stale", {**decision, "judged": judged, "reason": (
                f"judged on config generation {judged}, but a reload installed generation {self.generation} "
                f"meanwhile; dropped, not applied over it (it said: {decision['result']}: {decision['reason']})")})
            return
        result = decision["result"]
        self.memo = decision.get("memo")
        if decision.get("runs"):  # (a kept verdict reused or backed off simulated nothing: the last figures stand)
            self.predicted.clear()
            for s in [decision["current"], *decision["candidates"]]:
                self.predicted.labels(setting=s["setting"]).set(s["mean"])
        if result == "switch":
            if self.mode != "apply":
                result = "recommend"
            else:
                try:
                    self.config = switch(self.config, decision["choice_settings"], self.reconfigure)
                except Exception as e:  # noqa: BLE001 — refused: the setting in force stays
                    decision = {**decision, "reason": f"{decision['reason']}; the switch failed: "
                                                      f"{type(e).__name__}: {e}"}
                    result = "failed"
                else:
                    self.since = self.last_switch = now
                    self.generation += 1
                    self._publish_setting()
        self._done(now, result, decision)

    def _done(self, now: float, result: str, decision: dict[str, Any]) -> None:
        self.runs.labels(result=result).inc()
        predicted = {c["setting"]: c["mean"] for c in decision.get("candidates", [])}  # best first
        self.last = {**decision, "result": result, "time": now, "time_iso": iso(now)}
        extra = {"result": result, "reason": decision.get("reason", ""), "mode": self.mode,
                 "setting": label(_setting(self.config))}
        if "current" in decision:
            extra.update(current=decision["current"]["mean"], candidates=predicted, jobs=decision.get("jobs"),
                         cpu_seconds=decision.get("cpu_seconds"), runs=decision.get("runs"),
                         screen=decision.get("screen"))
        level = logging.WARNING if result in ("timeout", "crashed", "error", "failed") else logging.INFO
        log.log(level, f"autotune evaluation: {result}", extra=extra)

    def _publish_setting(self) -> None:
        s = _setting(self.config)
        self.setting.info({"mode": self.mode, "setting": label(s), **{k: str(v) for k, v in s.items()}})


def _setting(config: FreshetConfig) -> dict[str, Any]:
    return current_setting(config)
