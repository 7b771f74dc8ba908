"""Which hour's round runs (each once), when one overran, and how far behind the clock it is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from metatune_forecaster.domain.rounds import Rounds

H = timedelta(hours=1)
T0 = datetime(2025, 6, 2, 10, tzinfo=UTC)


def test_each_hour_runs_once_and_never_after_a_later_one() -> None:
    rounds = Rounds()
    assert rounds.claim(T0)
    assert not rounds.claim(T0)  # its tick delivered again while it runs
    assert rounds.finish(T0, T0 + 5 * timedelta(minutes=1)) is None
    assert not rounds.claim(T0)  # ... or after it ran
    assert rounds.claim(T0 + 2 * H)
    assert not rounds.claim(T0 + H)  # an older hour than one begun


def test_a_failed_round_may_run_again() -> None:
    rounds = Rounds()
    assert rounds.claim(T0)
    rounds.finish(T0, T0)
    assert rounds.claim(T0 + H)
    rounds.abandon(T0 + H)
    assert rounds.claim(T0 + H)


def test_an_overrun_and_the_lag_behind_the_clock() -> None:
    rounds = Rounds()
    assert rounds.lag(T0 + 5 * H) == timedelta(0) and not rounds.behind(T0 + 5 * H)  # none yet
    rounds.claim(T0)
    assert rounds.finish(T0, T0 + H + timedelta(minutes=20)) == timedelta(minutes=20)
    assert rounds.lag(T0 + H + timedelta(minutes=20)) == timedelta(minutes=20)
    assert not rounds.behind(T0 + 2 * H - timedelta(seconds=1))
    assert rounds.behind(T0 + 2 * H)  # the hour after the last round's began an hour ago
    rounds.claim(T0 + 3 * H)
    rounds.finish(T0 + 3 * H, T0 + 3 * H + timedelta(minutes=2))
    assert rounds.lag(T0 + 3 * H + timedelta(minutes=2)) == timedelta(0)
