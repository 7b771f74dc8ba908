"""The scheduler service: thin typed handlers that fold events; the runtime re-plans."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from faststream.nats.annotations import NatsMessage

from metatune import subjects, tenancy
from metatune.bus import ASSIGNMENTS_BUCKET
from metatune.contracts import (
    AgentStatus,
    Assignment,
    CarbonForecast,
    ClockTick,
    CurrentAssignment,
    ErrorKind,
    JobCancelled,
    JobLookup,
    JobLookupReply,
    JobRequested,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunProgress,
)
from metatune.provenance import RunEvent, mislabelled
from metatune.registry import Registry
from metatune.service import Service
from metatune.settings import Settings
from metatune.tenancy import FOREIGN_TENANT

from .adapters.lookup import lookup
from .adapters.replay import replay
from .adapters.runtime import Runtime
from .domain import Pace, Planner, Scheduler
from .settings import SchedulerSettings


def create_service(
    settings: Settings | None = None,
    registry: Registry | None = None,
    planner: Planner | None = None,
    debounce_s: float = 0.5,
    fast_s: float | None = 0.05,
    solve_in_process: bool = True,
) -> Service[Runtime]:
    """``debounce_s``: how long a full solve waits for a burst of events to settle; ``fast_s``:
    how long the fast path gathers new requests before placing them (None: no fast path);
    ``solve_in_process``: full solves run in a solver process (else a worker thread)."""
    settings = SchedulerSettings.of(settings)
    service: Service[Runtime] = Service("scheduler", settings=settings)
    scheduler = scheduler_for(settings, registry or settings.registry(), planner)

    async def record(assignment: Assignment) -> None:
        """Each job's current assignment in KV, for agents to refuse older ones."""
        kv = await service.js.key_value(ASSIGNMENTS_BUCKET)
        await kv.put(
            str(assignment.job_id), CurrentAssignment.of(assignment).model_dump_json().encode()
        )

    runtime = service.runtime = Runtime(
        scheduler,
        service.publish,
        lambda: service.clock.now(),
        debounce_s,
        lease_s=settings.agent_lease_s,
        record=record,
        fast_s=fast_s,
        solve_in_process=solve_in_process,
        reach=service.reaches_bus,
        solve_duty=settings.scheduler_solve_duty,
    )
    # its own outage is not the agents' silence: leases wait while it is cut off from NATS (a
    # dropped connection, or a server that stops answering its own round trips)
    service.on_connection_change(down=runtime.bus_down, up=runtime.bus_up)
    consume_requests(service, runtime)
    consume_runs(service, runtime)
    run_loops(service, runtime, settings)
    return service


def scheduler_for(
    settings: SchedulerSettings, registry: Registry, planner: Planner | None
) -> Scheduler:
    """The scheduler over ``registry``, with the settings' planner unless one is given."""
    planner = planner or Planner(
        anticipated_quantile=settings.scheduler_anticipated_quantile,
        delay_premium=settings.scheduler_delay_premium,
        hysteresis_share=settings.scheduler_hysteresis_share,
        hysteresis_near_h=settings.scheduler_hysteresis_near_h,
    )
    return Scheduler(
        registry,
        planner,
        anticipate_h=settings.scheduler_anticipate_h,
        anticipation_days=settings.scheduler_anticipation_days,
    )


def consume_requests(service: Service[Runtime], runtime: Runtime) -> None:
    """Jobs requested and cancelled, job lookups, forecasts and agents' status."""

    @service.consume(subjects.JOBS_REQUESTED, durable="scheduler-jobs")
    async def on_job(event: JobRequested) -> None:
        """A trial to place."""
        await runtime.fold(event)

    @service.consume(subjects.JOBS_CANCELLED_ALL, durable="scheduler-cancelled")
    async def on_cancelled(event: JobCancelled, message: NatsMessage) -> None:
        """A job withdrawn: stopped where it runs, never started again. An id the scheduler has
        never seen is most likely a typo, so the sender hears of it (the cancellation is kept in
        case the request does come later). A tenant cancels its own jobs only."""
        subject = message.raw_message.subject
        why = tenancy.mislabelled(subjects.tenant_of(subject), event.tenant)
        if why is None:
            await runtime.ready.wait()
            why = runtime.scheduler.state.cancel_refused(event)
        if why is not None:
            await service.report_error(
                code=FOREIGN_TENANT, message=why, subject=subject, correlation_id=event.job_id
            )
            return
        await runtime.fold(event)
        if event.job_id in runtime.scheduler.state.early_cancellations:
            await service.report_error(
                code="unknown_job",
                kind=ErrorKind.bad_input,
                subject=subject,
                correlation_id=event.job_id,
                message=f"job {event.job_id} has not been requested; it will not start if its request comes later",
            )

    @service.broker.subscriber(subjects.JOBS_LOOKUP_ALL, queue="scheduler")
    async def on_lookup(request: JobLookup, message: NatsMessage) -> JobLookupReply:
        """Where a job stands (a core-NATS request, answered on the requester's inbox), once the
        log has been replayed: before that, no answer yet, and the requester goes on without.
        A tenant hears of its own jobs only."""
        await runtime.ready.wait()
        tenant = subjects.tenant_of(message.raw_message.subject)
        return lookup(runtime.scheduler.state, request.job_id, tenant)

    @service.consume(subjects.FORECASTS_ALL, durable="scheduler-forecasts")
    async def on_forecast(event: CarbonForecast) -> None:
        """A new 168 h carbon-intensity forecast of one grid region."""
        await runtime.fold(event)

    @service.consume(subjects.AGENTS_STATUS_ALL, durable="scheduler-agents")
    async def on_agent(event: AgentStatus) -> None:
        """A live agent and its GPUs: the datacenter's capacity (none without a live agent)."""
        await runtime.fold(event)


def consume_runs(service: Service[Runtime], runtime: Runtime) -> None:
    """Run events: progress, pauses, completions, failures (from their job's datacenter only)."""

    async def fold_run(event: RunEvent, message: NatsMessage) -> None:
        """A run event counts only from the datacenter its job is assigned to (the subject's, which
        the server vouches for, and the payload's); anything else is reported, never folded."""
        subject = message.raw_message.subject
        refusal = mislabelled(event, subject) or await runtime.fold(event)
        if refusal is not None:
            await service.report_error(**replace(refusal, subject=subject).report())

    @service.consume(subjects.RUNS_PROGRESS_ALL, durable="scheduler-progress")
    async def on_progress(event: RunProgress, message: NatsMessage) -> None:
        """Measured power and remaining work of a running job."""
        await fold_run(event, message)

    @service.consume(subjects.RUNS_PAUSED_ALL, durable="scheduler-paused")
    async def on_paused(event: RunPaused, message: NatsMessage) -> None:
        """A job checkpointed: it can resume here or elsewhere."""
        await fold_run(event, message)

    @service.consume(subjects.RUNS_COMPLETED_ALL, durable="scheduler-completed")
    async def on_completed(event: RunCompleted, message: NatsMessage) -> None:
        await fold_run(event, message)

    @service.consume(subjects.RUNS_FAILED_ALL, durable="scheduler-failed")
    async def on_failed(event: RunFailed, message: NatsMessage) -> None:
        await fold_run(event, message)


def run_loops(service: Service[Runtime], runtime: Runtime, settings: SchedulerSettings) -> None:
    """The hourly re-plan, the agents' leases, and the replay of the log before the first plan."""

    @service.on_tick
    async def on_hour(tick: ClockTick) -> None:
        runtime.notify()

    @service.background
    async def leases() -> None:
        """Agents silent past METATUNE_AGENT_LEASE_S are lost; their jobs resume elsewhere."""
        await runtime.watch_leases()

    @service.background
    async def rebuild_then_plan() -> None:
        """Replay the event log into the state, then re-plan whenever it goes stale."""
        if not runtime.ready.is_set():
            # the clock is known once connected (a simulated one's speed is in KV): start-up in its hours
            hour_wall_s = service.clock.wall_seconds(timedelta(hours=1))
            runtime.scheduler.state.pace = Pace(
                min_run_h=settings.scheduler_min_run_h,
                startup_h=settings.scheduler_startup_wall_s / hour_wall_s,
                hour_wall_s=hour_wall_s,
                await_checkpoint=True,
            )
            count = await replay(service.js, settings.stream_name, runtime.scheduler.apply)
            service.status_details["replayed_events"] = str(count)
            runtime.ready.set()
        await runtime.loop()
