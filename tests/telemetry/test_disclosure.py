"""The disclosure of a run states what was measured, in one order and in units that show it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

from metatune.contracts import Hardware, LoraConfig, RunAccounting, RunCompleted, RunMetrics
from metatune.display import trial_label
from metatune_telemetry.disclosure.domain.disclosure import HourInput, RunInput, disclose_run
from metatune_telemetry.disclosure.domain.formats import energy, hardware, run_rows
from metatune_telemetry.webhooks.domain.notifications import notification_for
from tests.support.samples import NOW


def run(hours: list[HourInput], measured: Hardware | None, **extra) -> RunInput:
    values = {
        "job_id": uuid4(),
        "study_id": uuid4(),
        "trial_index": 0,
        "status": "completed",
        "base_model": "all-MiniLM-L6-v2",
        "gpus": 1,
        "gpu_model": "A100-80GB",  # the datacenter's registry GPU
        "gpu_power_w": 400.0,
        "region_of": {"osl1": "NO", "yyz1": "CA-ON"},
        "pue_of": {"osl1": 1.1, "yyz1": 1.2},
        "start": NOW,
        "wall_seconds": 60.0,
        "mean_power_w": 12.0,
        "tokens_seen": 100,
        "tokens_with_padding": 120,
        "hours": hours,
        "hardware": measured,
    }
    return RunInput.model_validate(values | extra)


def at(i: int, datacenter: str, wh: float = 0.02) -> HourInput:
    return HourInput(
        hour=NOW + timedelta(hours=i), datacenter=datacenter, energy_wh=wh, pue=None, g_per_kwh=30.0
    )


def test_a_cpu_run_is_disclosed_on_its_cpu_not_on_the_registry_gpu() -> None:
    cpu = Hardware(device="cpu", cpu_model="Intel Xeon Platinum 8481C", precision="bf16")
    disclosed = disclose_run(run([at(0, "osl1")], cpu))
    assert (disclosed.device, disclosed.gpu_model, disclosed.gpu_count) == ("cpu", None, 0)
    assert disclosed.cpu_model == "Intel Xeon Platinum 8481C" and disclosed.hardware_measured
    assert disclosed.avg_gpu_utilisation is None
    rows = dict(run_rows(disclosed))
    assert rows["Hardware"] == "CPU Intel Xeon Platinum 8481C"
    assert rows["Average GPU utilisation"] == "not applicable (CPU)"
    assert not any("A100" in value for value in rows.values())
    assert not any("GPU model" in note for note in disclosed.normalisations)


def test_a_gpu_run_shows_the_measured_model_and_count_and_an_unreported_one_says_assumed() -> None:
    gpu = Hardware(device="cuda", gpu_model="NVIDIA H100 80GB HBM3", gpu_count=2)
    measured = disclose_run(run([at(0, "osl1")], gpu))
    assert hardware(measured) == "2 x GPU NVIDIA H100 80GB HBM3"
    assert measured.avg_gpu_utilisation == 12.0 / (2 * 400.0)
    running = disclose_run(run([at(0, "osl1")], None, status="running"))
    assert hardware(running) == "1 x GPU A100-80GB (assumed: not reported by the run)"
    assert any("A100-80GB assumed" in note for note in running.normalisations)


def test_the_start_time_reads_to_the_second_in_utc() -> None:
    started = datetime(2023, 6, 13, 20, 0, 5, 123456, tzinfo=UTC)
    rows = dict(run_rows(disclose_run(run([at(0, "osl1")], None, start=started))))
    assert rows["Start time"] == "2023-06-13 20:00:05 UTC"  # not 20:00:05.123456+00:00


def test_a_migrated_run_lists_datacenters_and_their_regions_in_the_order_it_used_them() -> None:
    disclosed = disclose_run(run([at(0, "yyz1"), at(1, "yyz1"), at(2, "osl1")], None))
    assert disclosed.datacenters == ["yyz1", "osl1"]
    assert disclosed.grid_regions == ["CA-ON", "NO"]
    rows = dict(run_rows(disclosed))
    assert (rows["Datacenter"], rows["Grid region"]) == ("yyz1, osl1", "CA-ON, NO")


def test_energies_show_in_a_unit_with_digits_and_trials_are_numbered_from_one() -> None:
    assert energy(0.00002, 0.000022) == "20.0 mWh / 22.0 mWh"
    assert energy(0.002) == "2.00 Wh"
    assert energy(2.5e-7) == "250 µWh"
    assert energy(1.5, 1.65) == "1.50 kWh / 1.65 kWh"
    assert energy(0.0) == "0 Wh"
    disclosed = disclose_run(run([at(0, "osl1", wh=0.02)], None))
    rows = dict(run_rows(disclosed))
    assert rows["Energy (IT / facility)"] == "20.0 mWh / 22.0 mWh"
    assert rows["Emissions"] == "660 µg CO2eq (priced)"  # never 0.000001 kgCO2eq
    assert (trial_label(0), trial_label(3), trial_label(None)) == ("#1", "#4", "#?")


def test_an_early_stopped_run_is_disclosed_and_announced_as_one() -> None:
    stopped = disclose_run(
        run([at(0, "osl1")], None, early_stopped=True, stop_reason="learning curve", steps=40)
    )
    assert stopped.status == "completed"  # the stored status, for machines
    assert stopped.outcome == "early-stopped (learning curve, step 40)"  # the words people read
    event = RunCompleted(
        occurred_at=NOW,
        job_id=uuid4(),
        study_id=uuid4(),
        datacenter="osl1",
        config=LoraConfig(),
        metrics=RunMetrics(val_loss=0.5),
        steps=40,
        early_stopped=True,
        stop_reason="learning curve",
        accounting=RunAccounting(),
    )
    announced = notification_for(event)
    assert announced and (announced.event_type, announced.state) == (
        "job.early_stopped",
        "early-stopped",
    )
    finished = notification_for(event.model_copy(update={"early_stopped": False}))
    assert finished and (finished.event_type, finished.state) == ("job.completed", "completed")
