"""The demo's plan header and its plan-against-meter line, folded from events (no platform): the
plan's expected figure beside the meter's, never "0.0 g vs 0.0 g" once every trial finished."""

from __future__ import annotations

from metatune import contracts as c
from metatune import subjects
from metatune_cli.demo.observer import DemoState, StudyView
from metatune_cli.demo.view import plan_against_meter, plan_figures, plan_header
from tests.support.samples import JOB, NOW, STUDY, samples


def _sample(kind: type) -> c.Event:
    return next(event for _, event in samples() if type(event) is kind)


def _state() -> DemoState:
    state = DemoState(studies={STUDY: StudyView(STUDY, "intents")})
    state.apply(subjects.JOBS_REQUESTED, _sample(c.JobRequested))
    state.apply(subjects.PLANS, _sample(c.Plan))
    return state


def test_a_plan_with_trials_to_run_shows_its_expected_figure_against_run_now() -> None:
    state = _state()
    assert plan_header(state) == ("plan v3: expected 210 g vs 400 g running every job now at home")
    job = state.jobs[JOB]
    assert (job.expected_g, job.first_planned) == (210.0, ["fra1"])
    assert job.estimated_wh == 2.0 * 0.7 * 1000  # the request's GPU-hours x power
    assert state.first_plan is not None and state.first_plan.estimated_wh == 1400.0


def test_once_every_trial_finished_the_header_shows_the_meter_not_an_empty_plan() -> None:
    state = _state()
    state.apply(subjects.assignments("fra1"), _sample(c.Assignment))
    state.apply(subjects.runs_completed("fra1"), _sample(c.RunCompleted))
    assert plan_header(state) == "plan v3: empty, no trial left to place yet"
    state.apply(subjects.STUDIES_STOPPED, _sample(c.StudyStopped))
    final = c.Plan(
        occurred_at=NOW,
        plan_version=4,
        horizon_start=NOW,
        entries=[],
        expected_emissions_g=0.0,
        baseline_emissions_g=0.0,
        solve_seconds=0.0,
    )
    state.apply(subjects.PLANS, final)
    header = plan_header(state)
    assert "0.0 g vs 0.0 g" not in header and "0 g vs 0 g" not in header
    assert header == (
        "plan v4: empty, every trial finished; measured 400 mg for 1.50 Wh, "
        "first planned 210 g for 1.40 kWh estimated"
    )
    figures = plan_figures(state)
    assert figures["header"] == header
    assert (figures["expected_g"], figures["estimated_wh"]) == (210.0, 1400.0)
    assert (figures["measured_g"], figures["measured_wh"]) == (0.4, 1.5)
    assert (figures["first_expected_g"], figures["first_baseline_g"]) == (210.0, 400.0)
    assert figures["first_trials"] == 1
    why = plan_against_meter(figures)
    assert why.startswith(
        "plan: 210 g expected at forecast intensity for 1.40 kWh estimated; "
        "measured 400 mg for 1.50 Wh (energy: measured 0.00107x the cost model's estimate;"
    )
    assert "150 g/kWh planned, 267 g/kWh metered, 0 of 1 trials ran away" in why
