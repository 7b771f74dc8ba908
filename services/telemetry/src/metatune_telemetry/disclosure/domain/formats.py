"""The disclosure as JSON, CSV (one row per run) or Markdown (the methodology's table layout)."""

from __future__ import annotations

import csv
import io
from datetime import UTC

from metatune import units
from metatune.display import beside_baseline, trial_label

from .disclosure import HourLine, RunDisclosure, StudyDisclosure, flag_words, flagged_label


def _num(value: float | None, digits: int = 4) -> str:
    return "unpriced" if value is None else f"{value:.{digits}f}"


def _mass(kg: float | None) -> str:
    return units.mass(None if kg is None else kg * 1000, "unpriced")


def _pct(value: float | None, missing: str = "not measured") -> str:
    return missing if value is None else f"{100 * value:.0f} %"


def energy(*kwh: float) -> str:
    """Energies each in the unit that suits it (:func:`metatune.units.energy`):
    ``energy(0.00002, 0.000022)`` is ``"20.0 mWh / 22.0 mWh"``."""
    return " / ".join(units.energy(v * 1000) for v in kwh)


def co2(kg: float | None, unknown: str = "unpriced") -> str:
    """A mass of CO2eq given in kg, in the unit that suits it: ``57.3 mg CO2eq``."""
    return unknown if kg is None else f"{units.mass(kg * 1000)} CO2eq"


def hardware(run: RunDisclosure) -> str:
    """The hardware as measured: ``CPU <model>`` or ``<n> x GPU <model>`` (marked where assumed)."""
    if run.gpu_model is None:
        return f"CPU {run.cpu_model or '(model not reported)'}"
    shown = f"{run.gpu_count} x GPU {run.gpu_model}"
    return shown if run.hardware_measured else f"{shown} (assumed: not reported by the run)"


RUN_FIELDS = [
    "job_id",
    "trial_index",
    "status",
    "outcome",
    "base_model",
    "device",
    "hardware_measured",
    "cpu_model",
    "gpu_model",
    "gpu_count",
    "servers",
    "datacenters",
    "grid_regions",
    "start_time",
    "total_time_h",
    "avg_gpu_utilisation",
    "avg_cpu_utilisation",
    "tokens_with_padding",
    "it_energy_kwh",
    "facility_energy_kwh",
    "pricing",
    "kgco2eq",
    "priced_kgco2eq",
    "unpriced_energy_kwh",
    "realised_hours",
    "forecast_priced_hours",
    "forecast_kgco2eq",
    "realised_emission_factors",
    "accuracy",
    "majority_baseline",
    "chance_baseline",
    "normalisations",
]


def to_csv(study: StudyDisclosure) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(RUN_FIELDS)
    for run in study.runs:
        row = run.model_dump(mode="json")
        writer.writerow(
            [
                "; ".join(map(str, row[f]))
                if isinstance(row[f], list)
                else ("" if row[f] is None else row[f])
                for f in RUN_FIELDS
            ]
        )
    return out.getvalue()


def run_rows(run: RunDisclosure) -> list[tuple[str, str]]:
    return [
        ("Base model", run.base_model),
        ("Hardware", hardware(run)),
        ("Number of GPUs", str(run.gpu_count)),
        ("Number of servers", str(run.servers)),
        ("Datacenter", ", ".join(run.datacenters) or "-"),
        ("Grid region", ", ".join(run.grid_regions) or "-"),
        (
            "Start time",
            f"{run.start_time.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC" if run.start_time else "-",
        ),
        (
            "Total fine-tuning time",
            "-" if run.total_time_h is None else f"{run.total_time_h:.3f} h",
        ),
        (
            "Average GPU utilisation",
            _pct(
                run.avg_gpu_utilisation,
                "not applicable (CPU)" if run.gpu_model is None else "not measured",
            ),
        ),
        ("Average CPU utilisation", _pct(run.avg_cpu_utilisation)),
        (
            "Total tokens (with padding)",
            "-" if run.tokens_with_padding is None else f"{run.tokens_with_padding:,}",
        ),
        ("Energy (IT / facility)", energy(run.it_energy_kwh, run.facility_energy_kwh)),
        ("Emissions", f"{co2(run.kgco2eq)} ({run.pricing})"),
        ("Priced at", priced_at(run.realised_hours, run.forecast_priced_hours)),
        ("Emissions at the forecast intensity", co2(run.forecast_kgco2eq)),
        *_caveat_rows(run),
    ] + (
        []
        if run.accuracy is None
        else [
            (
                "Accuracy (held-out)",
                beside_baseline(run.accuracy, run.majority_baseline, run.chance_baseline),
            )
        ]
    )


def _caveat_rows(run: RunDisclosure) -> list[tuple[str, str]]:
    """The emission factors of its realised prices, and the hours priced from flagged forecasts."""
    rows = []
    if run.realised_emission_factors:
        rows.append(
            ("Realised intensity's emission factors", ", ".join(run.realised_emission_factors))
        )
    if run.flagged_forecast_hours:
        still = sum(1 for h in run.flagged_forecast_hours if h.priced_by == "forecast")
        rows.append(
            (
                "Hours from a stale or short-history forecast",
                f"{len(run.flagged_forecast_hours)} h, {still} still priced at it: "
                + ", ".join(flagged_label(h) for h in run.flagged_forecast_hours),
            )
        )
    return rows


def _priced_by(line: HourLine) -> str:
    """``realised (direct)``: what priced the hour, and the factors of an observed price."""
    if line.priced_by == "realised" and line.realised_emission_factors:
        return f"realised ({line.realised_emission_factors})"
    return line.priced_by


def _forecast_cell(line: HourLine) -> str:
    """The forecast's g/kWh, and its flags (``200.0 (stale)``)."""
    flags = flag_words(line.forecast_flags)
    return _num(line.forecast_g_per_kwh, 1) + (f" ({flags})" if flags else "")


def priced_at(realised: int, forecast: int) -> str:
    return f"realised intensity: {realised} h; forecast intensity (not observed yet): {forecast} h"


def to_markdown(study: StudyDisclosure) -> str:
    lines = [
        f"# Emissions disclosure, study {study.study_id}",
        "",
        f"Total: {energy(study.it_energy_kwh, study.facility_energy_kwh)} (IT / facility), "
        f"{co2(study.kgco2eq)} ({study.pricing}; priced part {co2(study.priced_kgco2eq)}, "
        f"unpriced energy {energy(study.unpriced_energy_kwh)})",
        "",
        f"Priced at the {priced_at(study.realised_hours, study.forecast_priced_hours)}; "
        f"every hour at the forecast intensity: {co2(study.forecast_kgco2eq)}",
        "",
        *(
            [
                f"Hours whose forecast price came from a stale or short-history forecast: "
                f"{study.flagged_forecast_hours} ({study.flagged_forecast_priced_hours} still "
                "priced at it)",
                "",
            ]
            if study.flagged_forecast_hours
            else []
        ),
        *(
            [
                "Realised intensities on "
                + " and ".join(study.realised_emission_factors)
                + " emission factors",
                "",
            ]
            if study.realised_emission_factors
            else []
        ),
        *(
            [f"Deadline {study.deadline:%Y-%m-%d %H:%M} UTC: {study.deadline_outcome}", ""]
            if study.deadline is not None and study.deadline_outcome
            else []
        ),
    ]
    for run in study.runs:
        lines += [
            f"## Trial {trial_label(run.trial_index)} ({run.job_id}), {run.outcome}",
            "",
            "| Component | Disclosed data |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v} |" for k, v in run_rows(run)]
        lines += [
            "",
            "| Hour (UTC) | Datacenter | Region | IT energy | PUE | gCO2eq/kWh | CO2eq | Priced by "
            "| Forecast gCO2eq/kWh | Forecast CO2eq |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {h.hour:%Y-%m-%d %H:%M} | {h.datacenter} | {h.grid_region} | {units.energy(h.it_energy_kwh * 1000)} | {h.pue:.2f} | "
            f"{_num(h.g_per_kwh, 1)} | {_mass(h.kgco2eq)} | {_priced_by(h)} | "
            f"{_forecast_cell(h)} | {_mass(h.forecast_kgco2eq)} |"
            for h in run.hours
        ]
        lines += ["", "Normalisation applied:", *[f"- {n}" for n in run.normalisations], ""]
    return "\n".join(lines)
