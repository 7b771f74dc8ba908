"""A solver's time limit bounds each run, however long the solver has run before: HiGHS compares
``time_limit`` with the run time the ``Highs`` object has summed over all its runs, so a
long-lived solver given a fixed limit stopped every run at once after its first seconds of solving
(the service's timing LP answered "time limit" after 0 iterations). Measured with a fixed 0.5 s
limit on this loop: stopped at its 879th run."""

from __future__ import annotations

import highspy

from metatune_scheduler.domain.highs_builder import solve_relaxation

from .instances import hand_instance

LIMIT_S = 0.5  # each LP here takes about a millisecond


def test_each_run_gets_its_limit_after_the_solver_has_run_longer_than_it() -> None:
    instance = hand_instance()
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    runs = 0
    while highs.getRunTime() <= 2 * LIMIT_S:  # the solver's own clock, summed over its runs
        assert solve_relaxation(highs, instance, LIMIT_S).optimal, f"run {runs}"
        runs += 1
    assert runs > 1
