"""The forecaster's observation store on the real PostgreSQL: migrations, idempotent upserts,
average and marginal kept apart, bad values refused, an unreachable database named without its
password."""

from __future__ import annotations

import uuid

import pandas as pd
import pytest

from metatune.errors import DatabaseUnavailable
from metatune.settings import Settings
from metatune_forecaster.adapters.live import LiveIntensity, LiveSource
from metatune_forecaster.adapters.store import ObservationStore, Upserted
from metatune_forecaster.domain.observations import hourly, runs
from metatune_forecaster.domain.providers import ProviderUnavailable, Signal

from .trace_source import TraceSource, drop_schema, store, trace

__all__ = ["store"]

START = pd.Timestamp("2023-03-20", tz="UTC")
END = START + pd.Timedelta(days=7)


def week(zone: str = "DE") -> pd.Series:
    series = trace(zone)
    return series[(series.index >= START) & (series.index < END)]


@pytest.mark.asyncio
async def test_upsert_is_idempotent_and_a_revision_replaces_the_value(
    store: ObservationStore,
) -> None:
    values = week()
    assert await store.upsert("DE", Signal.average, "electricity-maps", values) == Upserted(168, 0)
    assert await store.upsert("DE", Signal.average, "electricity-maps", values) == Upserted(0, 0)
    revised = values.copy()
    revised.iloc[5] += 10.0
    assert await store.upsert("DE", Signal.average, "electricity-maps", revised) == Upserted(0, 1)
    stored = await store.observed("DE", Signal.average, START, END)
    pd.testing.assert_series_equal(stored, revised, check_names=False, check_freq=False)
    assert await store.migrate() == []  # re-runnable: nothing left to apply


@pytest.mark.asyncio
async def test_average_and_marginal_hours_of_a_zone_never_overwrite_each_other(
    store: ObservationStore,
) -> None:
    average = week()
    await store.upsert("DE", Signal.average, "electricity-maps", average)
    await store.upsert("DE", Signal.marginal, "watttime", average * 2)
    back = await store.observed("DE", Signal.average, START, END)
    assert back.to_numpy() == pytest.approx(average.to_numpy())
    assert await store.sources("DE", Signal.marginal, START, END) == {"watttime": 168}
    assert (await store.observed("GB", Signal.average, START, END)).empty


@pytest.mark.asyncio
async def test_provider_quirks_are_resolved_and_bad_values_refused(store: ObservationStore) -> None:
    values = week().iloc[:4]
    shuffled = pd.concat([values.iloc[::-1], values.iloc[:1] + 1.0])  # unsorted, a repeated hour
    shuffled.iloc[1] = float("nan")  # an hour the provider lacks
    assert await store.upsert("DE", Signal.average, "x", shuffled) == Upserted(3, 0)
    stored = await store.observed("DE", Signal.average, START, END)
    assert stored.iloc[0] == pytest.approx(values.iloc[0] + 1.0)  # the last of the repeats

    with pytest.raises(ValueError, match="on the hour"):
        hourly(pd.Series([1.0], index=[START + pd.Timedelta(minutes=30)]))
    with pytest.raises(ValueError, match=r">= 0 gCO2eq/kWh, not -5\.0"):
        await store.upsert("DE", Signal.average, "x", pd.Series([-5.0], index=[START]))
    with pytest.raises(ValueError, match="timezone-aware"):
        hourly(pd.Series([1.0], index=[START.tz_localize(None)]))


def test_missing_hours_become_few_requests() -> None:
    hours = pd.DatetimeIndex([START + pd.Timedelta(hours=h) for h in (0, 1, 2, 10, 11, 60)])
    assert runs(hours) == [
        (START, START + pd.Timedelta(hours=3)),
        (START + pd.Timedelta(hours=10), START + pd.Timedelta(hours=12)),
        (START + pd.Timedelta(hours=60), START + pd.Timedelta(hours=61)),
    ]
    merged = runs(hours, merge_gap_h=24)
    assert merged[0] == (START, START + pd.Timedelta(hours=12)) and len(merged) == 2
    assert runs(hours[:3], max_len_h=2) == [
        (START, START + pd.Timedelta(hours=2)),
        (START + pd.Timedelta(hours=2), START + pd.Timedelta(hours=3)),
    ]


@pytest.mark.asyncio
async def test_an_unreachable_database_is_named_without_its_password() -> None:
    url = "postgresql://forecaster:s3cret-pw@127.0.0.1:9/test"
    down = ObservationStore(url, schema=f"fc_t_{uuid.uuid4().hex[:10]}", connect_timeout_s=1.0)
    with pytest.raises(DatabaseUnavailable) as caught:
        await down.migrate()
    assert "127.0.0.1:9" in str(caught.value) and "s3cret-pw" not in str(caught.value)


def test_a_schema_name_is_checked() -> None:
    with pytest.raises(Exception, match="lower-case"):
        ObservationStore(Settings().database_url, schema="Robert'); DROP TABLE x")
    drop_schema("fc_t_never_created")  # dropping what is not there is harmless


@pytest.mark.asyncio
async def test_a_database_that_does_not_answer_is_an_outage_the_forecaster_reports() -> None:
    """LiveIntensity turns it into ProviderUnavailable: the service publishes the last good
    forecast, stale, with an error event naming the store, never the password."""
    down = ObservationStore(
        "postgresql://forecaster:s3cret-pw@127.0.0.1:9/test", connect_timeout_s=1
    )
    live = LiveIntensity(down, {"DE": LiveSource(TraceSource(), "DE")})
    with pytest.raises(
        ProviderUnavailable, match="observation store: PostgreSQL is not reachable"
    ) as caught:
        await live.history("DE", START.to_pydatetime(), 48)
    assert "s3cret-pw" not in str(caught.value)


class Garbled(TraceSource):
    """Sends one negative value and one not on the hour among the real ones."""

    async def observed(self, zone, start, end):
        values = (await super().observed(zone, start, end)).copy()
        values.iloc[3] = -40.0
        shifted = values.index[:5].append(values.index[5:6] + pd.Timedelta(minutes=30))
        return pd.concat(
            [values.iloc[:5].set_axis(shifted[:5]), values.iloc[5:6].set_axis(shifted[5:])]
        )


@pytest.mark.asyncio
async def test_a_bad_value_from_a_provider_costs_its_hour_not_the_history(
    store: ObservationStore, caplog: pytest.LogCaptureFixture
) -> None:
    live = LiveIntensity(store, {"DE": LiveSource(Garbled(), "DE")})
    history = await live.history("DE", (START + pd.Timedelta(hours=6)).to_pydatetime(), 6)
    assert history.notna().tolist() == [True, True, True, False, True, False]
    assert "2 unusable values left out (first: -40.0" in caplog.text
