"""The one subject -> contract look-up (``metatune.catalog``): concrete subjects, NATS filters
with ``*`` tokens, and subjects no channel carries."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

import pytest
from pydantic import ValidationError

from metatune import contracts as c
from metatune import subjects
from metatune.catalog import CATALOG, UnknownSubject, contract, contract_for, parse
from metatune.errors import MetaTuneError


@pytest.mark.parametrize(
    ("subject", "model"),
    [
        (subjects.JOBS_REQUESTED, c.JobRequested),
        (subjects.PLANS, c.Plan),
        (subjects.forecasts("DE"), c.CarbonForecast),
        (subjects.assignments("dc-1"), c.Assignment),
        (subjects.agent_status("dc_2"), c.AgentStatus),
        (subjects.runs_completed("dc-1"), c.RunCompleted),
        (subjects.runs_paused("dc-1"), c.RunPaused),
        (subjects.run_progress("dc-1", UUID(int=7)), c.RunProgress),
        (subjects.errors("trainer-agent"), c.ErrorEvent),
        (subjects.CLOCK_TICK, c.ClockTick),
        (subjects.RUNS_COMPLETED_ALL, c.RunCompleted),
        (subjects.RUNS_PROGRESS_ALL, c.RunProgress),
        (subjects.FORECASTS_ALL, c.CarbonForecast),
    ],
)
def test_each_subject_and_filter_has_its_channels_contract(subject: str, model: type) -> None:
    assert contract_for(subject) is model and contract(subject) is model


@pytest.mark.parametrize(
    "subject",
    [
        "metatune.nothing",
        "metatune.forecasts.DE.extra",  # one token too many
        "metatune.forecasts.D E",  # not a subject token
        "metatune.*.completed",  # a wildcard only stands for a variable token
        "metatune.runs.>",  # a filter of several channels has no one contract
        "other.jobs.requested",
    ],
)
def test_a_subject_no_channel_carries_has_no_contract(subject: str) -> None:
    assert contract_for(subject) is None
    with pytest.raises(UnknownSubject, match="no MetaTune contract for subject") as raised:
        contract(subject)
    assert isinstance(raised.value, MetaTuneError)


def test_every_channel_of_the_catalog_is_found_by_its_own_subject() -> None:
    for channel in CATALOG:
        example = channel.subject
        for name in channel.parameters:
            example = example.replace("{" + name + "}", "x-1")
        assert contract_for(example) is channel.model, channel.subject


def test_parse_validates_by_the_subjects_contract() -> None:
    hour = datetime(2025, 3, 14, 6, tzinfo=UTC)
    tick = c.ClockTick(hour=hour, simulated=True, occurred_at=hour)
    assert parse(subjects.CLOCK_TICK, tick.model_dump_json()) == tick
    with pytest.raises(ValidationError):
        parse(subjects.PLANS, tick.model_dump_json())
    with pytest.raises(UnknownSubject):
        parse("metatune.nothing", b"{}")
