"""Recommender service: a profiled dataset becomes ``trials`` job requests for the scheduler."""

from __future__ import annotations

from uuid import NAMESPACE_URL, uuid5

from metatune import subjects
from metatune.contracts import DatasetProfiled, JobRequested
from metatune.service import Service
from metatune.settings import Settings

from .domain.cold_start import cold_start_trials


def create_service(settings: Settings | None = None) -> Service:
    service = Service("recommender", settings=settings)

    @service.consume(subjects.DATASETS_PROFILED, durable="recommender")
    async def on_profiled(event: DatasetProfiled) -> None:
        """One job request per recommended configuration; ids are stable per study and trial, so a
        re-delivered profile requests nothing twice."""
        for index, trial in enumerate(cold_start_trials(event.features, event.spec.trials)):
            job_id = uuid5(NAMESPACE_URL, f"metatune:{event.study_id}:{index}")
            request = JobRequested(
                event_id=uuid5(NAMESPACE_URL, f"metatune:job-requested:{job_id}"),
                occurred_at=service.clock.now(),
                job_id=job_id,
                study_id=event.study_id,
                trial_index=index,
                spec=event.spec,
                config=trial.config,
                gpus=trial.gpus,
                estimated_gpu_hours=trial.estimated_gpu_hours,
                power_kw=trial.power_kw,
                deadline=event.spec.deadline,
            )
            await service.publish(subjects.JOBS_REQUESTED, request)

    return service
