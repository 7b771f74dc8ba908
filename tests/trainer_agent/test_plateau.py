"""Early stopping scores the trend: it fires on a plateau, never on the flat stretch before a late improvement."""

from __future__ import annotations

import math
import random

from metatune_trainer_agent.domain.plateau import PlateauDetector, slope


def first_stop(curve: list[float], **kwargs: float) -> int | None:
    detector = PlateauDetector(**kwargs)
    for i, value in enumerate(curve):
        if detector.update(value):
            return i
    return None


def noisy(values: list[float], scale: float, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [v + rng.gauss(0, scale) for v in values]


def test_fires_on_a_plateau_after_learning() -> None:
    curve = noisy([0.35 + 0.4 * math.exp(-i / 3) for i in range(40)], 0.002)
    stop = first_stop(curve)
    assert stop is not None and 10 <= stop < 30


def test_does_not_fire_on_a_flat_stretch_before_a_late_improvement() -> None:
    # grokking-like: flat at the starting loss for 25 evaluations, then it learns
    flat = [0.69] * 25
    late = [0.69 - 0.35 * (1 - math.exp(-i / 2)) for i in range(1, 16)]
    for seed in range(20):
        curve = noisy(flat + late, 0.003, seed)
        stop = first_stop(curve)
        assert stop is None or stop >= 25 + 5, (
            f"seed {seed}: stopped at {stop}, before the improvement"
        )


def slow_descent(seed: int) -> list[float]:
    """Learns, then keeps improving by 0.01 per evaluation under noise of the same size."""
    return noisy(
        [1.0 - 0.3 * (1 - math.exp(-i / 4)) for i in range(8)]
        + [0.7 - 0.01 * i for i in range(1, 30)],
        0.01,
        seed,
    )


def last_values_rule_stops(curve: list[float], patience: int = 4, min_delta: float = 0.005) -> bool:
    best, since = math.inf, 0
    for value in curve:
        best, since = (value, 0) if value < best - min_delta else (best, since + 1)
        if since >= patience:
            return True
    return False


def test_does_not_fire_on_a_slow_noisy_descent_where_a_last_values_rule_does() -> None:
    for seed in range(20):
        assert first_stop(slow_descent(seed), window=8) is None, f"seed {seed}"
    # the same curves defeat a plain patience rule on the last values: the trend is what keeps them alive
    assert any(last_values_rule_stops(slow_descent(seed)) for seed in range(20))


def test_state_round_trips_through_its_history() -> None:
    curve = noisy([0.35 + 0.4 * math.exp(-i / 3) for i in range(40)], 0.002)
    straight = first_stop(curve)
    assert straight is not None
    resumed = PlateauDetector(history=list(curve[:8]))
    stop = next(i for i, v in enumerate(curve[8:], start=8) if resumed.update(v))
    assert stop == straight


def test_slope_is_least_squares() -> None:
    assert slope([1.0, 2.0, 3.0]) == 1.0
    assert slope([5.0, 5.0, 5.0, 5.0]) == 0.0
    assert abs(slope([0.0, 1.0, 0.0, 1.0]) - 0.2) < 1e-12
