"""The trainer agent of one datacenter: assignments in, real training runs out.

Each start / resume runs :func:`~metatune_trainer_agent.adapters.training.run_training` in a worker thread
(the event loop keeps heartbeating and reading pause assignments). The assignment message of
a running job stays unacknowledged, kept alive with ``in_progress``: if the agent is killed,
JetStream redelivers it after ``ack_wait`` and the restarted agent continues from the job's
last checkpoint in the object store, not from step 0. A job's message is acknowledged when
the job completes, fails, pauses or stops, after its event is published.

Outcomes and object-store keys: :mod:`.run_results`.

Besides the plateau rule, a run is stopped early by the learning-curve stopper when its
predicted final metric cannot beat its study's best so far (:mod:`.study_stopping`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID

from faststream.nats.message import NatsMessage
from nats.js.errors import BucketNotFoundError, KeyNotFoundError, NotFoundError
from pydantic import ValidationError

from metatune import subjects
from metatune.bus import ASSIGNMENTS_BUCKET, CHECKPOINTS_BUCKET
from metatune.bus.retry import BUS_ERRORS
from metatune.contracts import (
    AgentStatus,
    Assignment,
    AssignmentAction,
    CarbonForecast,
    CurrentAssignment,
    ErrorKind,
    FailureReason,
    LoraConfig,
    StudySpec,
)
from metatune.private_files import private_dir
from metatune.registry import Datacenter
from metatune.service import Service

from ..domain.assignments import parse_assignment
from ..domain.carbon import ForecastIntensity
from ..domain.errors import InvalidTrainingConfig, TrainingError
from ..domain.request import TrainingRequest, TrainOptions
from ..domain.run import (
    Control,
    Progress,
    RunHooks,
    RunOutcome,
    Site,
)
from ..domain.versions import SeenVersions, superseded
from ..settings import AgentSettings
from .datasets import DatasetFetcher
from .ended_log import EndedLog
from .hardware import detect
from .jobs import Job
from .multi_device import MultiDeviceRun
from .progress_reports import ProgressReports
from .run_ids import run_key
from .run_results import RunResults, checkpoint_key
from .study_stopping import StudyStopping
from .training import run_training
from .uploads import LatestUploader

log = logging.getLogger("metatune.agent")
CHECKPOINT_UPLOAD_TIMEOUT_S = 300.0


class TrainerAgent:
    def __init__(self, service: Service, datacenter: Datacenter, settings: AgentSettings) -> None:
        self.service = service
        self.dc = datacenter
        self.settings = settings
        self.hardware = detect()
        log.info(
            "%s trains on %s: %s%s",
            datacenter.name,
            self.hardware.device,
            self.hardware.model,
            "" if self.hardware.nvml.available else f" ({self.hardware.nvml.reason})",
        )
        self.intensity = ForecastIntensity()
        # seals its run outcomes' message ids: no peer can publish first under them
        self.run_key = run_key(settings.resolved_data_dir() / "agent", datacenter.name)
        self.jobs: dict[UUID, Job] = {}
        self.versions = (
            SeenVersions()
        )  # highest plan version seen per job: older assignments are ignored
        # the start/resume assignments whose run ended here: a redelivered one is not trained again
        self.ended_log = EndedLog(settings.resolved_data_dir() / "agent", datacenter.name)
        self.ended = self.ended_log.load()
        self._executor = ThreadPoolExecutor(
            max_workers=max(1, datacenter.gpus), thread_name_prefix=f"train-{datacenter.name}"
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self.stopping = StudyStopping(service, settings)  # learning-curve stopping
        self.progress = ProgressReports(service, datacenter.name, settings)
        self.results = RunResults(service, datacenter, settings, self.run_key)

    @property
    def gpus_total(self) -> int:
        """The GPUs this agent offers: the CUDA devices it may use, or on a CPU the datacenter's
        registry figure (a CPU agent simulates them, one training thread each)."""
        return self.hardware.gpus if self.hardware.device == "cuda" else self.dc.gpus

    @property
    def gpus_free(self) -> int:
        return max(0, self.gpus_total - sum(job.assignment.gpus for job in self.jobs.values()))

    # ----------------------------------------------------------------- assignments
    async def on_assignment(self, raw: dict[str, Any], message: NatsMessage) -> bool:
        """Act on one assignment; True when the message is held (acknowledged when the job ends)."""
        parsed = parse_assignment(raw)
        assignment = parsed.assignment
        if assignment.datacenter != self.dc.name:
            await self.service.report_error(
                code="wrong_datacenter",
                kind=ErrorKind.bad_input,
                message=f"assignment for {assignment.datacenter!r} arrived at {self.dc.name!r}; not executed",
                subject=subjects.assignments(self.dc.name),
                correlation_id=assignment.job_id,
            )
            return False
        stale = self.versions.observe(assignment) or self.ended.why_not(assignment)
        if stale is None and assignment.action in (AssignmentAction.start, AssignmentAction.resume):
            stale = superseded(assignment, await self.current_assignment(assignment.job_id))
        if stale is not None:  # e.g. a killed agent's start, redelivered after the job moved on
            log.info(
                "stale %s of job %s ignored: %s", assignment.action.value, assignment.job_id, stale
            )
            return False
        if parsed.config_error is not None:
            await self.results.publish_failed(
                assignment, InvalidTrainingConfig(parsed.config_error)
            )
            return False
        job = self.jobs.get(assignment.job_id)
        if assignment.action in (AssignmentAction.pause, AssignmentAction.stop):
            if job is None:
                log.info(
                    "%s for job %s, which is not running here", assignment.action, assignment.job_id
                )
            else:
                job.control = (
                    Control.pause if assignment.action == AssignmentAction.pause else Control.stop
                )
            return False
        if job is not None:
            log.info(
                "job %s is already running here; duplicate %s ignored",
                assignment.job_id,
                assignment.action,
            )
            return False
        self._loop = asyncio.get_running_loop()
        job = Job(assignment=assignment, message=message)
        self.jobs[assignment.job_id] = job
        job.task = asyncio.create_task(self._run(job), name=f"job-{assignment.job_id}")
        return True

    async def current_assignment(self, job_id: UUID) -> CurrentAssignment | None:
        """The job's latest assignment as the scheduler recorded it (None: never recorded, e.g. sent by hand)."""
        try:
            kv = await self.service.js.key_value(ASSIGNMENTS_BUCKET)
            entry = await kv.get(str(job_id))
        except (KeyNotFoundError, BucketNotFoundError, NotFoundError):
            return None
        if not entry.value:
            return None
        try:
            return CurrentAssignment.model_validate_json(entry.value)
        except ValidationError as exc:
            log.warning("current assignment of %s unreadable, ignored: %s", job_id, exc)
            return None

    def on_forecast(self, forecast: CarbonForecast) -> None:
        if forecast.region == self.dc.region:
            self.intensity.update(forecast)

    # ----------------------------------------------------------------- one job
    async def _run(self, job: Job) -> None:
        keepalive = asyncio.create_task(self._keep_alive(job.message))
        redeliver = False
        try:
            outcome = await self._train(job)
            await self.progress.flush(job)
            if job.shutting_down and outcome.status == "paused":
                assert outcome.checkpoint is not None
                await self.results.save_checkpoint(job, outcome.checkpoint)
                redeliver = True
            else:
                await self.results.publish_outcome(job, outcome)
                self._ended(job)
        except TrainingError as exc:
            await self.progress.flush(job)
            await self.results.publish_failed(job.assignment, exc)
            self._ended(job)
        except asyncio.CancelledError:
            redeliver = True
            raise
        except BUS_ERRORS as exc:  # the bus stayed down past the retry budget: not the run's fault
            log.warning(
                "job %s: bus unavailable (%r); left for redelivery, it resumes from its checkpoint",
                job.assignment.job_id,
                exc,
            )
            redeliver = True
        except Exception as exc:
            log.exception("job %s failed", job.assignment.job_id)
            await self.progress.flush(job)
            await self.results.publish_failed(job.assignment, exc, reason=FailureReason.internal)
            self._ended(job)
        finally:
            keepalive.cancel()
            self.jobs.pop(job.assignment.job_id, None)
            try:
                if redeliver:
                    await job.message.nack()
                else:
                    await job.message.ack()
            except BUS_ERRORS as exc:  # unacknowledged: JetStream redelivers it after ack_wait
                log.warning(
                    "job %s: message not %s: %r",
                    job.assignment.job_id,
                    "nacked" if redeliver else "acked",
                    exc,
                )

    def _ended(self, job: Job) -> None:
        """The run's outcome is out: its assignment, redelivered, is not trained again."""
        event_id = job.assignment.event_id
        self.ended.add(event_id)
        try:
            self.ended_log.add(event_id)
        except OSError as exc:  # remembered in memory still; only a restart could forget it
            log.warning("job %s: ended assignment not recorded: %r", job.assignment.job_id, exc)

    async def _keep_alive(self, message: NatsMessage) -> None:
        """Tell JetStream the held message is being worked on, well within ``ack_wait``."""
        interval = max(0.5, self.service.settings.ack_wait_s / 3)
        while True:
            await asyncio.sleep(interval)
            try:
                await message.in_progress()
            except BUS_ERRORS as exc:  # the bus is down: keep trying, the run goes on
                log.warning("in-progress signal not sent: %r", exc)

    async def _train(self, job: Job) -> RunOutcome:
        taken_up = (self.service.clock.now(), time.monotonic())  # the start-up begins here
        assignment = job.assignment
        if assignment.spec is None or assignment.config is None:
            raise InvalidTrainingConfig(
                f"a {assignment.action.value} assignment needs a spec and a config"
            )
        # datasets, token caches, checkpoints: only the agent's user may read them
        data_dir = private_dir(self.service.settings.resolved_data_dir() / "agent")
        dataset = await self._dataset(assignment.spec, data_dir / "datasets")
        resume_from = await self._checkpoint(assignment)
        request = self._request(
            assignment.spec, assignment.config, dataset, data_dir / "cache" / "tokens"
        )
        hooks = RunHooks(
            on_progress=partial(self._on_progress, job),
            on_checkpoint=partial(self._on_checkpoint, job),
            control=lambda: job.control,
            should_stop=self.stopping.rule(self._loop, job.assignment, request),
        )
        planned = (
            assignment.estimated_gpu_hours / assignment.gpus
            if assignment.estimated_gpu_hours
            else None
        )
        # a trial on several devices: one process per device under torchrun, same hooks
        train = run_training if assignment.gpus == 1 else MultiDeviceRun(assignment.gpus)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor,
            partial(
                train,
                request,
                site=self._site(assignment),
                clock=self.service.clock,
                intensity=self.intensity,
                hooks=hooks,
                resume_from=resume_from,
                planned_hours=planned,
                taken_up=taken_up,
            ),
        )

    async def _dataset(self, spec: StudySpec, directory: Path) -> Path:
        """The study's dataset as a local file in ``directory`` (fetched once, then cached)."""
        objects = self.service.objects
        assert objects is not None
        fetcher = DatasetFetcher(
            objects=objects,
            js=self.service.js,
            directory=directory,
            max_bytes=self.service.settings.max_dataset_bytes,
            settings=self.service.settings,
        )
        return await fetcher.local_path(spec.dataset, spec.tenant)

    async def _checkpoint(self, assignment: Assignment) -> bytes | None:
        """The job's last checkpoint, if the object store holds one; a resume without one is
        reported (bad input) and trains from step 0."""
        objects = self.service.objects
        assert objects is not None
        key = assignment.checkpoint_key or checkpoint_key(assignment.job_id)
        if await objects.exists(CHECKPOINTS_BUCKET, key):
            return await objects.get_bytes(CHECKPOINTS_BUCKET, key)
        if assignment.action == AssignmentAction.resume:
            await self.service.report_error(
                code="checkpoint_missing",
                kind=ErrorKind.bad_input,
                message=f"resume of job {assignment.job_id}: no checkpoint {CHECKPOINTS_BUCKET}/{key}; starting from step 0",
                correlation_id=assignment.job_id,
            )
        return None

    def _request(
        self, spec: StudySpec, config: LoraConfig, dataset: Path, cache_dir: Path
    ) -> TrainingRequest:
        """What to train: the study's dataset, task and model, the trial's configuration, and this
        agent's training options."""
        return TrainingRequest(
            dataset=dataset,
            dataset_format=spec.dataset.format,
            task=spec.task,
            base_model=spec.base_model,
            text_column=spec.text_column,
            text_pair_column=spec.text_pair_column,
            label_column=spec.label_column,
            config=config,
            options=TrainOptions(
                device=self.settings.agent_device,
                cache_dir=cache_dir,
                checkpoint_every=self.settings.agent_checkpoint_every,
                max_eval_examples=self.settings.agent_max_eval_examples,
            ),
        )

    def _site(self, assignment: Assignment) -> Site:
        """Where the run trains: this datacenter's PUE and power figures, the assignment's GPUs."""
        return Site(
            datacenter=self.dc.name,
            pue=self.dc.pue,
            gpus=assignment.gpus,
            gpu_power_w=self.dc.gpu_power_w,
            watts_per_core=self.settings.agent_watts_per_core,
            idle_seconds=self.settings.agent_idle_seconds,
        )

    # ----------------------------------------------------------------- hooks (training thread)
    def _on_progress(self, job: Job, progress: Progress) -> None:
        self.progress.publish(self._loop, job, progress)

    def _on_checkpoint(self, job: Job, step: int, data: bytes) -> None:
        """Hand the checkpoint to the event loop and go on training: it is uploaded in the background
        (latest wins, retried through a bus outage)."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._checkpoint_ready, job, step, data)

    def _checkpoint_ready(self, job: Job, step: int, data: bytes) -> None:
        if job.uploader is None:
            objects, key = self.service.objects, checkpoint_key(job.assignment.job_id)
            assert objects is not None

            async def upload(blob: bytes) -> None:
                await objects.put_bytes(CHECKPOINTS_BUCKET, key, blob)

            job.uploader = LatestUploader(upload, self.settings, f"job {job.assignment.job_id}")
        job.uploader.offer(step, data)

    # ----------------------------------------------------------------- status and shutdown
    def status(self) -> AgentStatus:
        return AgentStatus(
            occurred_at=self.service.clock.now(),
            datacenter=self.dc.name,
            region=self.dc.region,
            gpus_total=self.gpus_total,
            gpus_free=self.gpus_free,
            gpu_model=self.hardware.model if self.hardware.device == "cuda" else self.dc.gpu_model,
            gpu_memory_mib=self.hardware.memory_mib,
            device=self.hardware.device,
            device_model=self.hardware.model,
            power_per_gpu_w=self.dc.gpu_power_w,
            pue=self.dc.pue,
            running_jobs=list(self.jobs),
        )

    async def shutdown(self) -> None:
        """Checkpoint every running job and leave its message for redelivery to the next agent."""
        for job in self.jobs.values():
            job.shutting_down = True
            job.control = Control.pause
        tasks = [job.task for job in self.jobs.values() if job.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=CHECKPOINT_UPLOAD_TIMEOUT_S)
        self._executor.shutdown(wait=False, cancel_futures=True)
