"""The study loop's decisions, pure: which trials next, when to stop, what is fantasised."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from metatune.contracts import StopReason
from metatune.knowledge.records import RunStatus
from metatune_recommender.domain.recommender import (
    KNOWLEDGE_BASE,
    Advice,
    Recommender,
    profile_descriptors,
)
from metatune_recommender.domain.study_loop import (
    Ask,
    FinishedTrial,
    Request,
    Stop,
    StudyLoop,
    job_id_for,
)
from tests.support.samples import FEATURES


def portfolio(ask: Ask) -> Advice:
    """The empty knowledge base's answer (the cold-start portfolio), real, for ``ask``."""
    return Recommender([]).recommend(
        "all-MiniLM-L6-v2", profile_descriptors(FEATURES), ask.count, ask.observed, ask.pending
    )


def requested(loop: StudyLoop, ask: Ask, advice: Advice | None = None) -> StudyLoop:
    outcome = loop.answer(ask, advice or portfolio(ask), ei_below_threshold=False)
    assert isinstance(outcome, Request)
    return loop.after(outcome)


def done(loop: StudyLoop, index: int, metric: float | None = 0.5) -> FinishedTrial:
    run_id = job_id_for(loop.study_id, index)
    if metric is None:
        return FinishedTrial.failed(run_id)
    return FinishedTrial(
        str(run_id), loop.requested[index], metric, "accuracy", RunStatus.completed
    )


def opened(budget: int) -> StudyLoop:
    loop = StudyLoop.new(uuid.uuid4(), budget)
    ask = loop.opening()
    assert ask is not None and (ask.start, ask.count, ask.continuation) == (
        0,
        min(3, budget),
        False,
    )
    loop = requested(loop, ask)
    assert sorted(loop.requested) == list(range(min(3, budget)))
    return loop


def test_the_opening_batch_is_requested_once() -> None:
    loop = opened(5)
    assert loop.opening() is None  # a redelivered profile requests nothing
    assert (
        job_id_for(loop.study_id, 1) == job_id_for(loop.study_id, 1) != job_id_for(loop.study_id, 2)
    )


def test_each_finished_trial_frees_one_slot_until_the_budget_then_one_stop() -> None:
    loop = opened(4)
    first = [done(loop, 0)]
    ask = loop.next(first)
    assert isinstance(ask, Ask) and (ask.start, ask.count, ask.continuation) == (3, 1, True)
    assert ask.observed == [(loop.requested[0], 0.5)]
    assert ask.pending == [loop.requested[1], loop.requested[2]]  # the finished one is no fantasy
    loop = requested(loop, ask)
    assert sorted(loop.requested) == [0, 1, 2, 3]
    assert loop.next(first) is None  # the same completion redelivered: nothing twice
    later = [done(loop, 1), done(loop, 2)]
    stop = loop.next([*first, later[0]])
    assert stop == Stop(StopReason.budget, 4)
    loop = loop.after(stop)
    assert loop.stopped is StopReason.budget and loop.requested == {}  # the state shrinks
    assert loop.next([*first, *later]) is None  # stopped once: a later result changes nothing


def test_results_the_knowledge_base_already_holds_are_caught_up_not_skipped() -> None:
    loop = opened(6)
    # the event of trial 0 handled once trials 0 and 1 are both stored: two slots, none skipped
    ask = loop.next([done(loop, 0), done(loop, 1)])
    assert isinstance(ask, Ask) and (ask.start, ask.count) == (3, 2)
    loop = requested(loop, ask)
    assert sorted(loop.requested) == [0, 1, 2, 3, 4]


def test_a_failed_trial_uses_its_slot_and_is_no_observation() -> None:
    loop = opened(5)
    ask = loop.next([done(loop, 0, metric=None)])
    assert isinstance(ask, Ask) and ask.start == 3 and ask.observed == []
    assert len(ask.pending) == 2


def test_requests_never_pass_the_budget() -> None:
    loop = opened(4)
    ask = loop.next([done(loop, 0), done(loop, 1)])
    assert isinstance(ask, Ask) and (ask.start, ask.count) == (3, 1)
    wide = replace(ask, count=3)  # an advice with more trials than the budget has room for
    outcome = loop.answer(wide, portfolio(wide), ei_below_threshold=False)
    assert isinstance(outcome, Request) and [i for i, _ in outcome.trials] == [3]


def test_a_small_budget_stops_at_its_first_result() -> None:
    loop = opened(2)
    assert loop.next([done(loop, 0)]) == Stop(StopReason.budget, 2)


@pytest.mark.parametrize("source_kb", [True, False])
def test_expected_improvement_stops_only_a_continuation_from_the_knowledge_base(
    source_kb: bool,
) -> None:
    loop = opened(6)
    ask = loop.next([done(loop, 0), done(loop, 1), done(loop, 2)])
    assert isinstance(ask, Ask)
    advice = portfolio(ask)
    if source_kb:
        advice = replace(advice, source=KNOWLEDGE_BASE, best_ei=1e-6)
    outcome = loop.answer(ask, advice, ei_below_threshold=True)
    if source_kb:
        assert outcome == Stop(StopReason.expected_improvement, 3)
    else:  # the portfolio has no expected improvement: the budget goes on
        assert isinstance(outcome, Request) and outcome.trials
        assert [i for i, _ in outcome.trials] == list(range(3, 3 + len(outcome.trials)))
    opening = StudyLoop.new(uuid.uuid4(), 6).opening()
    assert opening is not None
    first = StudyLoop.new(uuid.uuid4(), 6).answer(opening, advice, ei_below_threshold=True)
    assert isinstance(first, Request)  # the opening batch never stops by EI


def test_the_loop_counts_its_finished_trials_without_waiting_for_the_knowledge_base() -> None:
    """The knowledge base's consumer is another durable: a result's event can be handled before
    the rows of earlier results are stored. The count is the loop's own, so the last result of
    the budget stops the study even when the knowledge base holds none of them yet."""
    loop = opened(5)
    for index in (0, 1):  # each handled with nothing stored
        loop = loop.counting([done(loop, index)])
        ask = loop.next(list(loop.finished.values()))
        assert isinstance(ask, Ask) and ask.start == 3 + index
        assert len(ask.observed) == 1 + index  # the earlier completion still scores
        loop = requested(loop, ask)
    loop = loop.counting([done(loop, 2, metric=None)])
    stop = loop.next(list(loop.finished.values()))
    assert stop == Stop(StopReason.budget, 5)
    assert loop.after(stop).finished == {}  # the stopped state shrinks


def test_a_counted_trial_keeps_its_score_and_takes_the_knowledge_bases() -> None:
    loop = opened(5)
    scored = done(loop, 0)
    failed_first = FinishedTrial.failed(job_id_for(loop.study_id, 0))
    # the knowledge base's row replaces an unscored record of the trial, never a scored one
    assert loop.counting([failed_first, scored]).finished == {scored.run_id: scored}
    assert loop.counting([scored, failed_first]).finished == {scored.run_id: scored}
    assert loop.counting([scored]).counting([scored]) == loop.counting([scored])  # redelivered


def test_the_state_round_trips_through_json() -> None:
    loop = opened(5).counting([])
    loop = loop.counting([done(loop, 0), done(loop, 1, metric=None)])
    again = StudyLoop.model_validate_json(loop.model_dump_json())
    assert again == loop and sorted(again.requested) == [0, 1, 2]
    assert again.finished[str(job_id_for(loop.study_id, 0))].status is RunStatus.completed


def test_a_cancelled_study_stops_once_and_requests_nothing_more() -> None:
    loop = opened(6)
    finished = [done(loop, 0), done(loop, 1)]
    stop = loop.cancel()
    assert stop == Stop(StopReason.cancelled, 3)
    loop = loop.after(stop)
    assert loop.stopped is StopReason.cancelled and loop.requested == {}
    assert loop.cancel() is None  # a redelivered cancellation stops nothing twice
    assert loop.next(finished) is None  # a trial finishing afterwards requests nothing
    assert loop.opening() is None


def test_a_study_cancelled_before_its_profile_never_opens() -> None:
    loop = StudyLoop.new(uuid.uuid4(), 0)  # no profile yet: its budget is unknown
    stop = loop.cancel()
    assert stop == Stop(StopReason.cancelled, 0)
    loop = loop.after(stop)
    assert loop.opening() is None and loop.cancel() is None


def test_a_study_stopped_already_is_not_stopped_again_by_its_cancellation() -> None:
    loop = opened(2)
    stop = loop.next([done(loop, 0)])
    assert stop == Stop(StopReason.budget, 2)
    assert loop.after(stop).cancel() is None
