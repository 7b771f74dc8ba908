"""The disclosure as JSON, CSV (one row per run) or Markdown (the methodology's table layout)."""

from __future__ import annotations

import csv
import io

from .disclosure import RunDisclosure, StudyDisclosure


def _num(value: float | None, digits: int = 4) -> str:
    return "unpriced" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "not measured" if value is None else f"{100 * value:.0f} %"


RUN_FIELDS = [
    "job_id",
    "trial_index",
    "status",
    "base_model",
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
        ("GPU", run.gpu_model),
        ("Number of GPUs", str(run.gpu_count)),
        ("Number of servers", str(run.servers)),
        ("Datacenter", ", ".join(run.datacenters) or "-"),
        ("Grid region", ", ".join(run.grid_regions) or "-"),
        ("Start time", run.start_time.isoformat() if run.start_time else "-"),
        (
            "Total fine-tuning time",
            "-" if run.total_time_h is None else f"{run.total_time_h:.3f} h",
        ),
        ("Average GPU utilisation", _pct(run.avg_gpu_utilisation)),
        ("Average CPU utilisation", _pct(run.avg_cpu_utilisation)),
        (
            "Total tokens (with padding)",
            "-" if run.tokens_with_padding is None else f"{run.tokens_with_padding:,}",
        ),
        ("Energy (IT / facility)", f"{run.it_energy_kwh:.4f} / {run.facility_energy_kwh:.4f} kWh"),
        ("Emissions", f"{_num(run.kgco2eq, 6)} kgCO2eq ({run.pricing})"),
        ("Priced at", priced_at(run.realised_hours, run.forecast_priced_hours)),
        ("Emissions at the forecast intensity", f"{_num(run.forecast_kgco2eq, 6)} kgCO2eq"),
    ]


def priced_at(realised: int, forecast: int) -> str:
    return f"realised intensity: {realised} h; forecast intensity (not observed yet): {forecast} h"


def to_markdown(study: StudyDisclosure) -> str:
    lines = [
        f"# Emissions disclosure, study {study.study_id}",
        "",
        f"Total: {study.it_energy_kwh:.4f} kWh IT, {study.facility_energy_kwh:.4f} kWh facility, "
        f"{_num(study.kgco2eq, 6)} kgCO2eq ({study.pricing}; priced part {study.priced_kgco2eq:.6f} kg, "
        f"unpriced energy {study.unpriced_energy_kwh:.4f} kWh)",
        "",
        f"Priced at the {priced_at(study.realised_hours, study.forecast_priced_hours)}; "
        f"every hour at the forecast intensity: {_num(study.forecast_kgco2eq, 6)} kgCO2eq",
        "",
    ]
    for run in study.runs:
        lines += [
            f"## Trial {run.trial_index} ({run.job_id}), {run.status}",
            "",
            "| Component | Disclosed data |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v} |" for k, v in run_rows(run)]
        lines += [
            "",
            "| Hour (UTC) | Datacenter | Region | IT kWh | PUE | gCO2eq/kWh | kgCO2eq | Priced by "
            "| Forecast gCO2eq/kWh | Forecast kgCO2eq |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {h.hour:%Y-%m-%d %H:%M} | {h.datacenter} | {h.grid_region} | {h.it_energy_kwh:.4f} | {h.pue:.2f} | "
            f"{_num(h.g_per_kwh, 1)} | {_num(h.kgco2eq, 6)} | {h.priced_by} | "
            f"{_num(h.forecast_g_per_kwh, 1)} | {_num(h.forecast_kgco2eq, 6)} |"
            for h in run.hours
        ]
        lines += ["", "Normalisation applied:", *[f"- {n}" for n in run.normalisations], ""]
    return "\n".join(lines)
