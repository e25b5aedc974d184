"""The cost model E_i(n) = α_i + β_i·n (§2.4), re-estimated online from observed durations.

A ridge regression toward the config prior over exponentially decayed sufficient statistics:
O(1) per observation, exact for a noiseless line, sensible after a single observation (the prior
keeps α and β apart), and robust to outliers (an observation is clipped to [E/5, 5E] of the
current estimate before it counts, once a few have been seen).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CostModel"]


@dataclass(slots=True)
class CostModel:
    alpha: float
    beta: float
    learn: bool = True
    decay: float = 0.97  # weight of history per new observation (~33 effective observations)
    prior_weight: float = 0.5  # the prior counts as this many observations
    clip: float = 5.0
    n_obs: int = 0
    _alpha0: float = 0.0
    _beta0: float = 0.0
    _w: float = 0.0
    _sn: float = 0.0
    _snn: float = 0.0
    _sd: float = 0.0
    _snd: float = 0.0
    _scale: float = 1.0  # typical n, so the prior on β has the same weight as on α

    def __post_init__(self) -> None:
        self._alpha0, self._beta0 = self.alpha, self.beta

    def estimate(self, n: float) -> float:
        """E(n) in seconds."""
        return self.alpha + self.beta * max(n, 0.0)

    def observe(self, n: float, duration: float) -> None:
        """Fold in one job that loaded freshness delta n and ran for `duration` seconds."""
        if not self.learn or duration < 0:
            return
        n = max(n, 0.0)
        if self.n_obs >= 3:
            pred = max(self.estimate(n), 1e-9)
            duration = min(max(duration, pred / self.clip), pred * self.clip)
        d = self.decay
        self._w = self._w * d + 1.0
        self._sn = self._sn * d + n
        self._snn = self._snn * d + n * n
        self._sd = self._sd * d + duration
        self._snd = self._snd * d + n * duration
        self.n_obs += 1
        self._scale = max(self._sn / self._w, 1e-9)
        self._solve()

    def _solve(self) -> None:
        # minimise Σ w (d − α − βn)² + λ (α − α0)² + λ s² (β − β0)²
        lam = self.prior_weight
        lb = lam * self._scale * self._scale
        a11, a12, a22 = self._w + lam, self._sn, self._snn + lb
        b1 = self._sd + lam * self._alpha0
        b2 = self._snd + lb * self._beta0
        det = a11 * a22 - a12 * a12
        if det <= 1e-12:
            return
        alpha = (b1 * a22 - a12 * b2) / det
        beta = (a11 * b2 - a12 * b1) / det
        if beta < 0:  # durations cannot shrink with more data: refit α alone with β = 0
            beta = 0.0
            alpha = b1 / a11
        self.alpha, self.beta = max(alpha, 0.0), beta
