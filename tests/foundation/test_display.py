"""The words and numbers every view shares (metatune.display)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from metatune.deadlines import deadline_outcome, duration
from metatune.display import (
    beside_baseline,
    chance_baseline,
    study_state,
    trial_label,
    trial_outcome,
)


def test_an_early_stop_never_reads_completed() -> None:
    assert trial_outcome("completed") == "completed"
    assert trial_outcome("completed", early_stopped=True) == "early-stopped"
    assert (
        trial_outcome("completed", early_stopped=True, stop_reason="plateau", steps=40)
        == "early-stopped (plateau, step 40)"
    )
    assert trial_outcome("failed: out_of_memory", early_stopped=True) == "failed: out_of_memory"


def test_a_study_tells_no_more_trials_from_finished() -> None:
    assert study_state(None, 2) == "requesting trials"
    assert (
        study_state("budget", 2) == "no more trials will be requested (budget); 2 still to finish"
    )
    assert study_state("budget", 0) == "finished (budget)"


def test_a_finished_study_says_whether_it_met_its_deadline() -> None:
    deadline = datetime(2026, 3, 1, 12, tzinfo=UTC)
    met = deadline_outcome(deadline, [deadline - timedelta(hours=1), deadline])
    assert met.met and study_state("budget", 0, met) == "finished (budget), met its deadline"
    late = deadline_outcome(deadline, [deadline, deadline + timedelta(hours=2, minutes=6)])
    assert study_state("budget", 0, late) == (
        "finished (budget) after its deadline (1 trial late, by 2 h 06 min)"
    )
    assert late.cell() == "1 late, by 2 h 06 min" and late.late_by_s == 7560
    assert study_state("budget", 2, late) == (
        "no more trials will be requested (budget); 2 still to finish; "
        "1 trial late, by 2 h 06 min so far"
    )
    two = deadline_outcome(
        deadline, [deadline + timedelta(minutes=5), deadline + timedelta(days=1)]
    )
    assert two.cell() == "2 late, by up to 1 d 0 h" and two.late == 2
    assert [duration(timedelta(seconds=s)) for s in (0, 59, 60, 3599, 3600, 90061)] == [
        "0 s",
        "59 s",
        "1 min",
        "59 min",
        "1 h 00 min",
        "1 d 1 h",
    ]


def test_an_accuracy_stands_beside_its_majority_baseline() -> None:
    assert beside_baseline(0.733, 0.6) == "0.733 (majority 0.600)"
    assert beside_baseline(0.317, 0.4) == "0.317 (below majority 0.400)"
    assert beside_baseline(0.4, 0.4) == "0.400 (below majority 0.400)"  # ties do not beat it
    assert beside_baseline(0.5, None) == "0.500" and beside_baseline(None, 0.5) == "-"


def test_an_accuracy_stands_beside_chance_too() -> None:
    assert beside_baseline(0.733, 0.6, 0.25) == "0.733 (majority 0.600, chance 0.250)"
    assert beside_baseline(0.317, 0.4, 0.25) == "0.317 (below majority 0.400, chance 0.250)"
    assert beside_baseline(0.2, 0.4, 0.25) == "0.200 (below majority 0.400, below chance 0.250)"
    assert beside_baseline(0.8, None, 0.5, digits=4) == "0.8000 (chance 0.5000)"
    # chance is 1 / the classes the profiler counted; a causal LM (0 classes) has none
    assert [chance_baseline(n) for n in (4, 2, 0, None)] == [0.25, 0.5, None, None]


def test_trials_are_numbered_from_one() -> None:
    assert [trial_label(i) for i in (0, 1, None)] == ["#1", "#2", "#?"]
