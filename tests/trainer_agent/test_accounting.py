"""Energy above idle, emissions per hour at that hour's intensity, and pacing by the plan."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from metatune.clock import FixedClock, SimulatedClock
from metatune.contracts import CarbonForecast, ClockAnchor
from metatune_trainer_agent.adapters.energy_counters import (
    CpuModelCounter,
    RaplCounter,
    idle_watts,
    rapl_package_zones,
)
from metatune_trainer_agent.domain.carbon import CarbonLedger, ForecastIntensity
from metatune_trainer_agent.domain.energy import EnergyMeter
from metatune_trainer_agent.domain.pacing import StepPacer

T0 = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
H = timedelta(hours=1)


def forecast(
    start: datetime, values: list[float], issued: datetime | None = None
) -> CarbonForecast:
    series = (values + [values[-1]] * 168)[:168]
    return CarbonForecast(
        occurred_at=issued or start,
        region="DE",
        issued_at=issued or start,
        start=start,
        model_version="test",
        g_per_kwh=series,
        p10_g_per_kwh=series,
        p90_g_per_kwh=series,
    )


def test_emissions_sum_energy_times_pue_times_each_hours_intensity() -> None:
    intensity = ForecastIntensity(forecast(T0, [100.0, 400.0, 50.0]))
    ledger = CarbonLedger("fra1", pue=1.25)
    ledger.add(
        T0 + timedelta(minutes=10), T0 + timedelta(minutes=40), 30.0, intensity
    )  # all in hour 0
    ledger.add(
        T0 + timedelta(minutes=30), T0 + timedelta(minutes=90), 60.0, intensity
    )  # 30 Wh in hour 0, 30 in hour 1
    ledger.add(T0 + 2 * H, T0 + 2 * H + timedelta(minutes=5), 12.0, intensity)
    hours = ledger.hours()
    assert [h.hour for h in hours] == [T0, T0 + H, T0 + 2 * H]
    assert [h.energy_wh for h in hours] == pytest.approx([60.0, 30.0, 12.0])
    expected = (60 * 100 + 30 * 400 + 12 * 50) / 1000 * 1.25
    assert ledger.emissions_g == pytest.approx(expected)
    assert ledger.energy_wh == pytest.approx(102.0)


def test_an_hour_without_forecast_is_priced_when_one_arrives_and_keeps_its_first_price() -> None:
    intensity = ForecastIntensity()
    ledger = CarbonLedger("fra1", pue=1.0)
    ledger.add(T0, T0 + timedelta(minutes=30), 10.0, intensity)
    assert ledger.hours()[0].g_per_kwh is None and ledger.emissions_g == 0.0
    intensity.update(forecast(T0, [200.0]))
    ledger.reprice(intensity)
    assert ledger.emissions_g == pytest.approx(2.0)
    intensity.update(
        forecast(T0, [999.0], issued=T0 + timedelta(minutes=5))
    )  # a later forecast for a past hour
    ledger.add(T0 + timedelta(minutes=30), T0 + timedelta(minutes=40), 10.0, intensity)
    assert ledger.hours()[0].g_per_kwh == 200.0  # priced when the energy was spent


def test_energy_charged_late_for_the_hour_before_a_new_issue_is_priced_by_the_issue_before() -> (
    None
):
    """A span that crossed the hour is charged when the run reports it; the next issue, which
    starts at the new hour, may be in by then: the hour before keeps the price of the issue that
    covered it, never none (an unpriced hour the disclosure could not total)."""
    intensity = ForecastIntensity(forecast(T0, [100.0, 300.0]))
    intensity.update(forecast(T0 + H, [500.0], issued=T0 + H))
    ledger = CarbonLedger("fra1", pue=1.0)
    ledger.add(T0 + timedelta(minutes=50), T0 + H + timedelta(minutes=10), 20.0, intensity)
    assert [h.g_per_kwh for h in ledger.hours()] == [100.0, 500.0]
    # an older issue arriving late prices nothing the newer one covers, and is kept at most KEPT
    intensity.update(forecast(T0, [999.0], issued=T0 - H))
    assert intensity(T0 + H) == 500.0 and intensity.forecast.issued_at == T0 + H
    for n in range(2, 2 + ForecastIntensity.KEPT):
        intensity.update(forecast(T0 + n * H, [50.0], issued=T0 + n * H))
    assert intensity(T0) is None  # the issues that covered it are no longer kept


def test_ledger_travels_with_a_migrating_job() -> None:
    intensity = ForecastIntensity(forecast(T0, [300.0]))
    fra = CarbonLedger("fra1", pue=1.25)
    fra.add(T0, T0 + timedelta(minutes=30), 8.0, intensity)
    osl = CarbonLedger.from_state(fra.to_state(), "osl1", pue=1.1)
    osl.add(T0 + H, T0 + H + timedelta(minutes=30), 8.0, ForecastIntensity(forecast(T0, [20.0])))
    by_site = {h.datacenter: h for h in osl.hours()}
    assert by_site["fra1"].emissions_g == pytest.approx(8 / 1000 * 1.25 * 300)
    assert by_site["osl1"].emissions_g == pytest.approx(8 / 1000 * 1.1 * 20)


def test_energy_meter_subtracts_the_idle_baseline() -> None:
    counter = CpuModelCounter(watts_per_core=10.0)
    idle = idle_watts(counter, 0.2)
    meter = EnergyMeter(counter, idle_w=idle)
    assert idle < 10.0  # sleeping uses (almost) no CPU
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    lap = meter.lap()
    assert lap.energy_wh * 3600 == pytest.approx(3.0, rel=0.5)  # 0.3 CPU-s x 10 W, less idle
    assert 0 < lap.power_w <= 10.0 * 1.2


def test_rapl_counters_are_read_across_a_wrap(tmp_path: Path) -> None:
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (tmp_path / "intel-rapl:0:0").mkdir()  # a sub-zone (core): not summed twice
    (zone / "max_energy_range_uj").write_text("1000000\n")
    (zone / "energy_uj").write_text("900000\n")
    assert rapl_package_zones(tmp_path) == [zone]
    counter = RaplCounter(tmp_path)
    (zone / "energy_uj").write_text("100000\n")  # wrapped: +200000 uJ
    assert counter.joules() == pytest.approx(0.2)


def test_pacer_runs_total_steps_over_estimated_hours_per_simulated_hour() -> None:
    clock = FixedClock(T0 + timedelta(minutes=20))
    pacer = StepPacer(clock, total_steps=100, estimated_hours=4.0)  # 25 steps per hour
    assert pacer.allowed(clock.now()) == 25
    clock.advance(H)
    assert pacer.allowed(clock.now()) == 50
    clock.advance(3 * H)
    assert (
        pacer.allowed(clock.now()) == 125
    )  # the budget keeps growing; the run ends at total_steps


def test_pacer_waits_for_the_next_simulated_hour_once_the_budget_is_spent() -> None:
    anchor = ClockAnchor(
        sim_start=T0 + timedelta(minutes=20), wall_start=time.time(), seconds_per_hour=3600.0
    )
    pacer = StepPacer(SimulatedClock(anchor), total_steps=100, estimated_hours=4.0)
    assert pacer.may_step(24) and not pacer.may_step(25)
    assert (
        40 * 60 - 5 < pacer.wait_seconds() <= 40 * 60
    )  # 11:00 is 40 simulated = real minutes away


def test_an_hour_is_priced_at_the_forecast_s_expected_value_as_the_plan_prices_it() -> None:
    """A skewed band (spikes go up): the meter charges the band's expected value, not its median,
    the same intensity the scheduler's plan prices the hour at."""
    skewed = forecast(T0, [100.0]).model_copy(
        update={"p10_g_per_kwh": [90.0] * 168, "p90_g_per_kwh": [300.0] * 168}
    )
    expected = float(skewed.expected_g_per_kwh()[0])
    assert expected == pytest.approx(0.3 * 90 + 0.4 * 100 + 0.3 * 300)
    assert ForecastIntensity(skewed)(T0 + timedelta(minutes=20)) == pytest.approx(expected)
