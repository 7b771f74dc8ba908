"""Learning-curve stopping on the agent: a run is stopped early by the curve stopper
(:mod:`..domain.curve_stop`) when its predicted final metric cannot beat its study's best so far,
read at each evaluation from the KV bucket ``metatune_studies`` (written by the recommender); the
first trial of a study (no best yet) is never stopped by it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from uuid import UUID

from nats.js.errors import KeyNotFoundError
from pydantic import ValidationError

from metatune.bus import STUDIES_BUCKET
from metatune.contracts import Assignment, TaskType
from metatune.knowledge import StudyBest
from metatune.service import Service

from ..domain.curve_stop import CurveModelError, CurveStopper, RunShape, stop_hook
from ..domain.request import TrainingRequest
from ..domain.trainer import Evaluation
from ..settings import AgentSettings
from .curve_files import load_stopper
from .package_data import shipped_model_path

log = logging.getLogger("metatune.agent")
STUDY_BEST_TIMEOUT_S = 5.0
CURVE_STOP_TASKS = (
    TaskType.classification,
    TaskType.pair_classification,
)  # the curves the model learned: accuracy

StopRule = Callable[[int, int, list[tuple[int, Evaluation]]], str | None]


class StudyStopping:
    """The curve-stop model (loaded once, on first use) and each trial's stop rule."""

    def __init__(self, service: Service, settings: AgentSettings) -> None:
        self.service = service
        self.settings = settings
        self._stopper: CurveStopper | None = None
        self._loaded = False

    def stopper(self) -> CurveStopper | None:
        """The curve-stop model; None when switched off or unreadable (logged, runs go on)."""
        if not self._loaded:
            self._loaded = True
            if self.settings.agent_curve_stop:
                path = self.settings.agent_curve_stop_model or shipped_model_path()
                try:
                    self._stopper = load_stopper(path)
                except CurveModelError as exc:
                    log.warning("learning-curve stopping off: %s", exc)
        return self._stopper

    def rule(
        self,
        loop: asyncio.AbstractEventLoop | None,
        assignment: Assignment,
        request: TrainingRequest,
    ) -> StopRule | None:
        """The stop rule of ``assignment``'s run (called from the training thread; the study's
        best is read on ``loop``); None where the model is off or does not know the task."""
        stopper = self.stopper()
        if stopper is None or request.task not in CURVE_STOP_TASKS:
            return None
        assert loop is not None
        study_id, job_id = assignment.study_id, assignment.job_id

        def best() -> float | None:  # training thread: ask the event loop for the KV entry
            future = asyncio.run_coroutine_threadsafe(self.study_best(study_id), loop)
            try:
                found = future.result(STUDY_BEST_TIMEOUT_S)
            except Exception as exc:  # the bus is slow or down: no stop, training goes on
                future.cancel()
                log.warning("job %s: study best of %s not read: %r", job_id, study_id, exc)
                return None
            if found is None or found.metric_name != stopper.metric_name or found.job_id == job_id:
                return None
            return found.best

        return stop_hook(
            stopper,
            RunShape.of(request.config),
            best,
            confidence=self.settings.agent_curve_stop_confidence,
            margin=self.settings.agent_curve_stop_margin,
        )

    async def study_best(self, study_id: UUID) -> StudyBest | None:
        """The study's best finished trial so far, from KV ``metatune_studies``; None before the first."""
        kv = await self.service.js.key_value(STUDIES_BUCKET)
        try:
            entry = await kv.get(str(study_id))
        except KeyNotFoundError:
            return None
        if not entry.value:
            return None  # deleted
        try:
            return StudyBest.model_validate_json(entry.value)
        except ValidationError as exc:
            log.warning("study best of %s unreadable, ignored: %s", study_id, exc)
            return None
