"""Each metric's range, and the scale on which a study's results meet the prior.

A study's raw results are mapped to the prior by an affine map (:mod:`.normalise`); in metric units
that map extrapolates past the metric's range (an accuracy of 1.29). So results are first put on
a scale that is unbounded where the metric is bounded — the logit of accuracy, F1 or BLEU / 100,
the log of a distance from a one-sided bound (perplexity >= 1, loss >= 0) — the affine map is
fitted there, and predictions come back through the inverse, which lands inside the range by
construction. Metrics without a known range keep the identity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# closest a bounded result may come to its bound on the model's scale (logit(0.999) = 6.9)
EDGE = 1e-3


@dataclass(frozen=True)
class MetricScale:
    """``low`` / ``high``: the metric's bounds (``None``: unbounded on that side)."""

    low: float | None = None
    high: float | None = None

    def to_model(self, value: float) -> float:
        low, high = self.low, self.high
        if low is not None and high is not None:
            u = min(max((value - low) / (high - low), EDGE), 1.0 - EDGE)
            return math.log(u / (1.0 - u))
        if high is not None:
            return -math.log(max(high - value, EDGE))
        if low is not None:
            return math.log(max(value - low, EDGE))
        return value

    def to_metric(self, z: float) -> float:
        low, high = self.low, self.high
        if low is not None and high is not None:
            return low + (high - low) / (1.0 + math.exp(-max(min(z, 700.0), -700.0)))
        if high is not None:
            return high - math.exp(-max(min(z, 700.0), -700.0))
        if low is not None:
            return low + math.exp(max(min(z, 700.0), -700.0))
        return z

    def interval(self, mean: float, sd: float) -> tuple[float, float]:
        """A prediction ``mean ± sd`` on the model's scale in metric units: the value at the mean,
        and half the width of the ±1 sd interval (which the inverse keeps inside the range)."""
        return self.to_metric(mean), (self.to_metric(mean + sd) - self.to_metric(mean - sd)) / 2


SCALES: dict[str, MetricScale] = {
    "accuracy": MetricScale(0.0, 1.0),
    "f1": MetricScale(0.0, 1.0),
    "macro_f1": MetricScale(0.0, 1.0),
    "bleu": MetricScale(0.0, 100.0),
    "neg_perplexity": MetricScale(high=-1.0),
    "neg_val_loss": MetricScale(high=0.0),
}


def metric_scale(metric_name: str) -> MetricScale:
    """The scale of ``metric_name``; the identity for a metric whose range is not known."""
    return SCALES.get(metric_name, MetricScale())
