"""A lower bound on priority-weighted staleness (§2.3) that no schedule of a workload on N tracks
beats: the Lagrangian relaxation of the track capacity. Pure: a function of the workload
description (Scalable Scheduling of Updates in Streaming Data Warehouses, §2-§4), no SimPy.

**One table, along the data axis.** S_i(τ) = τ − F_i(τ) (§2.3), every F_i = 0 at time 0. Each event
time y ∈ (0, H] waits from y until c(y), the first completion whose freshness reaches it, so
∫_0^H S_i dτ = ∫_0^H (min(c(y), H) − y) dy. A job j that moves F_i from f_{j−1} to f_j — its batch
x_j = f_j − f_{j−1}, ΔF of §2.4 — completes at c_j ≥ f_j + δ + d_j: its last partition arrived at
f_j + δ (`sim.delay`) and it ran d_j. Its data adds x_j·(x_j/2 + δ + d_j) — the sawtooth of Fig. 2
with the job's own duration — and with E[d_j] = c·E_i(x_j), c = b + ½, E_i(x) = α_i + β_i·x (§4.1):

    s_i(x) = x/2 + δ + c·(α_i + β_i·x)        staleness-seconds per second of data, batches of x
    u_i(x) = c·(α_i + β_i·x) / x              track-seconds per second of data

A schedule is, per table, a mixture of batches, and the jobs done by H fit on N tracks:
Σ_i Σ_j d_j ≤ N·H. Pricing a track-second at λ ≥ 0, for every λ

    D(λ) = Σ_i H · min_x [p_i·s_i(x) + λ·u_i(x)] − λ·N·H

is at most Σ_i p_i ∫ S_i dτ of any schedule (weak duality: a mixture costs at least its best
batch). The bound is max_λ D(λ), a concave search in one variable; each inner minimum is in closed
form (x* = √(λα_i / (p_i(½ + cβ_i))), clamped to the batches allowed). Without contention λ* = 0:
Σ_i p_i·H·(P_i/2 + δ + c·E_i(P_i)), the §4.1 ideal run's staleness.

**Refinements, each a valid relaxation:**
- *Batches.* A base job loads whole partitions, x ≥ P_i(1 − jitter), unless chopping (§3.4) may
  time-slice a partition (c·P_i shorter than one); a derived table's batches are its source's when
  it has one source, no granularity and no chopping; else x ≥ 0. A datum also waits for its
  partition's end: the wait per unit is at least the mix ω·X/2 + (1 − ω)·x/2 of the two (ω ∈ {0, ½,
  1}, the best per table); the head partition, shorter than X, is allowed X²/8.
- *Derived tables (§2.1, §2.2).* A derived job starts once its sources reached f_j (with
  `max_skew`, its leading source), so c_d(y) ≥ c_s(y) + d_j and c_d(y) ≥ f_j + ℓ + d_j, ℓ the least
  lag of the sources' completions (δ and b·α of each job on the path). Any θ ∈ [0, 1] of the two
  gives area_d ≥ θ·area_s + Σ_j x_j·(d_j + (1 − θ)(x_j/2 + ℓ)): a share θ of the derived table's
  priority flows to its source (of largest period) and it keeps (1 − θ) of its own sawtooth. One θ
  for all, by golden section.
- *Slowdowns (§4.1).* A job that starts while slow runs S times longer: a track does at most one
  second of normal work per normal second and 1/S per slow second, except for the job running when
  a slow period begins, which gains at most min(d, slow·(d + normal)/cycle). Those jobs are at most
  N per slow period, priced at μ ≥ 0 (a second search). A base datum arriving while slow waits for
  the normal period or runs S times longer: over arrival phases uniform on the cycle (on average
  over the stream's phase) its wait grows by ψ (`_psi`, at the shortest batch), in the partition's
  term; with the mean draw only.
- *Bursts (`sim.bursts`).* Denser data counts more in n: all the jobs' work is c·β·∫ρ over the
  loaded data — per loaded second at most the densest ρ, with a credit for the rest; the staleness
  takes the least density. With slowdowns as well, both take the least.
- *Cores (`sim.cores`).* At most min(N, cores) jobs' worth of work per second; slowdowns then only
  lengthen jobs (not modelled).
- *Finite horizon.* Data after the last completion waits until H: each table covers W ≤ H of its
  data, min_W W·φ + a(H − W)²/2, in closed form; less the head's allowance, and never below 0 (no
  table's staleness is negative: a partition longer than about twice H once took a table below).

**Assumptions** (each makes the bound lower, not higher, unless noted): arrivals are the simulator's
generated periodic partitions (§4.1; a replayed trace has no bound); E[d_j] = c·E_i(x_j), drawn when
the job starts, so the default bound is on the *expected* staleness — a run's draws scatter it by
O(1/√jobs) — while `draw="least"` (c = b, the shortest a draw can be; no ψ) holds for every run.
Track reservation, recompute jobs, maintenance and late data add work or waiting and are left out.
One job per track at a time (§3); partitions of a table are loaded in order (§2.1).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from policies.chopping import AUTO_C
from sim.workload import burst_time, periods, true_costs
from warehouse.config import FreshetConfig
from warehouse.dag import Dag

__all__ = ["DRAWS", "Bound", "loose", "lower_bound", "relaxation_key"]

Draw = Literal["mean", "least"]
DRAWS: tuple[Draw, ...] = ("mean", "least")
TUNER_CHOPS = (AUTO_C, None)  # the chops a tuner may switch to (sim.tune's grid: auto, 3, none)
_ITER = 14  # golden-section steps per multiplier (λ, μ), in log m between two grid points a factor 16 apart
_SPAN = 40  # at most this many extensions of the grid guess·4^k, |k| ≤ span
_AHEAD = 8  # λ-grid extensions evaluated in one call of D (those not reached are dropped)
_GOLDEN = 8  # golden-section steps for θ (to 2% of [0, 1])
_OMEGAS = np.array([0.0, 0.5, 1.0])  # mixtures of a datum's two waits (batch end, partition end)


@dataclass(frozen=True)
class Bound:
    """Σ p_i ∫ S_i dτ that no schedule beats (over `horizon` seconds; per second when None)."""

    weighted_staleness: float
    horizon: float | None
    tracks: int
    draw: Draw
    lam: float  # λ: what a track-second is worth, in weighted staleness, at the bound
    mu: float  # μ: what running into a slow period at full speed is worth (0 without slowdowns)
    theta: float  # θ: the share of a derived table's priority passed to its source
    batches: dict[str, float]  # x_i: the relaxation's batch per table (seconds of data per job)

    def to_json(self) -> dict[str, Any]:
        return {"weighted_staleness": _r(self.weighted_staleness), "tracks": self.tracks, "draw": self.draw,
                "lambda": _r(self.lam), "mu": _r(self.mu), "theta": _r(self.theta),
                "batches": {k: _r(v) for k, v in self.batches.items()}}


def _r(x: float) -> float:
    return float(f"{x:.10g}")


def lower_bound(cfg: FreshetConfig, *, tracks: int | None = None, horizon: float | None = None,
                draw: Draw = "mean") -> Bound:
    """The bound for `cfg` on `tracks` (default: the config's) over [0, `horizon`] of a run from
    time 0; `horizon=None`: the long-run weighted staleness per second."""
    if draw not in DRAWS:
        raise ValueError(f"draw must be one of {', '.join(DRAWS)}, got {draw!r}")
    if horizon is not None and not horizon > 0:
        raise ValueError(f"horizon must be positive, got {horizon!r}")
    rel = _Relaxation(cfg, tracks if tracks is not None else cfg.scheduler.tracks, horizon, draw)
    return rel.solve()


def loose(cfg: FreshetConfig, horizon: float | None = None) -> list[str]:
    """What of `cfg` the bound relaxes to nothing, so that it may sit far below any run even without
    contention: a base table whose period is more than half the `horizon` (its head's allowance can
    take all its share: it counts 0), a derived table's `granularity` (its batches may be any
    length), a stream's `lateness` (data that waits for late partitions), `sim.jitter` (partitions
    as short as (1 − jitter)·P_i)."""
    per = periods(cfg)
    out = [f"the period of {t.name} beside the horizon" for t in cfg.tables
           if horizon is not None and t.stream is not None and per[t.name] > horizon / 2]
    out += [f"granularity of {t.name}" for t in cfg.tables if t.granularity]
    out += [f"lateness of stream {s.name}" for s in cfg.streams if s.lateness]
    if cfg.sim.jitter > 0:
        out.append(f"sim.jitter {cfg.sim.jitter:g}")
    return out


def _chops(cfg: FreshetConfig) -> set[float | None]:
    """The values c of §3.4 a run may use: the config's, and a tuner's candidates when it applies one."""
    chop = cfg.scheduler.chop
    out: set[float | None] = {AUTO_C if chop == "auto" else chop}
    if chop == "auto":
        out.add(None)  # auto chops only while it pays
    if cfg.scheduler.autotune == "apply":
        out |= set(TUNER_CHOPS)
    return out


class _Relaxation:
    """The tables as arrays, in topological order, and the dual function D(λ, μ, θ)."""

    def __init__(self, cfg: FreshetConfig, tracks: int, horizon: float | None, draw: Draw) -> None:
        sim = cfg.sim
        dag = Dag.from_config(cfg)
        per, costs = periods(cfg), true_costs(cfg)
        by_name = {t.name: t for t in cfg.tables}
        self.names = list(dag.order)
        idx = {n: i for i, n in enumerate(self.names)}
        n = len(self.names)
        self.horizon = horizon
        self.tracks = tracks
        self.draw = draw
        self.c = sim.b + 0.5 if draw == "mean" else sim.b
        chops = [c for c in _chops(cfg) if c is not None]
        sliceable = bool(chops) and min(chops) < 1.0 + sim.jitter + 1e-9  # a partition longer than c·P_i
        chopped = bool(chops)
        span = max(0.0, 1.0 - sim.jitter)  # the shortest partition, in periods
        p, alpha, beta = np.empty(n), np.empty(n), np.empty(n)
        sawtooth, xmin, lag = np.zeros(n), np.zeros(n), np.zeros(n)
        done_lag: dict[str, float] = {}  # least lag of a table's completions behind its data
        derived = np.zeros(n, dtype=bool)  # a derived table that passes a share θ of its priority on
        is_base = np.zeros(n, dtype=bool)
        flows: list[tuple[int, int, float]] = []  # (derived, source, share of the flow)
        for name in self.names:
            i, t = idx[name], by_name[name]
            p[i] = t.priority
            alpha[i], beta[i] = costs[name]
            if t.stream is not None:
                is_base[i] = True
                sawtooth[i] = span * per[name]
                xmin[i] = 0.0 if sliceable else sawtooth[i]
                lag[i] = sim.delay
            else:
                srcs = list(t.sources)
                # every source reached f_j before the job (§2.2) — with `max_skew`, only the leading one
                most = max if not t.max_skew else min
                sawtooth[i] = most(sawtooth[idx[s]] for s in srcs)
                one = len(srcs) == 1 and t.granularity is None and not chopped
                xmin[i] = xmin[idx[srcs[0]]] if one else 0.0
                lag[i] = most(done_lag[s] for s in srcs)
                top = max(per[s] for s in srcs)
                heirs = [s for s in srcs if per[s] == top] if not t.max_skew or len(srcs) == 1 else []
                flows += [(i, idx[s], 1.0 / len(heirs)) for s in heirs]
                derived[i] = bool(heirs)  # (θ passes its priority to them)
            done_lag[name] = lag[i] + sim.b * alpha[i]
        self.p, self.alpha, self.beta, self.sawtooth, self.lag = p, alpha, beta, sawtooth, lag
        self.derived = derived
        self.flows = sorted(flows, key=lambda f: -f[0])  # dependents before their sources
        self.lo = np.maximum(xmin, 1e-9 * max(per.values()))
        self.hi = float(horizon) if horizon is not None else 1e9 * max(per.values())
        self.lo = np.minimum(self.lo, self.hi)
        # slowdowns: a track's work per second, and the full-speed runs into slow periods (§4.1)
        sd = sim.slowdown
        self.cores = sim.cores
        n_eff = min(tracks, sim.cores) if sim.cores is not None else tracks
        self.slowed = sim.cores is None and sd.slow > 0 and sd.factor != 1.0
        self.S, self.tn, self.ts = sd.factor, sd.normal, sd.slow
        self.tc = sd.normal + sd.slow
        if self.slowed:
            if horizon is None:
                self.cap = n_eff * (self.tn + self.ts / self.S) / self.tc
                self.slots = tracks / self.tc
            else:
                slow = burst_time(horizon, self.tn, self.tc)
                self.cap = n_eff * (horizon - slow + slow / self.S)
                self.slots = tracks * (math.floor((horizon - self.tn) / self.tc) + 1 if horizon > self.tn else 0)
        else:
            self.cap = n_eff * (horizon if horizon is not None else 1.0)
            self.slots = 0.0
        # bursts: the least density for the staleness, the densest per loaded second for the work
        lo_rho, hi_rho, mean_rho, integral = np.ones(n), np.ones(n), np.ones(n), np.zeros(n)
        for bu in sim.bursts:
            cyc = bu.normal + bu.slow
            for name in bu.tables:
                i = idx[name]
                f = bu.factor - 1.0
                lo_rho[i] += min(f, 0.0)
                hi_rho[i] += max(f, 0.0)
                mean_rho[i] += f * bu.slow / cyc
                if horizon is not None:
                    integral[i] += f * (burst_time(horizon - bu.offset, bu.normal, cyc)
                                        - burst_time(-bu.offset, bu.normal, cyc))
        lo_rho = np.maximum(lo_rho, 0.0)
        self.beta_s = beta * lo_rho  # in E(x) of the staleness and of a slowed track's work
        if self.slowed or not sim.bursts:
            self.beta_w, self.credit = self.beta_s, 0.0
        elif horizon is None:
            self.beta_w, self.credit = beta * mean_rho, 0.0
        else:  # Σ n_j ≥ ∫_0^H ρ − ρ_max·(H − W): ρ_max per loaded second, and a credit
            self.beta_w = beta * hi_rho
            self.credit = float(np.sum(self.c * beta * (horizon + integral - hi_rho * horizon)))

        # the slowdown in a base job's own duration (§4.1): data arriving while slow waits for a normal
        # period or runs S times longer; over the data's arrival phases (uniform over the cycle, on
        # average over the stream's phase) that adds ψ(d) ≥ ψ(c·E(x_min)) — the mean draw only
        self.partition = sawtooth.copy()  # the partition's sawtooth floor, plus 2ψ for base tables
        if self.slowed and draw == "mean":
            e_lo = alpha + self.beta_s * self.lo
            span_t = (max(sim.delay, 0.0), max(sim.delay, 0.0) + horizon) if horizon is not None else None
            psi = sum(self._psi(k * e_lo, span_t) for k in (sim.b, 1.0 + sim.b)) / 2.0  # (a chord: E over the draw)
            self.partition += np.where(is_base, 2.0 * psi, 0.0)

    def _psi(self, d: np.ndarray, span: tuple[float, float] | None) -> np.ndarray:
        """The mean extra wait of a job of duration d over the data's arrival times in `span` (None:
        the long run): arriving r before a slow period ends, a job waits for the normal period or
        runs S·d, so min((S − 1)d, r) more; exactly, cycle by cycle from time 0 (§4.1)."""
        k = (self.S - 1.0) * d

        def area(z: float | np.ndarray) -> np.ndarray:  # ∫_0^z min(k, r) dr
            return np.where(z <= k, np.square(z) / 2.0, k * z - np.square(k) / 2.0)

        def upto(t: float) -> np.ndarray:  # ∫_0^t of the extra wait of data arriving at t
            cycles, pos = divmod(t, self.tc)
            part = area(self.ts) - area(self.tc - pos) if pos > self.tn else 0.0
            return cycles * area(self.ts) + part

        if span is None:
            return area(self.ts) / self.tc
        return (upto(span[1]) - upto(span[0])) / (span[1] - span[0])

    # ---- the dual function --------------------------------------------------------------------------
    def weights(self, theta: float) -> np.ndarray:
        """Q_i: each table's priority plus the shares θ of its dependents' Q that flow to it."""
        q = self.p.copy()
        for d, s, share in self.flows:
            q[s] += theta * share * q[d]
        return q

    def dual(self, lams: np.ndarray, mu: float, theta: float) -> tuple[np.ndarray, np.ndarray]:
        """D(λ, μ, θ) at each λ of `lams`, and the batches x_i at each minimum: shapes (λ,), (λ, table).

        Per table, the larger of three valid mixtures ω ∈ {0, ½, 1} of the two lower bounds on a
        datum's wait: its batch's end (x/2 per unit) and its partition's end (X/2, plus ψ). Arrays
        are (λ, table, ω, candidate x); each λ's figures are those of a call with it alone."""
        c = self.c
        lam = lams[:, None, None]  # (λ, table, ω)
        q = self.weights(theta)
        a = q * np.where(self.derived, 1.0 - theta, 1.0)  # what the table's own sawtooth weighs
        al, bs, bw = self.alpha[:, None], self.beta_s[:, None], self.beta_w[:, None]
        lo, top = self.lo[:, None], np.full((len(q), 1), self.hi)
        qc, ac = q[:, None], a[:, None]
        om = _OMEGAS[None, :]
        slope = qc * c * bs + (1.0 - om) * ac / 2.0  # staleness per unit of data, linear in x: (table, ω)
        cands = [lo, top, _stationary(slope, lam * c * al, lo, top)]
        sigma = 1.0 - 1.0 / self.S if self.slowed else 0.0
        if self.slowed:  # a job running into a slow period gains (1 − 1/S)·d up to d = slow, less beyond
            tn, ts, tc = self.tn, self.ts, self.tc
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                xo = np.where((bs > 0) & (c > 0), (ts / max(c, 1e-300) - al) / np.where(bs > 0, bs, 1.0), np.inf)
            xoc = np.clip(xo, lo, top)
            below = lam * c * al / self.S + mu
            above = lam * c * al * (1.0 - sigma * ts / tc) - lam * sigma * ts * tn / tc + mu
            cands += [xoc, _stationary(slope, below, lo, xoc), _stationary(slope, above, xoc, top)]
        x = np.stack(np.broadcast_arrays(*cands), axis=3)
        col = (lambda v: v[:, :, None])  # noqa: E731 - per (table, ω), over the candidates
        s = (col(ac) * ((1.0 - col(om)) * x / 2.0 + col(om * self.partition[:, None] / 2.0 + self.lag[:, None]))
             + col(qc) * c * (col(al) + col(bs) * x))
        lx = lam[..., None]
        f = s + lx * (c * (col(al) / x + col(bw)))
        if self.slowed:
            d = c * (col(al) + col(bs) * x)
            f1 = s + lx * ((d - sigma * np.minimum(d, ts * (d + tn) / tc)) / x) + mu / x
            f = np.where(f1 < f, f1, f)
        k = np.argmin(f, axis=3)
        phi = np.take_along_axis(f, k[..., None], axis=3)[..., 0]
        v = self._cover(phi, ac, qc)
        j = np.argmax(v, axis=2)  # the best ω of each table: (λ, table)
        rows, tabs = np.indices(j.shape)
        value = v[rows, tabs, j].sum(axis=1) + lams * (self.credit - self.cap) - mu * self.slots
        return value, x[rows, tabs, j, k[rows, tabs, j]]

    def _cover(self, phi: np.ndarray, a: np.ndarray, q: np.ndarray) -> np.ndarray:
        """V_i = min_W W·φ + a(H − W)²/2 over how much of its data W each table covers (the data
        after the last completion waits until H), less the head's allowance; per second: all of it."""
        if self.horizon is None:
            return np.where(a > 0, 1.0, 0.0) * phi
        h, X = self.horizon, self.sawtooth[:, None]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            w = np.where(a > 0, np.clip(h - phi / np.where(a > 0, a, 1.0), 0.0, h), 0.0)
        # the head: the first partition is shorter than the rest — its sawtooth, and where batches
        # are whole partitions, its job's duration
        head = a * X**2 / 8.0 + np.where(self.lo[:, None] >= X, q * self.c * self.beta_s[:, None] * X**2 / 4.0, 0.0)
        # no table's staleness is negative: a head allowance larger than its horizon's share (a partition
        # longer than twice the horizon, a daily feed in a run of hours) leaves it 0, not below
        return np.maximum(w * phi + a * (h - w) ** 2 / 2.0 - head, 0.0)

    # ---- the search -------------------------------------------------------------------------------
    def solve(self) -> Bound:
        best: list[Any] = [-math.inf, 0.0, 0.0, 0.0, None]  # every D evaluated is a valid bound: keep the largest
        guess = {"lam": 1.0, "mu": 1.0}  # warm starts: the last optimum of each multiplier

        def over_lambda(mu: float, theta: float) -> float:
            """max_λ D(λ, μ, θ); the λ the search took are kept in its order (ties: the first)."""
            xs: dict[float, np.ndarray] = {}

            def fn(lams: list[float]) -> list[float]:
                with np.errstate(over="ignore", invalid="ignore"):  # a λ far out (∞ − ∞): not a maximum
                    v, x = self.dual(np.array(lams), mu, theta)
                xs.update(zip(lams, x, strict=True))
                return v.tolist()

            v, lam, taken = _maximise(fn, guess["lam"], ahead=_AHEAD)
            for m, d in taken:
                if d > best[0]:
                    best[:] = [d, m, mu, theta, xs[m]]
            guess["lam"] = lam or guess["lam"]
            return v

        def over_mu(theta: float) -> float:
            if not self.slowed:
                return over_lambda(0.0, theta)
            v, mu, _ = _maximise(lambda mus: [over_lambda(m, theta) for m in mus], guess["mu"])
            guess["mu"] = mu or guess["mu"]
            return v

        if self.derived.any():
            _golden(over_mu, 0.0, 1.0)
        else:
            over_mu(0.0)
        value, lam, mu, theta, x = best
        return Bound(weighted_staleness=max(0.0, value), horizon=self.horizon, tracks=self.tracks, draw=self.draw,
                     lam=lam, mu=mu, theta=theta,
                     batches={n: float(v) for n, v in zip(self.names, x, strict=True)})


def _stationary(a: np.ndarray, b: np.ndarray | float, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """argmin of a·x + b/x on [left, right] (a ≥ 0): √(b/a) clamped; the left end when b ≤ 0, the
    right end when a = 0 < b."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        root = np.sqrt(b / a)
    x = np.where(b <= 0, left, np.where(a <= 0, right, root))
    return np.minimum(np.maximum(x, left), np.maximum(left, right))


def _maximise(fn: Callable[[list[float]], list[float]], guess: float, *, ahead: int = 1,
              span: int = 3) -> tuple[float, float, list[tuple[float, float]]]:
    """max over m ≥ 0 of fn (fn: the values at a list of m, in its order): m = 0 and a grid of
    factors of 4 around `guess` (`span` each way, extended while the best is at an end), then golden
    section in log m between the best point's neighbours. The per-table choice of ω makes D only
    nearly concave, so no slope is trusted: every value is a valid bound, and the best one found is
    returned with its m and every (m, value) taken, in order. `ahead` > 1 evaluates that many of an
    extension's points in one call of fn (which must then be pure); those the search does not reach
    are not taken, so the result is the one-at-a-time search's."""
    taken: list[tuple[float, float]] = []

    def take(ms: list[float]) -> list[float]:
        vals = fn(ms)
        taken.extend(zip(ms, vals, strict=True))
        return vals

    grid = [guess * 4.0**k for k in range(-span, span + 1)]
    v0, *vals = take([0.0, *grid])
    best = (v0, 0.0)
    early: list[tuple[float, float]] = []  # evaluated ahead, not yet taken
    for n in range(_SPAN):  # the best at an end of the grid: extend it that way
        i = max(range(len(grid)), key=vals.__getitem__)
        if 0 < i < len(grid) - 1:
            break
        if not early:
            step = 4.0 if i else 0.25
            ms = [grid[i] * step]
            while len(ms) < min(ahead, _SPAN - n):
                ms.append(ms[-1] * step)
            early = list(zip(ms, fn(ms), strict=True))
        m, v = early.pop(0)
        taken.append((m, v))
        if i:
            grid.append(m)
            vals.append(v)
        else:
            grid.insert(0, m)
            vals.insert(0, v)
    i = max(range(len(grid)), key=vals.__getitem__)
    if vals[i] > best[0]:
        best = (vals[i], grid[i])
    if best[1] == 0.0 or i in (0, len(grid) - 1):
        return best[0], best[1], taken
    lo, hi = math.log(grid[i - 1]), math.log(grid[i + 1])
    r = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = hi - r * (hi - lo), lo + r * (hi - lo)
    f1, f2 = take([math.exp(x1), math.exp(x2)])
    for _ in range(_ITER):
        if f1 < f2:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + r * (hi - lo)
            (f2,) = take([math.exp(x2)])
        else:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - r * (hi - lo)
            (f1,) = take([math.exp(x1)])
    for v, m in ((f1, math.exp(x1)), (f2, math.exp(x2))):
        if v > best[0]:
            best = (v, m)
    return best[0], best[1], taken


def _golden(f: Callable[[float], float], lo: float, hi: float) -> None:
    """Golden-section search for the maximum of f on [lo, hi], ends included (f records its best)."""
    f(lo)
    f(hi)
    r = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    x1, x2 = b - r * (b - a), a + r * (b - a)
    f1, f2 = f(x1), f(x2)
    for _ in range(_GOLDEN):
        if f1 < f2:
            a, x1, f1 = x1, x2, f2
            x2 = a + r * (b - a)
            f2 = f(x2)
        else:
            b, x2, f2 = x2, x1, f1
            x1 = b - r * (b - a)
            f1 = f(x1)


def relaxation_key(cfg: FreshetConfig, horizon: float | None, tracks: int | None = None) -> str:
    """What `lower_bound` reads of `cfg`, as a string: runs with equal keys have equal bounds (the
    lines of an experiment that differ only in the policy or partitioner share one)."""
    data = cfg.model_dump(mode="json", by_alias=True)
    chops = sorted("none" if c is None else f"{c:g}" for c in _chops(cfg))
    n = tracks if tracks is not None else cfg.scheduler.tracks
    return json.dumps([data["streams"], data["tables"], data["sim"], n, chops, horizon], sort_keys=True)
