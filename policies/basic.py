"""Basic algorithms (§3.1): order released jobs. Each policy is a sort key — smaller runs first.

Beyond the paper, `aoi-quadratic` orders by an index quadratic in the staleness a job removes
(`_aoi_quadratic`), `whittle` by the index of the relaxation the lower bound solves
(`whittle_index`), `amortized` by the marginal benefit per second of fixed cost (`amortized_benefit`);
`rollout` (warehouse.rollout) orders its queues by its base rule's key.

The key depends only on the job (not on the clock), so the Scheduler keeps released jobs in heaps
and recomputes a key only when that table's job changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "FIXED_FLOOR",
    "POLICIES",
    "Candidate",
    "Expected",
    "amortized_benefit",
    "choose_with_lookahead",
    "marginal_benefit",
    "policy_key",
    "policy_key_of",
    "quadratic_index",
    "set_benefit",
    "whittle_index",
]


@dataclass(slots=True, kw_only=True)
class Candidate:
    """A released job J_i as the basic algorithms see it (§3.1). Not frozen: the Scheduler builds
    one per queued job to key it, and a frozen dataclass is slower to build (object.__setattr__
    per field)."""

    table: str
    priority: float  # Ip_i, the (inherited) priority used for scheduling
    delta_f: float  # ΔF_i
    cost: float  # E_i(ΔF_i), estimated seconds
    release: float  # r_i: when ΔF_i last went from zero to nonzero
    period: float  # P_i
    seq: int  # tie-breaker: order of release
    rand: float = 0.0  # the Random policy's key (an exponential race, see _random)
    fixed: float  # what E_i(ΔF_i) costs beyond β_i per second of data: α_i, or more (`whittle_index`)

    @property
    def deadline(self) -> float:
        """r_i + P_i (§3.1)."""
        return self.release + self.period


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    """A job J_k expected to be released at `release` (Lookahead, §3.1)."""

    table: str
    release: float
    priority: float
    delta_f: float
    cost: float


def marginal_benefit(priority: float, delta_f: float, cost: float) -> float:
    """p_i ΔF_i / E_i(ΔF_i): weighted staleness removed per second of work (§3.1)."""
    return priority * delta_f / cost if cost > 0 else float("inf") if priority * delta_f > 0 else 0.0


def quadratic_index(priority: float, delta_f: float, cost: float) -> float:
    """p_i ΔF_i² / E_i(ΔF_i): the marginal benefit (§3.1) times the staleness ΔF_i the job removes.

    Beyond the paper: an age-of-information index quadratic in the staleness removed, after the
    Whittle index for weighted age of information (Kadota, Sinha, Uysal-Biyikoglu, Singh, Modiano,
    "Scheduling Policies for Minimizing Age of Information in Broadcast Wireless Networks",
    IEEE/ACM Transactions on Networking 2018), which grows with the square of the age a delivery
    resets. A load keeps the staleness ΔF lower until the table's next load, about ΔF seconds
    later if loads come as often as ΔF accrues, so the staleness-time it saves grows as ΔF² (a
    heuristic reading, not the paper's model): a large backlog ranks higher than under Max-Benefit.
    The same ΔF and E(ΔF) as Max-Benefit: `marginal_benefit` · ΔF.
    """
    return marginal_benefit(priority, delta_f, cost) * delta_f  # (an infinite benefit has p·ΔF > 0: never 0 · inf)


FIXED_FLOOR = 1e-3  # seconds: a fixed cost below it (an α learned as 0) counts as this


def _floored(fixed: float) -> float:
    return fixed if fixed > FIXED_FLOOR else FIXED_FLOOR


def whittle_index(priority: float, delta_f: float, cost: float, fixed: float) -> float:
    """p_i (½ + b_i) ΔF_i² / A_i: the track-second price at which table i's job is worth running now
    (beyond the paper). A_i is the job's fixed cost `fixed` (warehouse.nextjob.fixed_cost: α_i, or
    more for a job dearer than α_i + β_i·ΔF_i, which so ranks lower the more it costs) and
    b_i = (E_i(ΔF_i) − A_i) / ΔF_i its cost per second of data.

    The Lagrangian relaxation of the tracks' capacity (sim.bound; docs/experiments.md § The lower
    bound; here without its refinements) prices a track-second at λ and lets each table load batches
    of x seconds of data alone: per second of data it pays p(x/2 + E(x)) of staleness (the sawtooth
    of §2.3 with the job's own duration) and λ·E(x)/x of tracks. With E(x) = α + βx the best batch is
    x* = √(λα / (p(½ + β))), so a table holding ΔF wants its job at every price up to p(½ + β)ΔF²/α —
    its Whittle index (Whittle, "Restless bandits: activity allocation in a changing world", J. Appl.
    Probab. 25A, 1988); a free track goes to the highest. Against Max-Benefit's p·ΔF/E it divides by
    the fixed cost only: β·ΔF is paid whatever the batch, and only α rewards waiting; it is quadratic
    in the backlog, like `quadratic_index`.

    The index trusts the fixed cost: a table whose α is learned near 0 (warehouse.cost clamps a
    negative intercept to 0) ranks far above the others; below FIXED_FLOOR it counts as the floor.
    A cost below the fixed one (E < A) gives b = 0.
    """
    if delta_f <= 0.0:
        return 0.0
    b = (cost - fixed) / delta_f if cost > fixed else 0.0
    return priority * (0.5 + b) * delta_f * delta_f / _floored(fixed)


def amortized_benefit(priority: float, delta_f: float, fixed: float) -> float:
    """p_i ΔF_i / A_i: Max-Benefit's benefit (§3.1) per second of the job's fixed cost A_i (beyond
    the paper; A_i as in `whittle_index`: α_i, or more for a full refresh or a burst).

    Max-Benefit divides by the whole estimate E_i(ΔF_i) = α_i + β_i·ΔF_i, the time the job holds a
    track. Over a run every second of data is loaded once, so the β part is work every schedule
    does, whenever it runs; what the order changes is how many jobs pay α, the part that running a
    table later spreads over more data. This index charges a job that part only. It is linear in
    ΔF like Max-Benefit and does not level off at p/β as Max-Benefit does when a backlog grows. A
    fixed cost below FIXED_FLOOR counts as the floor (docs/experiments.md § The amortized rule).
    """
    if delta_f <= 0.0:
        return 0.0
    return priority * delta_f / _floored(fixed)


# Each key from the job's numbers (Candidate's fields, in its order); `POLICIES` reads them off
# a Candidate, `policy_key_of` takes them as they are (the Scheduler keys a queued job without
# building a Candidate, warehouse.nextjob).
def _max_benefit(priority: float, delta_f: float, cost: float, release: float, period: float, seq: int,
                 rand: float, fixed: float) -> tuple:
    """(−p·ΔF/E, seq): highest marginal benefit first; ties in release order."""
    return (-marginal_benefit(priority, delta_f, cost), seq)


def _aoi_quadratic(priority: float, delta_f: float, cost: float, release: float, period: float, seq: int,
                   rand: float, fixed: float) -> tuple:
    """(−p·ΔF²/E, seq): the highest quadratic index first (`quadratic_index`); ties in release order."""
    return (-quadratic_index(priority, delta_f, cost), seq)


def _whittle(priority: float, delta_f: float, cost: float, release: float, period: float, seq: int,
             rand: float, fixed: float) -> tuple:
    """(−p(½ + b)ΔF²/A, seq): the highest Whittle index first (`whittle_index`); ties in release order."""
    return (-whittle_index(priority, delta_f, cost, fixed), seq)


def _amortized(priority: float, delta_f: float, cost: float, release: float, period: float, seq: int,
               rand: float, fixed: float) -> tuple:
    """(−p·ΔF/A, seq): the highest benefit per second of fixed cost first (`amortized_benefit`); ties in
    release order."""
    return (-amortized_benefit(priority, delta_f, fixed), seq)


def _edf_p(priority: float, delta_f: float, cost: float, release: float, period: float, seq: int,
           rand: float, fixed: float) -> tuple:
    """(−p, r+P, seq): highest priority first, then earliest deadline (EDF-P)."""
    return (-priority, release + period, seq)


def _edf(priority: float, delta_f: float, cost: float, release: float, period: float, seq: int, rand: float,
         fixed: float) -> tuple:
    """(r+P, seq): earliest deadline first, priorities ignored (baseline)."""
    return (release + period, seq)


def _fifo(priority: float, delta_f: float, cost: float, release: float, period: float, seq: int, rand: float,
         fixed: float) -> tuple:
    """(r, seq): oldest release first (baseline)."""
    return (release, seq)


def _random(priority: float, delta_f: float, cost: float, release: float, period: float, seq: int,
            rand: float, fixed: float) -> tuple:
    """(x, seq): Random (§4.3) "chooses the next job randomly among the jobs in the released set".

    x is an exponential race: a job released when the last started job had key m draws
    x = m + Exp(1). By memorylessness every waiting job's key is then m' + Exp(1), i.i.d., for the
    current m', so the smallest key is a uniform pick among the released set at every decision —
    without redrawing every key per decision (a draw kept from release would instead let a job
    that drew a large number starve for as long as the queue is never empty).
    """
    return (rand, seq)


KeyOf = Callable[[float, float, float, float, float, int, float, float], tuple]
_KEYS: dict[str, KeyOf] = {
    "auto": _max_benefit,  # Freshet's default orders by marginal benefit (chopping and tracks do the rest)
    "max-benefit": _max_benefit,
    "lookahead": _max_benefit,  # ordered as Max-Benefit; the first pick may change, see below
    "aoi-quadratic": _aoi_quadratic,
    "whittle": _whittle,
    "amortized": _amortized,
    "edf-p": _edf_p,
    "edf": _edf,
    "fifo": _fifo,
    "random": _random,
}


def _on_candidate(key_of: KeyOf) -> Callable[[Candidate], tuple]:
    def key(c: Candidate) -> tuple:
        return key_of(c.priority, c.delta_f, c.cost, c.release, c.period, c.seq, c.rand, c.fixed)

    key.__doc__ = key_of.__doc__
    return key


POLICIES: dict[str, Callable[[Candidate], tuple]] = {name: _on_candidate(k) for name, k in _KEYS.items()}


def policy_key_of(name: str) -> KeyOf:
    """The policy's key from the job's numbers (priority, ΔF, cost, release, period, seq, rand, fixed cost)."""
    policy_key(name)  # (an unknown name: the same error)
    return _KEYS[name]


def policy_key(name: str) -> Callable[[Candidate], tuple]:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r} (one of {', '.join(POLICIES)})") from None


def choose_with_lookahead(
    ordered: Sequence[Candidate], expected: Sequence[Expected], now: float, *, max_set: int = 3, pool: int = 10
) -> Candidate:
    """Max Benefit with Lookahead (§3.1). `ordered` is by marginal benefit, best first.

    1. J_i = the released job with the highest marginal benefit.
    2. For each J_k expected within E_i of now whose marginal benefit beats J_i's, and each set S
       of released jobs with r_k − now ≤ Σ_S E_m < E_i (never idle, done before J_i would be),
       B[S] = (Σ_S p_m ΔF_m + p_k ΔF_k) / (Σ_S E_m + E_k).
    3. If max B[S] beats J_i's marginal benefit, run the best job of argmax S; else run J_i.
    Sets are drawn from the `pool` best candidates, at most `max_set` jobs each.
    """
    head = ordered[0]
    mb_i = marginal_benefit(head.priority, head.delta_f, head.cost)
    best_b, best_set = mb_i, None
    others = [c for c in ordered[1:pool] if c.cost < head.cost]
    for k in expected:
        wait = k.release - now
        if not (0 <= wait <= head.cost) or marginal_benefit(k.priority, k.delta_f, k.cost) <= mb_i:
            continue
        for subset in _subsets(others, max_set):
            total_e = sum(c.cost for c in subset)
            if not (wait <= total_e < head.cost):
                continue
            b = set_benefit(subset, k)
            if b > best_b:
                best_b, best_set = b, subset
    if best_set is None:
        return head
    return best_set[0]  # subsets keep the marginal-benefit order, so [0] is the best in S


def set_benefit(subset: Sequence[Candidate], k: Expected) -> float:
    """B[S] = (Σ_S p_m ΔF_m + p_k ΔF_k) / (Σ_S E_m + E_k): running S, then J_k (§3.1)."""
    num = sum(c.priority * c.delta_f for c in subset) + k.priority * k.delta_f
    return num / (sum(c.cost for c in subset) + k.cost)


def _subsets(items: Sequence[Candidate], max_size: int):
    from itertools import combinations

    for size in range(1, min(max_size, len(items)) + 1):
        yield from combinations(items, size)
