"""The emissions disclosure of a fine-tuning run and of a study (pure: no database).

Follows the fine-tuning emissions reporting methodology (disclosure of infrastructure and
operational data, normalisation of what is missing with named defaults): base model, GPU model
and count, servers, datacenter and grid region, start time, total time, average GPU and CPU
utilisation, total tokens including padding, energy, and kgCO2eq computed hour by hour as
IT kWh x PUE x the carbon intensity of that hour. Every default applied is listed in
``normalisations``. An hour without a known intensity is *unpriced*: its energy is reported,
its emissions are not, and a run with any unpriced hour has no total kgCO2eq (``None``), never 0.

Each hour has two prices: the *forecast* one the agent charged while the hour ran (the latest
forecast's intensity) and, once the grid region's hour has been observed, the *realised*
(location-based) one. The disclosure prices an hour at its realised intensity where it has one
and at the forecast's otherwise, says which (``priced_by``) and lists the hours still
forecast-priced; both totals are kept beside each other.

An hour's forecast price may come from a forecast flagged stale (the last good one, served while
its provider was down) or short of history (:mod:`.priced_from` finds it): such hours are listed
(``flagged_forecast_hours``, with what priced the hour in the end), and those still priced at that
forecast are named in the notes. A realised price says the emission factors of its observation
(``realised_emission_factors``: direct or lifecycle, the deployment's ``METATUNE_EMISSION_FACTORS``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field

from metatune.contracts import Hardware
from metatune.deadlines import deadline_outcome, outcome_fields
from metatune.display import trial_outcome
from metatune.emissions import PricedBy, as_run, total
from metatune.emissions import grams as emission_grams

from .priced_from import ForecastFlag

DEFAULT_GPU = "NVIDIA A100 80GB"  # the methodology's most common training GPU of recent years
DEFAULT_LOCATION = "US"
DEFAULT_SERVERS = 1


class HourInput(BaseModel):
    hour: datetime
    datacenter: str
    energy_wh: float
    pue: float | None
    g_per_kwh: float | None  # the forecast intensity the agent charged
    realised_g_per_kwh: float | None = None  # the observed intensity, once the hour is observed
    # the flags of the forecast that priced the hour (priced_from.py)
    forecast_flags: list[ForecastFlag] = Field(default_factory=list)
    # the emission factors of the observed intensity (direct or lifecycle)
    realised_emission_factors: Literal["direct", "lifecycle"] | None = None


class RunInput(BaseModel):
    job_id: UUID
    study_id: UUID | None
    trial_index: int | None
    status: str  # completed | failed | running
    base_model: str | None
    gpus: int | None
    gpu_model: str | None
    gpu_power_w: float | None  # rated board power per GPU
    region_of: dict[str, str]  # datacenter -> grid region
    pue_of: dict[
        str, float
    ]  # datacenter -> PUE from its registry / status, where the hour lacks one
    start: datetime | None
    wall_seconds: float | None
    mean_power_w: float | None
    tokens_seen: int | None
    tokens_with_padding: int | None
    hours: list[HourInput]
    hardware: Hardware | None = None  # what the run trained on, as its agent measured it
    early_stopped: bool = False
    stop_reason: str | None = None
    steps: int | None = None
    accuracy: float | None = None  # on the held-out split, once the run completed
    majority_baseline: float | None = None  # always predicting the most common training label
    chance_baseline: float | None = None  # guessing: 1 / the classes the study's profile counted
    ended_at: datetime | None = None  # when its run ended (None: still running)


class HourLine(BaseModel):
    hour: datetime
    datacenter: str
    grid_region: str
    it_energy_kwh: float
    pue: float
    facility_energy_kwh: float
    g_per_kwh: float | None  # the intensity disclosed: realised where observed, else forecast
    kgco2eq: float | None
    priced_by: PricedBy
    forecast_g_per_kwh: float | None
    forecast_kgco2eq: float | None
    realised_g_per_kwh: float | None
    realised_kgco2eq: float | None
    forecast_flags: list[ForecastFlag] = Field(default_factory=list)
    realised_emission_factors: Literal["direct", "lifecycle"] | None = None


class FlaggedHour(BaseModel):
    """An hour whose forecast price came from a stale or short-history forecast."""

    hour: datetime
    datacenter: str
    flags: list[ForecastFlag]
    priced_by: (
        PricedBy  # forecast: the disclosed price is that forecast's; realised: observed since
    )


class RunDisclosure(BaseModel):
    job_id: UUID
    study_id: UUID | None
    trial_index: int | None
    status: str
    outcome: str  # status in the words every view uses: "early-stopped (plateau, step 40)"
    base_model: str
    device: str  # "cpu", "cuda", or "not reported" (a run still going or failed)
    hardware_measured: bool  # device and models are the agent's measurement, not defaults
    cpu_model: str | None
    gpu_model: str | None  # None: trained on the CPU
    gpu_count: int  # 0: trained on the CPU
    servers: int
    datacenters: list[str]  # in the order the run used them
    grid_regions: list[str]  # the grid region of each datacenter, in the same order
    start_time: datetime | None
    total_time_h: float | None
    avg_gpu_utilisation: float | None
    avg_cpu_utilisation: float | None
    tokens_with_padding: int | None
    tokens_seen: int | None
    it_energy_kwh: float
    facility_energy_kwh: float
    pricing: Literal["priced", "partially_priced", "unpriced"]
    kgco2eq: float | None
    priced_kgco2eq: float
    unpriced_energy_kwh: float
    realised_hours: int  # hours priced at their observed intensity
    forecast_priced_hours: int  # hours not observed yet, priced at the forecast's
    forecast_kgco2eq: float | None  # every hour at the forecast price (None: one had none)
    # the emission factors of the observed intensities its realised hours were priced at
    realised_emission_factors: list[Literal["direct", "lifecycle"]] = Field(default_factory=list)
    flagged_forecast_hours: list[FlaggedHour] = Field(default_factory=list)
    hours: list[HourLine]
    normalisations: list[str]
    # what the run reached on its held-out split, beside its dataset's majority-class and chance
    # baselines (None: not a classifier, not completed, or not known)
    accuracy: float | None = None
    majority_baseline: float | None = None
    chance_baseline: float | None = None


class StudyDisclosure(BaseModel):
    study_id: UUID
    runs: list[RunDisclosure]
    it_energy_kwh: float
    facility_energy_kwh: float
    pricing: Literal["priced", "partially_priced", "unpriced"]
    kgco2eq: float | None
    priced_kgco2eq: float
    unpriced_energy_kwh: float
    realised_hours: int
    forecast_priced_hours: int
    forecast_kgco2eq: float | None
    flagged_forecast_hours: int = 0  # hours whose forecast price came from a flagged forecast
    flagged_forecast_priced_hours: int = 0  # of those, still priced at it (not observed yet)
    realised_emission_factors: list[Literal["direct", "lifecycle"]] = Field(default_factory=list)
    # the deadline as an outcome (metatune.deadlines; None: no deadline stored or no run ended)
    deadline: datetime | None = None
    deadline_met: bool | None = None
    trials_late: int = 0
    late_by_s: float | None = None
    deadline_outcome: str | None = None  # "met its deadline", "finished after its deadline (...)"


def _kg(grams: float | None) -> float | None:
    return None if grams is None else grams / 1000.0


def flag_words(flags: Iterable[ForecastFlag]) -> str:
    """``stale, short history``."""
    return ", ".join(flag.replace("_", " ") for flag in flags)


def flagged_label(hour: FlaggedHour) -> str:
    """``2025-03-03 02:00 fra1 (stale, short history)``."""
    return f"{hour.hour:%Y-%m-%d %H:%M} {hour.datacenter} ({flag_words(hour.flags)})"


def _factors(
    values: Iterable[Literal["direct", "lifecycle"] | None],
) -> list[Literal["direct", "lifecycle"]]:
    """The distinct factor types, in order of first use."""
    return list(dict.fromkeys(v for v in values if v is not None))


def _pricing(priced: int, unpriced: int) -> Literal["priced", "partially_priced", "unpriced"]:
    if unpriced == 0:
        return "priced"
    return "partially_priced" if priced else "unpriced"


def disclose_run(run: RunInput) -> RunDisclosure:
    notes: list[str] = []
    base_model = run.base_model or "unknown"
    if run.base_model is None:
        notes.append("base model: not recorded (no jobs.requested event)")
    device, cpu, gpu_model, gpus = _hardware(run, notes)
    notes.append(
        f"servers: not reported by the agents, default {DEFAULT_SERVERS} (cluster size assumption)"
    )
    lines = [
        _hour_line(h, run, notes) for h in sorted(run.hours, key=lambda x: (x.hour, x.datacenter))
    ]
    unpriced, forecast_priced, flagged = _priced_hours(lines, notes)
    priced_kg = sum(line.kgco2eq or 0.0 for line in lines)
    pricing = _pricing(len(lines) - len(unpriced), len(unpriced)) if lines else "unpriced"
    utilisation = _gpu_utilisation(run, gpu_model, gpus, notes)
    used = list(dict.fromkeys(line.datacenter for line in lines))  # first use first
    notes.append("CPU utilisation: not measured by the agents")
    return RunDisclosure(
        job_id=run.job_id,
        study_id=run.study_id,
        trial_index=run.trial_index,
        status=run.status,
        outcome=trial_outcome(
            run.status,
            early_stopped=run.early_stopped,
            stop_reason=run.stop_reason,
            steps=run.steps,
        ),
        base_model=base_model,
        device=device,
        hardware_measured=run.hardware is not None,
        cpu_model=cpu,
        gpu_model=gpu_model,
        gpu_count=gpus,
        servers=DEFAULT_SERVERS,
        datacenters=used,
        grid_regions=[
            next(line.grid_region for line in lines if line.datacenter == dc) for dc in used
        ],
        start_time=run.start or (lines[0].hour if lines else None),
        total_time_h=run.wall_seconds / 3600.0 if run.wall_seconds is not None else None,
        avg_gpu_utilisation=utilisation,
        avg_cpu_utilisation=None,
        tokens_with_padding=run.tokens_with_padding,
        tokens_seen=run.tokens_seen,
        it_energy_kwh=sum(line.it_energy_kwh for line in lines),
        facility_energy_kwh=sum(line.facility_energy_kwh for line in lines),
        pricing=pricing,
        kgco2eq=priced_kg if pricing == "priced" else None,
        priced_kgco2eq=priced_kg,
        unpriced_energy_kwh=sum(line.facility_energy_kwh for line in unpriced),
        realised_hours=sum(1 for line in lines if line.priced_by == "realised"),
        forecast_priced_hours=len(forecast_priced),
        forecast_kgco2eq=total(line.forecast_kgco2eq for line in lines),
        realised_emission_factors=_factors(line.realised_emission_factors for line in lines),
        flagged_forecast_hours=flagged,
        hours=lines,
        normalisations=list(dict.fromkeys(notes)),
        accuracy=run.accuracy,
        majority_baseline=run.majority_baseline,
        chance_baseline=run.chance_baseline,
    )


def _hour_line(h: HourInput, run: RunInput, notes: list[str]) -> HourLine:
    """One metered hour: its grid region and PUE (defaults listed in ``notes``), priced at the
    realised intensity where observed, else at the forecast's."""
    region = run.region_of.get(h.datacenter)
    if region is None:
        region = DEFAULT_LOCATION
        notes.append(
            f"grid region of {h.datacenter}: unknown, default {DEFAULT_LOCATION} (relatively high-carbon)"
        )
    pue = h.pue if h.pue is not None else run.pue_of.get(h.datacenter)
    if pue is None:
        pue = 1.0
        notes.append(f"PUE of {h.datacenter}: unknown, 1.0 (IT energy only)")
    it_kwh = h.energy_wh / 1000.0
    facility = it_kwh * pue
    realised = h.realised_g_per_kwh
    disclosed = realised if realised is not None else h.g_per_kwh
    grams, priced_by = as_run(h.energy_wh, pue, h.g_per_kwh, realised)
    return HourLine(
        hour=h.hour,
        datacenter=h.datacenter,
        grid_region=region,
        it_energy_kwh=it_kwh,
        pue=pue,
        facility_energy_kwh=facility,
        g_per_kwh=disclosed,
        kgco2eq=_kg(grams),
        priced_by=priced_by,
        forecast_g_per_kwh=h.g_per_kwh,
        forecast_kgco2eq=_kg(emission_grams(h.energy_wh, pue, h.g_per_kwh)),
        realised_g_per_kwh=realised,
        realised_kgco2eq=_kg(emission_grams(h.energy_wh, pue, realised)),
        forecast_flags=h.forecast_flags if h.g_per_kwh is not None else [],
        realised_emission_factors=h.realised_emission_factors if realised is not None else None,
    )


def _priced_hours(
    lines: list[HourLine], notes: list[str]
) -> tuple[list[HourLine], list[HourLine], list[FlaggedHour]]:
    """The hours left unpriced, those priced at a forecast, and those whose forecast was stale or
    short of history; each kind named in ``notes``."""
    unpriced = [line for line in lines if line.kgco2eq is None]
    if unpriced:
        notes.append(
            f"{len(unpriced)} hour(s) without a known carbon intensity: unpriced, not counted as 0"
        )
    forecast_priced = [line for line in lines if line.priced_by == "forecast"]
    if forecast_priced:
        notes.append(
            f"{len(forecast_priced)} hour(s) not observed yet, priced at the forecast intensity: "
            + ", ".join(f"{line.hour:%Y-%m-%d %H:%M} {line.datacenter}" for line in forecast_priced)
        )
    flagged = [
        FlaggedHour(
            hour=line.hour,
            datacenter=line.datacenter,
            flags=line.forecast_flags,
            priced_by=line.priced_by,
        )
        for line in lines
        if line.forecast_flags
    ]
    still = [hour for hour in flagged if hour.priced_by == "forecast"]
    if still:
        notes.append(
            f"{len(still)} hour(s) priced at a stale or short-history forecast: "
            + ", ".join(flagged_label(hour) for hour in still)
        )
    return unpriced, forecast_priced, flagged


def _gpu_utilisation(
    run: RunInput, gpu_model: str | None, gpus: int, notes: list[str]
) -> float | None:
    """Mean measured power over the GPUs' rated power, where both are known (how, in ``notes``)."""
    utilisation = None
    if gpu_model is None:
        notes.append("GPU utilisation: not applicable (trained on the CPU)")
    elif run.mean_power_w is not None and run.gpu_power_w:
        utilisation = min(1.0, run.mean_power_w / (gpus * run.gpu_power_w))
        notes.append(
            "GPU utilisation: estimated as mean measured power above idle / rated GPU power"
        )
    else:
        notes.append("GPU utilisation: not measured")
    return utilisation


def _hardware(run: RunInput, notes: list[str]) -> tuple[str, str | None, str | None, int]:
    """(device, CPU model, GPU model, GPU count) as measured; the datacenter's registry GPU, then
    the methodology's default, only where the run reported nothing (each listed in ``notes``)."""
    measured = run.hardware
    if measured is not None and measured.device == "cpu":
        if measured.cpu_model is None:
            notes.append("CPU model: not reported by the agent")
        return "cpu", measured.cpu_model, None, 0
    if measured is None:
        notes.append("hardware: not reported by the run (running or failed): a GPU assumed")
    reported = measured.gpu_model if measured else None
    gpu_model = reported or run.gpu_model or DEFAULT_GPU
    if reported is None and run.gpu_model is not None:
        notes.append(f"GPU model: not reported, the datacenter's {run.gpu_model} assumed")
    elif reported is None:
        notes.append(
            f"GPU model: unknown, default {DEFAULT_GPU} (most common GPU for the training year)"
        )
    gpus = (measured.gpu_count if measured else 0) or run.gpus or 1
    if (measured is None or not measured.gpu_count) and run.gpus is None:
        notes.append("GPU count: unknown, default 1")
    device = measured.device if measured else "not reported"
    return device, measured.cpu_model if measured else None, gpu_model, gpus


def disclose_study(
    study_id: UUID, runs: list[RunInput], deadline: datetime | None = None
) -> StudyDisclosure:
    disclosed = [disclose_run(run) for run in runs]
    ends = [run.ended_at for run in runs if run.ended_at is not None]
    late = None if deadline is None or not ends else deadline_outcome(deadline, ends)
    priced = sum(1 for d in disclosed if d.pricing == "priced")
    unpriced = len(disclosed) - priced
    priced_kg = sum(d.priced_kgco2eq for d in disclosed)
    pricing = _pricing(priced, unpriced) if disclosed else "unpriced"
    if (
        pricing != "priced"
        and any(d.pricing == "partially_priced" for d in disclosed)
        and priced == 0
    ):
        pricing = "partially_priced"
    return StudyDisclosure(
        study_id=study_id,
        runs=disclosed,
        it_energy_kwh=sum(d.it_energy_kwh for d in disclosed),
        facility_energy_kwh=sum(d.facility_energy_kwh for d in disclosed),
        pricing=pricing,
        kgco2eq=priced_kg if pricing == "priced" else None,
        priced_kgco2eq=priced_kg,
        unpriced_energy_kwh=sum(d.unpriced_energy_kwh for d in disclosed),
        realised_hours=sum(d.realised_hours for d in disclosed),
        forecast_priced_hours=sum(d.forecast_priced_hours for d in disclosed),
        forecast_kgco2eq=total(d.forecast_kgco2eq for d in disclosed),
        flagged_forecast_hours=sum(len(d.flagged_forecast_hours) for d in disclosed),
        flagged_forecast_priced_hours=sum(
            1 for d in disclosed for h in d.flagged_forecast_hours if h.priced_by == "forecast"
        ),
        realised_emission_factors=_factors(
            factors for d in disclosed for factors in d.realised_emission_factors
        ),
        deadline=deadline,
        **outcome_fields(late),
    )
