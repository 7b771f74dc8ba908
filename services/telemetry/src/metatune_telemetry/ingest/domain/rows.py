"""The typed rows an event adds beside the raw log (pure: no database).

Column order matches the tables of ``migrations/telemetry_0002_timeseries.py`` and
``telemetry_0001_base.sql``. Energy per job-hour is the latest accounting of the run: every
progress event repeats all hours so far, so :attr:`TypedRows.job_energy` keeps, per
(job, hour, datacenter), the value of the newest event (of events from the same instant, the
larger energy: an hour's energy only grows).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from metatune import contracts as c

from ...domain.events import clean_text


def _json(model: Any) -> str | None:
    if not model:
        return None
    return clean_text(json.dumps(model.model_dump(mode="json"), allow_nan=False, default=str))


@dataclass
class TypedRows:
    run_metrics: list[tuple[Any, ...]] = field(default_factory=list)
    # (region, issued_at, hour) -> (hour, region, issued_at, g/kWh, p10, p90, model, stale,
    # imputed, short_history): a stale forecast repeats its issue's hours; the flags of all kept
    forecast_points: dict[tuple[str, datetime, datetime], tuple[Any, ...]] = field(
        default_factory=dict
    )
    # (region, hour, signal) -> (region, hour, signal, g/kWh, source, issued_at, emission factors):
    # the latest report
    observed: dict[tuple[str, datetime, str], tuple[Any, ...]] = field(default_factory=dict)
    agent_status: list[tuple[Any, ...]] = field(default_factory=list)
    job_energy: dict[tuple[UUID, datetime, str], tuple[Any, ...]] = field(default_factory=dict)
    studies: list[tuple[Any, ...]] = field(default_factory=list)
    study_profiles: list[tuple[Any, ...]] = field(default_factory=list)
    job_requests: list[tuple[Any, ...]] = field(default_factory=list)
    run_results: list[tuple[Any, ...]] = field(default_factory=list)
    study_stops: list[tuple[Any, ...]] = field(default_factory=list)
    job_cancellations: list[tuple[Any, ...]] = field(default_factory=list)
    plans: list[tuple[Any, ...]] = field(default_factory=list)
    plan_entries: list[tuple[Any, ...]] = field(default_factory=list)
    assignments: list[tuple[Any, ...]] = field(default_factory=list)
    # opens a sealed webhook URL (metatune.webhook_seal); studies whose sealed URL did not open
    unseal: Callable[[str], str] | None = None
    unopened: list[UUID] = field(default_factory=list)

    def add(self, event: c.Event) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def job_energy_rows(self) -> list[tuple[Any, ...]]:
        return list(self.job_energy.values())

    def forecast_rows(self) -> list[tuple[Any, ...]]:
        """Forecast hours in key order (writers sharing the stream lock rows alike)."""
        return [self.forecast_points[k] for k in sorted(self.forecast_points)]

    def observed_rows(self) -> list[tuple[Any, ...]]:
        """Observed region-hours in key order (writers sharing the stream lock rows alike)."""
        return [self.observed[k] for k in sorted(self.observed)]

    def months(self) -> dict[str, set[datetime]]:
        """First instant (UTC) of each month each partitioned table receives rows in: every month
        from the earliest row's to the latest's (min and max are cheap where thousands of rows
        each have a time of their own)."""
        return {
            "run_metrics": _months(r[0] for r in self.run_metrics),
            "forecast_points": _months(k[2] for k in self.forecast_points),
            "agent_status": _months(r[0] for r in self.agent_status),
            "job_energy": _months(k[1] for k in self.job_energy),
        }


def _months(times: Iterable[datetime]) -> set[datetime]:
    spread = list(times)
    if not spread:
        return set()
    lo, hi = (t.astimezone(UTC) for t in (min(spread), max(spread)))
    month = lo.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    out = set()
    while month <= hi:
        out.add(month)
        month = (month + timedelta(days=32)).replace(day=1)
    return out


def _energy(
    rows: TypedRows, job_id: UUID, datacenter: str, at: datetime, accounting: c.RunAccounting
) -> None:
    for hour in accounting.hours:
        where = hour.datacenter or datacenter
        key = (job_id, hour.hour, where)
        current = rows.job_energy.get(key)
        # the newest accounting wins; of two from the same instant, the one with more energy (an
        # hour's energy only grows), so the outcome never depends on the order events arrive in
        # an hour once priced keeps its price, whichever accounting came first: an agent that
        # resumed a job from an older checkpoint may report hours spent elsewhere unpriced
        if current is not None and (current[7], current[4]) > (at, hour.energy_wh):
            if current[5] is None and hour.g_per_kwh is not None:
                rows.job_energy[key] = _priced(current, hour.g_per_kwh)
            continue
        row = (hour.hour, job_id, where, hour.pue, hour.energy_wh, hour.g_per_kwh, None, at)
        if hour.g_per_kwh is not None:
            rows.job_energy[key] = (*row[:6], hour.emissions_g, at)
        elif current is not None and current[5] is not None:
            rows.job_energy[key] = _priced(row, current[5])
        else:
            rows.job_energy[key] = row


def _priced(row: tuple[Any, ...], g_per_kwh: float) -> tuple[Any, ...]:
    """A job-hour row priced at ``g_per_kwh``: energy x PUE x intensity."""
    hour, job_id, where, pue, energy_wh, _, _, at = row
    return (
        hour,
        job_id,
        where,
        pue,
        energy_wh,
        g_per_kwh,
        energy_wh / 1000.0 * pue * g_per_kwh,
        at,
    )


def _progress(rows: TypedRows, e: c.RunProgress) -> None:
    """One row per optimizer step the event reports: each of its points (the steps since the
    previous event; accounting columns NULL, the event's accounting is cumulative and lands on
    its own row), then the event's own step with its accounting."""
    a = e.accounting
    if e.points:
        datacenter, total = clean_text(e.datacenter), e.total_steps
        event_id, job_id = e.event_id, e.job_id
        rows.run_metrics.extend(
            (
                p.occurred_at,
                event_id,
                job_id,
                datacenter,
                p.step,
                total,
                p.train_loss,
                None,
                p.learning_rate,
                None,
                p.step_time_s,
                p.tokens_seen,
                p.tokens_with_padding,
                None,
            )
            for p in e.points
        )
    rows.run_metrics.append(
        (
            e.occurred_at,
            e.event_id,
            e.job_id,
            clean_text(e.datacenter),
            e.step,
            e.total_steps,
            e.train_loss,
            e.val_loss,
            e.learning_rate,
            e.power_w,
            e.step_time_s,
            a.tokens_seen,
            a.tokens_with_padding,
            a.energy_wh,
        )
    )
    _energy(rows, e.job_id, e.datacenter, e.occurred_at, a)


def _result(status: str) -> Callable[[TypedRows, c.RunCompleted | c.RunFailed], None]:
    def handle(rows: TypedRows, e: c.RunCompleted | c.RunFailed) -> None:
        a = e.accounting
        done = e if isinstance(e, c.RunCompleted) else None
        rows.run_results.append(
            (
                e.job_id,
                e.study_id,
                status,
                e.occurred_at,
                clean_text(e.datacenter),
                _json(done.config) if done else None,
                _json(done.metrics) if done else None,
                e.reason.value if isinstance(e, c.RunFailed) else None,
                done.steps if done else None,
                done.early_stopped if done else None,
                a.tokens_seen,
                a.tokens_with_padding,
                a.energy_wh,
                a.gpu_hours,
                a.wall_seconds,
                a.power_source,
                _json(done.hardware) if done and done.hardware else None,
                clean_text(done.stop_reason) if done and done.stop_reason else None,
                done.majority_baseline if done else None,
                a.emissions_g,
                clean_text(done.adapter_key) if done and done.adapter_key else None,
            )
        )
        _energy(rows, e.job_id, e.datacenter, e.occurred_at, a)

    return handle


def _paused(rows: TypedRows, e: c.RunPaused) -> None:
    _energy(rows, e.job_id, e.datacenter, e.occurred_at, e.accounting)


def _forecast(rows: TypedRows, e: c.CarbonForecast) -> None:
    """Each hour of the forecast; an hour of its issue already held keeps its values and gains
    the flags (stale, short history) of this forecast too."""
    _observed(rows, e)
    imputed = set(e.imputed_hours)
    region = clean_text(e.region)
    for i, (g, lo, hi) in enumerate(
        zip(e.g_per_kwh, e.p10_g_per_kwh, e.p90_g_per_kwh, strict=True)
    ):
        hour = e.start + timedelta(hours=i)
        key = (region, e.issued_at, hour)
        current = rows.forecast_points.get(key)
        if current is not None:
            rows.forecast_points[key] = (
                *current[:7],
                current[7] or e.stale,
                current[8],
                current[9] or e.short_history,
            )
            continue
        rows.forecast_points[key] = (
            hour,
            region,
            e.issued_at,
            g,
            lo,
            hi,
            clean_text(e.model_version),
            e.stale,
            i in imputed,
            e.short_history,
        )


def _observed(rows: TypedRows, e: c.CarbonForecast) -> None:
    """The observed hours the forecast carries; of two reports of an hour, the later issue's."""
    if e.observed is None:
        return
    region, source, signal = clean_text(e.region), clean_text(e.observed.source), e.observed.signal
    for h in e.observed.hours:
        key = (region, h.hour, signal)
        current = rows.observed.get(key)
        if current is not None and (current[5], current[3]) >= (e.issued_at, h.g_per_kwh):
            continue
        rows.observed[key] = (
            region,
            h.hour,
            signal,
            h.g_per_kwh,
            source,
            e.issued_at,
            e.emission_factors,
        )


def _status(rows: TypedRows, e: c.AgentStatus) -> None:
    rows.agent_status.append(
        (
            e.occurred_at,
            e.event_id,
            clean_text(e.datacenter),
            clean_text(e.region),
            e.gpus_total,
            e.gpus_free,
            clean_text(e.gpu_model),
            e.power_per_gpu_w,
            e.pue,
            len(e.running_jobs),
        )
    )


def _submitted(rows: TypedRows, e: c.DatasetSubmitted) -> None:
    s = e.spec
    url = str(s.webhook_url) if s.webhook_url else None
    if s.webhook_sealed is not None:  # the whole URL, credentials included: stored here only
        try:
            url = rows.unseal(s.webhook_sealed) if rows.unseal is not None else None
        except ValueError:
            url = None
        if url is None:
            url = str(s.webhook_url)  # delivered without its credentials; the writer warns
            rows.unopened.append(e.study_id)
    rows.studies.append(
        (
            e.study_id,
            e.occurred_at,
            url,
            clean_text(s.base_model),
            s.task.value,
            s.home_datacenter,
            _json(s),
        )
    )


def _profiled(rows: TypedRows, e: c.DatasetProfiled) -> None:
    rows.study_profiles.append((e.study_id, e.occurred_at, e.features.n_classes))


def _requested(rows: TypedRows, e: c.JobRequested) -> None:
    rows.job_requests.append(
        (
            e.job_id,
            e.study_id,
            e.trial_index,
            e.occurred_at,
            clean_text(e.spec.base_model),
            e.spec.home_datacenter,
            _json(e.config),
            e.predicted_loss,
            e.predicted_loss_std,
            e.gpus,
            e.estimated_gpu_hours,
            e.power_kw,
            e.deadline,
            clean_text(e.metric_name) if e.metric_name else None,
            e.predicted_metric,
            e.predicted_metric_std,
            *(e.predicted_metric_interval or (None, None)),
        )
    )


def _stopped(rows: TypedRows, e: c.StudyStopped) -> None:
    metric = clean_text(e.metric_name) if e.metric_name else None
    rows.study_stops.append((e.study_id, e.occurred_at, e.trials_requested, metric))


def _cancelled(rows: TypedRows, e: c.JobCancelled) -> None:
    rows.job_cancellations.append((e.job_id, e.study_id, e.occurred_at))


def _plan(rows: TypedRows, e: c.Plan) -> None:
    rows.plans.append(
        (
            e.event_id,
            e.occurred_at,
            e.plan_version,
            e.horizon_start,
            e.expected_emissions_g,
            e.baseline_emissions_g,
            e.solve_seconds,
            e.mip_gap,
            list(e.infeasible_jobs),
        )
    )
    for entry in e.entries:
        rows.plan_entries.append(
            (
                e.event_id,
                entry.job_id,
                clean_text(entry.datacenter),
                list(entry.hours),
                entry.emissions_g,
            )
        )


def _assignment(rows: TypedRows, e: c.Assignment) -> None:
    rows.assignments.append(
        (
            e.event_id,
            e.occurred_at,
            e.job_id,
            e.study_id,
            clean_text(e.datacenter),
            e.action.value,
            e.plan_version,
            e.gpus,
            e.hours_planned,
        )
    )


_HANDLERS: dict[type, Any] = {
    c.RunProgress: _progress,
    c.RunCompleted: _result("completed"),
    c.RunFailed: _result("failed"),
    c.RunPaused: _paused,
    c.CarbonForecast: _forecast,
    c.AgentStatus: _status,
    c.DatasetSubmitted: _submitted,
    c.DatasetProfiled: _profiled,
    c.JobRequested: _requested,
    c.StudyStopped: _stopped,
    c.JobCancelled: _cancelled,
    c.Plan: _plan,
    c.Assignment: _assignment,
}
