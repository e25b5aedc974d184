"""The cost model E_i(n) = α_i + β_i·n (§2.4), re-estimated online from observed durations.

A ridge regression toward the config prior over exponentially decayed sufficient statistics:
O(1) per observation, exact for a noiseless line, robust to a stalled job (an observation is
clipped to 5E of the current estimate before it counts, once a few have been seen; a job far
faster than E is not clipped: it is how a first bulk load teaches β). β is learned
only from how durations vary with n, and only from the third job on (two jobs always lie on a
line); until then, β keeps its prior and α takes the level (one slow job — a cold JVM — is
per-job overhead, not a per-second cost).

n is event time at the stream's typical rate of rows (`RowRate`): a base job that loads ten seconds
of a burst with 100× the rows is n = 1,000 s, not 10 s, so a bulk load is not mistaken for a short
job. Where a stream reports no rows (the simulator's generated workloads), n = ΔF.

Beyond the sizes a base table has run (a first load, a burst of 10,000× its usual rows), its own β
is an extrapolation from jobs of about one size — noise, 0 or many times too big — so there E(n)
goes on at a cost per row instead (`CostModel.row`, `scheduler.row_cost`): E(n) = α + β·m +
row·rate·(n − m), m the largest n it has run (decaying toward its typical n as its jobs do). Where
its jobs' sizes did vary (their spread at least their typical n), β is measured and carries on.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

__all__ = ["CostModel", "Peers", "RowRate"]


_LOG_BOUND = 460.0  # |log rows per second| at most this: e^±460 ≈ 10^±200, squares stay finite
_BOUND = 1e100  # n and durations beyond this (seconds) count as this: sums of squares stay finite


@dataclass(slots=True)
class RowRate:
    """A stream's typical rows per event-second: a decayed geometric mean over its partitions, so
    a burst of a few minutes moves it little and a lasting change of volume moves it for good."""

    decay: float = 0.99  # weight of history per partition (~100 partitions)
    rate: float | None = None  # None until a partition with rows arrives
    _log: float = 0.0

    def observe(self, rows: int, span: float) -> None:
        """A partition of `rows` rows (an int64, PartitionArrived) covering `span` event-seconds
        arrived. Its log-rate is bounded: any count over any span gives a finite, nonzero rate."""
        if rows <= 0 or not span > 0:  # an empty partition says nothing about the rate
            return
        q = rows / span
        x = math.log(q) if 0.0 < q < math.inf else _LOG_BOUND if q > 0.0 else -_LOG_BOUND
        x = _LOG_BOUND if x > _LOG_BOUND else -_LOG_BOUND if x < -_LOG_BOUND else x
        self._log = x if self.rate is None else self.decay * self._log + (1.0 - self.decay) * x
        self.rate = math.exp(self._log)

    def work(self, rows: float, span: float) -> float:
        """n of E(n) for a job loading `rows` rows over `span` event-seconds: the rows in seconds
        at the typical rate; `span` while no rows are known."""
        return span if self.rate is None else max(rows, 0.0) / self.rate


@dataclass(slots=True)
class CostModel:
    alpha: float
    beta: float
    learn: bool = True
    decay: float = 0.97  # weight of history per new observation (~33 effective observations)
    prior_weight: float = 0.5  # the prior counts as this many observations
    clip: float = 5.0
    settled: int = 3  # jobs seen before one is clipped to 5E, and before β leaves its prior
    n_obs: int = 0
    _alpha0: float = 0.0
    _beta0: float = 0.0
    _w: float = 0.0
    _sn: float = 0.0
    _snn: float = 0.0
    _sd: float = 0.0
    _snd: float = 0.0
    _sl: float = 0.0  # decayed Σ log(1 + n)
    _scale: float = 1.0  # typical n, so the prior on β has the same weight as on α
    peers: Peers | None = None  # tables on the same default prior (Peers), None: its prior is its own
    row: float = 0.0  # seconds per row beyond the sizes it has run (base tables; 0: off)
    rate: RowRate | None = None  # its stream's typical rows per second (shared, as Table.rate)
    _top: float = 0.0  # the largest n it has run, decaying toward the typical n
    _measured: bool = False  # its jobs' sizes varied enough to measure β (their spread ≥ the typical n)

    def __post_init__(self) -> None:
        self._alpha0, self._beta0 = self.alpha, self.beta

    @property
    def has_settled(self) -> bool:
        """Its E(n) is more than a prior: it is not learned (stated and kept), or has seen `settled` jobs."""
        return not self.learn or self.n_obs >= self.settled

    def estimate(self, n: float) -> float:
        """E(n) in seconds: α + β·n up to the largest n it has run, and beyond it where its jobs'
        sizes measured β; a cost per row beyond it where they did not."""
        if n > self._top and not self._measured and self.row and (r := self.rate) is not None and r.rate is not None:
            top = self._top
            return self.alpha + self.beta * top + self.row * r.rate * (n - top)
        return self.alpha + self.beta * (0.0 if n < 0.0 else n)  # max(n, 0.0) without the call

    def observe(self, n: float, duration: float, cold: bool = False) -> None:
        """Fold in one job that loaded freshness delta n and ran for `duration` seconds. A `cold`
        job (the table's first on a fresh JVM) counts only if it ran within E(n): a slow cold start
        is not the table's cost, and an estimate too high is never corrected — the table is not
        chosen again to show it cheaper — while one too low is, by its next job."""
        if not self.learn or not duration >= 0:
            return
        n = (n if n < _BOUND else _BOUND) if n > 0.0 else 0.0  # (NaN: 0) a bound no real job comes near,
        duration = duration if duration < _BOUND else _BOUND  # so the statistics never overflow
        if cold and duration > self.estimate(n):
            return
        if self.n_obs >= self.settled:
            pred = max(self.estimate(n), 1e-9)
            duration = min(duration, pred * self.clip)
        d = self.decay
        self._w = self._w * d + 1.0
        self._sn = self._sn * d + n
        self._snn = self._snn * d + n * n
        self._sd = self._sd * d + duration
        self._snd = self._snd * d + n * duration
        self._sl = self._sl * d + math.log1p(n)
        self.n_obs += 1
        # typical n: a geometric mean, so that a few bulk loads (n 10,000× the usual) do not make
        # the prior a pseudo-job of that size whose β0·n swamps what the jobs measured
        self._scale = scale = max(math.expm1(self._sl / self._w), 1e-9)
        top = scale + (self._top - scale) * d  # the range its β was measured over fades as its jobs do
        self._top = n if n > top else top
        mean = self._sn / self._w
        self._measured = self._snn / self._w - mean * mean >= scale * scale
        self._solve()
        if self.peers is not None:
            self.peers.observed(self)

    def reprior(self, alpha: float, beta: float) -> None:
        """The prior is now (α, β) (`Peers`): E(n) is it until a job is seen, then leans on it."""
        self._alpha0, self._beta0 = alpha, beta
        if self.n_obs:
            self._solve()
        else:
            self.alpha, self.beta = alpha, beta

    def _solve(self) -> None:
        # β from how durations vary with n (centred statistics, ridge toward β0); α from the mean
        # duration (ridge toward α0):
        #   β = (S_nd − W·n̄·d̄ + λs²·β0) / (S_nn − W·n̄² + λs²),  α = (W·(d̄ − β·n̄) + λ·α0) / (W + λ)
        # Jobs that all loaded about the same n cannot tell α from β: β keeps its prior and the
        # level goes to α. (Splitting one slow job between α and β — a cold JVM, a loaded
        # machine — made β of a table whose first job loaded a few seconds of data many times too big,
        # and Max-Benefit's p·ΔF/E(ΔF) ≤ p/β then starved it for good.)
        lam = self.prior_weight
        lb = lam * self._scale * self._scale
        w = self._w
        n_bar, d_bar = self._sn / w, self._sd / w
        snn = max(self._snn - w * n_bar * n_bar, 0.0)
        snd = self._snd - w * n_bar * d_bar
        # Two jobs always lie on a line: a slope through two noisy durations is noise (a priority-100
        # table's 1.05 s at n = 5 and 3.48 s at n = 10 gave β = 0.23 against its peers' 0.09, and
        # p·ΔF/E(ΔF) ≤ p/β kept it below every fresh table of its priority for good). β moves from
        # its prior from the third job on.
        if self.n_obs < self.settled:
            beta = self._beta0
        else:
            beta = (snd + lb * self._beta0) / (snn + lb) if snn + lb > 1e-12 else self._beta0
        beta = max(beta, 0.0)  # durations cannot shrink with more data
        alpha = (w * (d_bar - beta * n_bar) + lam * self._alpha0) / (w + lam)
        if alpha < 0:  # the line through the data crosses below 0: all of it is β·n
            alpha = 0.0
            beta = max(self._snd / self._snn, 0.0) if self._snn > 1e-12 else beta
        self.alpha, self.beta = alpha, beta


class Peers:
    """The cost models on the config's default prior, by kind of table (base, derived, stateful):
    each one's prior is the median α and β of the settled models of its kind (`settled` jobs or
    more) — an untried table's estimate, what a table with few jobs leans on (β is its prior until
    the third job) — or, while none of its kind is settled, of every settled model. The default
    (α = 1 s, β = 0.1) was several times a live 200-row append, and Max-Benefit's p·ΔF/E(ΔF) ≤ p/β
    kept a table still near it below every settled table of its priority: it was not chosen, so
    nothing corrected it (240 tables: priority-60 tables ran first 170 s into a 190-s run, or once at
    the start and never again; with base tables alone sharing, no band join ran at all). While no
    model is settled, the default stays."""

    __slots__ = ("_since", "kinds", "size")

    def __init__(self, kinds: list[list[CostModel]]) -> None:
        self.kinds = kinds
        self.size = sum(len(k) for k in kinds)
        self._since = 0
        for models in kinds:  # (shared from a model's next job: laying tables out changes no estimate)
            for m in models:
                m.peers = self

    def observed(self, m: CostModel) -> None:
        """`m` saw a job: the priors again when it has just settled, else once every M/4 jobs of
        the M models (a median over 1,000 is ~90 µs, the re-solves ~1 µs each)."""
        self._since += 1
        if m.n_obs != m.settled and 4 * self._since < self.size:
            return
        self._since = 0
        settled = [[x for x in models if x.n_obs >= x.settled] for models in self.kinds]
        every = [x for own in settled for x in own]
        if not every:
            return
        fallback = _medians(every)
        for models, own in zip(self.kinds, settled, strict=True):
            alpha, beta = _medians(own) if own else fallback
            for x in models:
                x.reprior(alpha, beta)


def _medians(models: list[CostModel]) -> tuple[float, float]:
    return statistics.median(x.alpha for x in models), statistics.median(x.beta for x in models)
