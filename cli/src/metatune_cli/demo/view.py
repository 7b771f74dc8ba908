"""Rich renderings of the demo: live tables while the studies run, the closing table at the end."""

from __future__ import annotations

from typing import Any, Protocol

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from metatune.contracts import PredictionSource
from metatune.display import EARLY_STOPPED, beside_baseline, prediction, trial_label
from metatune.units import energy, mass

from ..tables import Cell, Column, render
from .observer import DemoState
from .receiver import WebhookReceiver
from .summary import GRID_SIZE


class Demo(Protocol):
    """What the tables read: the state folded from the bus, the receiver, the KB count."""

    state: DemoState
    receiver: WebhookReceiver | None
    kb_runs: int


PROFILE_FEATURES = (
    ("rows", "n_examples", "{:.0f}"),
    ("classes", "n_classes", "{:.0f}"),
    ("label entropy", "label_entropy_norm", "{:.2f}"),
    ("label probe", "probe_accuracy", "{:.2f}"),
    ("tokens p50/p95", None, ""),
    ("unknown tokens", "unk_rate", "{:.1%}"),
    ("fertility", "fertility", "{:.2f}"),
    ("MATTR", "mattr", "{:.2f}"),
    ("Zipf alpha", "zipf_alpha", "{:.2f}"),
    ("pair", "is_pair", "{}"),
)


def _fmt(value: Any, pattern: str) -> str:
    if isinstance(value, bool):  # a yes/no feature (a pair task's)
        return "yes" if value else "no"
    return "-" if value is None else pattern.format(value)


def counted(n: int, thing: str, things: str | None = None) -> str:
    """``1 pause``, ``2 pauses``: a count with its noun in the number it takes."""
    return f"{n} {thing if n == 1 else (things or thing + 's')}"


def profiles(demo: Demo) -> Table:
    table = Table(title="1. datasets as the profiler measured them (metatune.datasets.profiled)")
    table.add_column("study")
    for label, _, _ in PROFILE_FEATURES:
        table.add_column(label, justify="right")
    table.add_column("script")
    for study in demo.state.studies.values():
        if study.profile is None:
            table.add_row(study.name, *["…"] * (len(PROFILE_FEATURES) + 1))
            continue
        f = study.profile.features
        cells = []
        for _label, name, pattern in PROFILE_FEATURES:
            if name is None:
                cells.append(f"{f.tokens_p50:.0f}/{f.tokens_p95:.0f}")
            else:
                cells.append(_fmt(getattr(f, name), pattern))
        script = max(f.script_mix, key=lambda k: f.script_mix[k]) if f.script_mix else "-"
        table.add_row(study.name, *cells, script)
    return table


def recommendations(demo: Demo) -> Table:
    table = Table(
        title="2. trials the recommender chose (metatune.jobs.requested): predicted accuracy, cost, source"
    )
    for col in ("trial", "how", "rank", "lr", "batch", "predicted", "GPU-h", "source"):
        table.add_column(col, justify="right" if col in ("rank", "batch", "GPU-h") else "left")
    for study in demo.state.studies.values():
        for job_id in study.jobs:
            job = demo.state.jobs[job_id]
            r = job.request
            predicted = predicted_cell(
                r.predicted_metric, r.predicted_metric_std, r.predicted_metric_interval, 0, 0
            )
            source = (
                "knowledge base"
                if r.prediction_source == PredictionSource.knowledge_base
                else "cold-start portfolio"
            )
            table.add_row(
                f"{study.name}{trial_label(job.trial_index)}",
                r.acquisition or "-",
                str(r.config.rank),
                f"{r.config.learning_rate:.2g}",
                str(r.config.batch_size),
                predicted,
                f"{r.estimated_gpu_hours:.3g}",
                source,
            )
    return table


def _hours(planned: list) -> str:
    parts = []
    for dc, hours in planned:
        if hours:
            first, last = min(hours), max(hours)
            if first == last:
                span = f"{first:%-d %b %H}h"
            elif first.date() == last.date():
                span = f"{first:%-d %b %H}-{last:%H}h"
            else:
                span = f"{first:%-d %b %H}h-{last:%-d %b %H}h"
            parts.append(f"{dc} {span} ({len(hours)} h)")
    return ", ".join(parts) or "-"


def grams(value: float) -> str:
    """gCO2eq in the unit that suits it (a demo's trials weigh milligrams): ``57.3 mg``."""
    return mass(value)


def plan_header(s: DemoState) -> str:
    """The plan's figures: what it expects of the trials still to run; once every trial has
    finished, what the meter measured beside what the plan first expected of them."""
    if s.plan_version is None:
        return "no plan yet"
    jobs = list(s.jobs.values())
    if jobs and s.done():
        return (
            f"plan v{s.plan_version}: empty, every trial finished; measured "
            f"{grams(sum(j.emissions_g for j in jobs))} for {energy(sum(j.energy_wh for j in jobs))}, "
            f"first planned {grams(sum(j.expected_g or 0.0 for j in jobs))} for "
            f"{energy(sum(j.estimated_wh for j in jobs))} estimated"
        )
    if not any(j.planned and not j.finished for j in jobs):
        return f"plan v{s.plan_version}: empty, no trial left to place yet"
    return (
        f"plan v{s.plan_version}: expected {grams(s.plan_expected_g or 0.0)} vs "
        f"{grams(s.plan_baseline_g or 0.0)} running every job now at home"
    )


def plan_figures(s: DemoState) -> dict[str, Any]:
    """The plan against the meter, from the bus: each trial priced where the plan first placed it
    (its request's estimated energy x PUE x the forecast intensity of its planned hours) and as
    its agent metered it (measured energy x PUE x the forecast intensity of the hours it ran)."""
    jobs = list(s.jobs.values())
    first = s.first_plan
    return {
        "expected_g": sum(j.expected_g or 0.0 for j in jobs),
        "estimated_wh": sum(j.estimated_wh for j in jobs),
        "measured_g": sum(j.emissions_g for j in jobs),
        "measured_wh": sum(j.energy_wh for j in jobs),
        "moved": sum(j.moved for j in jobs),
        "trials": len(jobs),
        "first_version": None if first is None else first.version,
        "first_expected_g": None if first is None else first.expected_g,
        "first_baseline_g": None if first is None else first.baseline_g,
        "first_estimated_wh": None if first is None else first.estimated_wh,
        "first_trials": None if first is None else first.trials,
        "header": plan_header(s),
    }


def plan_against_meter(plan: dict[str, Any]) -> str:
    """Why the plan's expected figure and the meter's differ: the energy (estimated against
    measured) and, per Wh, the intensity of the hours and datacenters (planned against run)."""
    est, wh = plan["estimated_wh"], plan["measured_wh"]
    line = (
        f"plan: {grams(plan['expected_g'])} expected at forecast intensity for {energy(est)} "
        f"estimated; measured {grams(plan['measured_g'])} for {energy(wh)}"
    )
    if not est or not wh:
        return line
    planned, metered = plan["expected_g"] / est, plan["measured_g"] / wh
    return line + (
        f" (energy: measured {wh / est:.3g}x the cost model's estimate; per Wh: "
        f"{planned * 1000:.3g} g/kWh planned, {metered * 1000:.3g} g/kWh metered, "
        f"{plan['moved']} of {plan['trials']} trials ran away from where first planned)"
    )


def runs(demo: Demo) -> Table:
    s = demo.state
    plan = plan_header(s)
    table = Table(
        title=f"3-4. the plan and the runs ({plan}; simulated time {s.now:%d %b %H:%M})"
        if s.now
        else f"3-4. the plan and the runs ({plan})"
    )
    for col in (
        "trial",
        "planned (datacenter, hours)",
        "status",
        "where",
        "step",
        "accuracy",
        "energy",
        "CO2eq",
        "pauses",
        "moves",
    ):
        table.add_column(
            col,
            justify="right"
            if col in ("step", "accuracy", "energy", "CO2eq", "pauses", "moves")
            else "left",
        )
    for study in s.studies.values():
        for job_id in study.jobs:
            job = s.jobs[job_id]
            step = f"{job.step}/{job.total_steps}" if job.total_steps else "-"
            status = job.status
            if job.status == EARLY_STOPPED and job.stop_reason:
                status += (
                    " (curve)" if job.stop_reason.startswith("learning curve") else " (plateau)"
                )
            table.add_row(
                f"{study.name}{trial_label(job.trial_index)}",
                _hours(job.planned),
                status,
                " -> ".join(job.visited) or "-",
                step,
                _fmt(job.metric, "{:.3f}"),
                energy(job.energy_wh),
                mass(job.emissions_g),
                str(job.pauses),
                str(job.migrations),
            )
    return table


def footer(demo: Demo) -> Text:
    s = demo.state
    deliveries, verified = demo.receiver.counts() if demo.receiver else (0, 0)
    line = (
        f"5. pauses {s.pauses()} · migrations {s.migrations()} · early stops {s.early_stops()} · "
        f"completions {s.completions()} · in the knowledge base {demo.kb_runs} · "
        f"webhooks {deliveries} received, {verified} signature-verified · errors {len(s.errors)}"
    )
    return Text(line)


def training(demo: Demo) -> Group:
    log = Text("\n".join(demo.state.log[-8:]), style="dim")
    return Group(runs(demo), footer(demo), log)


def _g(value: float | None) -> str:
    return mass(value, "unpriced")


def _observed(disclosed: dict[str, Any]) -> str:
    realised, forecast = disclosed.get("realised_hours"), disclosed.get("forecast_priced_hours")
    return "" if realised is None or forecast is None else f" ({realised}/{realised + forecast})"


CLOSING_COLUMNS = (
    Column("study", no_wrap=True),
    Column("trials (early-stopped)", justify="right", compact_header="trials", no_wrap=True),
    Column("best accuracy", compact_header="best (majority)", no_wrap=True),
    Column("predicted (80 %)", wide_only=True),
    Column("nearest KB best run", wide_only=True),
    Column("energy", wide_only=True, justify="right"),
    Column("sweep energy", wide_only=True, justify="right"),
    Column("CO2eq as charged", justify="right", compact_header="CO2eq", no_wrap=True),
    Column("run now at home", justify="right", compact_header="run now", no_wrap=True),
    Column("greedy", justify="right", no_wrap=True),
    Column("realised (h observed)", wide_only=True, justify="right"),
    Column("deadline"),
)
CLOSING_TITLE = (
    "6. what MetaTune saved (from the database; CO2eq as charged, run now and greedy: each hour at "
    "the forecast intensity, as the agents charged it; realised: the disclosure, each hour the "
    f"grid has since observed at its observed intensity; sweep: the {GRID_SIZE} configurations "
    "of the search space's grid)"
)


def closing_table(result: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(columns, rows) of the closing table: what the demo prints and the README shows."""
    rows = [[c if isinstance(c, str) else c[1] for c in cells] for cells in closing_rows(result)]
    return [c.header for c in CLOSING_COLUMNS], rows


def nearest_measured(evidence: dict[str, Any]) -> str:
    """'snips_intents 0.975 (48 runs)': the nearest knowledge-base dataset's best measured run."""
    nearest = evidence.get("nearest") or []
    if not nearest:
        return "-"
    first = nearest[0]
    return f"{first['dataset']} {first['best_measured']:.3f} ({first['runs']} runs)"


def predicted_cell(
    predicted: float | None, std: float | None, band: Any, inside: int, measured: int
) -> str:
    """'0.537 (0.21-0.86); 3/4 inside': the best trial's prediction with its 80 % interval, and
    how many of the study's trials fell inside theirs."""
    shown = prediction(predicted, std, tuple(band) if band else None)
    return shown + (f"; {inside}/{measured} inside" if measured and predicted is not None else "")


def _beside_majority(accuracy: float | None, majority: float | None) -> str:
    """The compact layout's accuracy cell: ``0.983 (0.150)``, the majority baseline beside it."""
    if accuracy is None:
        return "-"
    return f"{accuracy:.3f}" + ("" if majority is None else f" ({majority:.3f})")


def closing_rows(result: dict[str, Any]) -> list[list[Cell]]:
    """The closing table's cells, one row per study, every column (a pair: the compact layout's
    cell and the wide one's)."""
    rows = []
    for row in result["studies"]:
        disclosed = result["disclosure"].get(row["study_id"], {})
        evidence = result.get("evidence", {}).get(row["study_id"], {})
        predicted = row.get("best_predicted")
        std = row.get("best_predicted_std")
        band = row.get("best_predicted_interval")
        rows.append(
            [
                row["name"],
                f"{row['trials']} ({row['early_stopped']})",
                (
                    _beside_majority(row["best_accuracy"], row.get("majority_baseline")),
                    beside_baseline(
                        row["best_accuracy"],
                        row.get("majority_baseline"),
                        row.get("chance_baseline"),
                    ),
                ),
                predicted_cell(
                    predicted, std, band, row.get("inside_interval", 0), row.get("with_interval", 0)
                ),
                nearest_measured(evidence),
                energy(row["energy_wh"]),
                energy(row["grid_energy_wh"]),
                _g(row["emissions_g"]),
                _g(row["run_now_g"]),
                _g(row["greedy_g"]),
                _g(None if disclosed.get("kgco2eq") is None else disclosed["kgco2eq"] * 1000)
                + _observed(disclosed),
                row.get("deadline_cell", "-"),
            ]
        )
    return rows


def deadlines(studies: list[dict[str, Any]]) -> str:
    """'2 of 3 studies met their deadline; intents-en: 3 late, by up to 2 h 06 min. ' (empty: no
    study has a trial ended)."""
    known = [r for r in studies if r.get("deadline_met") is not None]
    if not known:
        return ""
    met = sum(r["deadline_met"] for r in known)
    late = [f"{r['name']}: {r['deadline_cell']}" for r in known if not r["deadline_met"]]
    said = f"{met} of {len(known)} studies met their deadline"
    return f"{said}; {'; '.join(late)}. " if late else f"{said}. "


def closing_summary(result: dict[str, Any]) -> str:
    """The line under the closing table: all studies against the grid, run-now and greedy."""
    studies = result["studies"]
    total = {k: sum(r[k] or 0.0 for r in studies) for k in ("emissions_g", "run_now_g", "greedy_g")}
    saved = (
        f" ({1 - total['emissions_g'] / total['run_now_g']:.0%} less)" if total["run_now_g"] else ""
    )
    webhooks = result["webhooks"]
    return (
        f"All studies: {sum(r['trials'] for r in studies)} trials instead of "
        f"{sum(r['grid'] for r in studies)}; {mass(total['emissions_g'])} CO2eq against "
        f"{mass(total['run_now_g'])} run now at home{saved} and {mass(total['greedy_g'])} placed "
        f"greedily. {deadlines(studies)}{counted(result['pauses'], 'pause')}, "
        f"{counted(result['migrations'], 'migration')} through a checkpoint, "
        f"{counted(result['early_stops'], 'early stop')} ({result['curve_stops']} by the "
        f"learning-curve predictor); {counted(webhooks['deliveries'], 'webhook delivery', 'webhook deliveries')}, "
        f"{webhooks['verified']} signature-verified; {result['elapsed_s']:.0f} s from the command "
        "to the table."
    )


def print_closing(console: Console, result: dict[str, Any], wide: bool = False) -> None:
    """The closing table as the demo prints it: compact where it must fit (a pipe, a narrow
    terminal; :mod:`metatune_cli.tables`), every column with ``wide``."""
    plan = result.get("plan")
    caption = "\n".join(
        part for part in (evidence_caption(result), plan and plan_against_meter(plan)) if part
    )
    render(
        console,
        CLOSING_COLUMNS,
        closing_rows(result),
        wide=wide,
        title=CLOSING_TITLE,
        caption=caption,
    )


def evidence_caption(result: dict[str, Any]) -> str:
    """Where the knowledge-base column's figures come from: the budget those runs trained at."""
    budgets = sorted({e["budget"] for e in result.get("evidence", {}).values() if e.get("budget")})
    return (
        f"nearest KB best run: the nearest dataset's best at the knowledge base's budget ({'; '.join(budgets)}); "
        "the study's own trials trained 1 epoch"
        if budgets
        else ""
    )
