"""Early stopping on a validation plateau, scored on the trend of the curve.

A run stops when all three hold:

1. it has learned: the mean of the last ``window`` validation losses is at least
   ``min_learned`` (relative) below the first one (a mean, so one lucky noisy value does not
   count as learning). A curve that is still flat at its starting value is *before* learning (the
   memorisation stretch before a late improvement, as in grokking), not a plateau after it;
   stopping there is the costly mistake, so the detector never does.
2. no new best in the last ``patience`` evaluations;
3. the trend is flat: the least-squares slope over the last ``window`` evaluations, projected
   ``patience`` evaluations ahead, promises less than ``min_rel_improvement`` of the gain made
   so far. A slow but steady descent (new bests rare because of noise) keeps a negative slope
   and keeps the run going.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PlateauDetector:
    patience: int = 4
    window: int = 5
    min_rel_improvement: float = 0.01
    min_learned: float = 0.02
    history: list[float] = field(default_factory=list)

    def update(self, val_loss: float) -> bool:
        """Record one evaluation; True when the run should stop."""
        self.history.append(val_loss)
        return self.should_stop()

    def should_stop(self) -> bool:
        h = self.history
        if len(h) < max(self.window, self.patience + 1):
            return False
        recent = h[-self.window :]
        first, best = h[0], min(h)
        gain = first - sum(recent) / len(recent)
        if gain < self.min_learned * abs(first):
            return False
        best_at = len(h) - 1 - h[::-1].index(best)
        if len(h) - 1 - best_at < self.patience:
            return False
        projected_gain = -slope(recent) * self.patience
        return projected_gain < self.min_rel_improvement * gain


def slope(values: list[float]) -> float:
    """Ordinary least-squares slope of ``values`` against 0, 1, 2, ..."""
    n = len(values)
    mean_x = (n - 1) / 2
    mean_y = sum(values) / n
    sxx = sum((x - mean_x) ** 2 for x in range(n))
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(values))
    return sxy / sxx if sxx else 0.0
