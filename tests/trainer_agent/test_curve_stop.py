"""The learning-curve stopper: known answers on synthetic curves, a real run stopped by it, its curve kept
across a pause, and the agent stopping a trial against its study's best read from the bus."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any
from uuid import uuid4

import numpy as np
import pytest
import torch

from metatune.bus import STUDIES_BUCKET
from metatune.contracts import AssignmentAction, RunCompleted
from metatune.knowledge import StudyBest
from metatune_trainer_agent.adapters.checkpoint_bytes import checkpoint_from_bytes
from metatune_trainer_agent.adapters.curve_files import load_stopper, save_stopper
from metatune_trainer_agent.adapters.training import run_training
from metatune_trainer_agent.app import create_service
from metatune_trainer_agent.domain.curve_stop import (
    DEFAULT_GRID,
    Curve,
    CurveModelError,
    CurveStopper,
    RunShape,
    TrainingCurve,
    stop_hook,
)
from metatune_trainer_agent.domain.run import Control, RunHooks
from metatune_trainer_agent.domain.trainer import Evaluation
from metatune_trainer_agent.settings import AgentSettings
from tests.support.builders import FAST_SITE, request_for

from .agent_bus import AGENT, Bus, assignment, spec, upload_dataset

pytestmark = pytest.mark.slow  # real training runs, stopped and not

FRACTIONS = (0.0, *DEFAULT_GRID, 1.0)
SHAPE = RunShape(learning_rate=1e-3, lr_schedule="linear", warmup_ratio=0.05)


def saturating(start: float, plateau: float, tau: float) -> list[float]:
    """A curve that rises from ``start`` to ``plateau`` with time constant ``tau`` (fractions of the run)."""
    return [start + (plateau - start) * (1 - math.exp(-f / tau)) for f in FRACTIONS]


def curve_of(metric: list[float], upto: float = 1.0) -> Curve:
    return Curve(
        tuple((f, m, 1.5 - m) for f, m in zip(FRACTIONS, metric, strict=True) if f <= upto + 1e-9)
    )


def synthetic(groups: int = 8, per_group: int = 16, seed: int = 0) -> list[TrainingCurve]:
    """Curves whose end is decided early (fast saturation, small noise): the answer is known."""
    rng = np.random.default_rng(seed)
    runs = []
    for g in range(groups):
        for _ in range(per_group):
            metric = saturating(
                rng.uniform(0.2, 0.3), rng.uniform(0.3, 0.95), rng.uniform(0.05, 0.15)
            )
            metric = [m + rng.normal(0, 0.005) for m in metric]
            shape = RunShape(10 ** rng.uniform(-4, -2.5), "linear", 0.05)
            runs.append(TrainingCurve(curve_of(metric), shape, metric[-1], f"dataset-{g}"))
    return runs


@pytest.fixture(scope="module")
def stopper() -> CurveStopper:
    return CurveStopper.fit(synthetic(), provenance={"kb_file": "synthetic"})


def test_a_run_that_cannot_beat_the_best_is_stopped_and_the_one_that_ends_best_is_not(
    stopper: CurveStopper,
) -> None:
    stuck = saturating(0.25, 0.5, 0.1)  # ends at 0.5
    rising = saturating(0.25, 0.9, 0.1)  # ends at 0.9, above the study's best 0.8
    reason = stopper.should_stop(curve_of(stuck, upto=0.5), SHAPE, best=0.8)
    assert reason is not None and "below the study's best 0.800" in reason
    assert stopper.should_stop(curve_of(rising, upto=0.5), SHAPE, best=0.8) is None
    assert (
        stopper.should_stop(curve_of(stuck, upto=0.5), SHAPE, best=None) is None
    )  # first trial: never

    prediction = stopper.predict(curve_of(stuck, upto=0.5), SHAPE)
    assert prediction is not None and prediction.final == pytest.approx(0.5, abs=0.05)
    assert prediction.upper >= prediction.final
    wider = stopper.predict(curve_of(stuck, upto=0.5), SHAPE, confidence=0.99)
    assert wider is not None and wider.upper >= prediction.upper


def test_the_pace_guard_keeps_a_late_climber_the_model_has_never_seen(
    stopper: CurveStopper,
) -> None:
    """Trained only on curves that saturate early, the model predicts a steady climber to level off;
    its own pace over the learning rate still to come says it can overtake the best, so it runs on."""
    constant = RunShape(learning_rate=2e-3, lr_schedule="constant", warmup_ratio=0.0)
    climber = [0.2 + 0.7 * f for f in FRACTIONS]  # linear under a constant rate: ends at 0.9
    prefix = curve_of(climber, upto=0.25)
    prediction = stopper.predict(prefix, constant)
    assert prediction is not None and prediction.upper < 0.8  # the bound alone would stop it
    assert prediction.extrapolated == pytest.approx(0.9, abs=0.01)
    assert stopper.should_stop(prefix, constant, best=0.8, guard=False) is not None
    assert stopper.should_stop(prefix, constant, best=0.8) is None
    flat = [0.2 + 0.1 * min(f, 0.125) / 0.125 for f in FRACTIONS]  # stalled at 0.3
    assert stopper.should_stop(curve_of(flat, upto=0.25), constant, best=0.8) is not None


def test_a_replayed_study_keeps_its_best_run_and_stops_the_hopeless(stopper: CurveStopper) -> None:
    plateaus = [0.6, 0.45, 0.4, 0.55, 0.35, 0.9, 0.5]  # the sixth ends best
    best: float | None = None
    stopped = []
    for plateau in plateaus:
        metric = saturating(0.25, plateau, 0.1)
        at = next(
            (
                i
                for i in range(1, len(DEFAULT_GRID) + 1)
                if stopper.should_stop(curve_of(metric, upto=FRACTIONS[i]), SHAPE, best) is not None
            ),
            None,
        )
        reached = metric[-1] if at is None else metric[at]
        stopped.append(at is not None)
        best = reached if best is None else max(best, reached)
    assert not stopped[0] and not stopped[5]  # the first (no best yet) and the best run finish
    assert sum(stopped) >= 4  # every run ending clearly below 0.6 is cut
    assert best == pytest.approx(saturating(0.25, 0.9, 0.1)[-1])


def test_the_model_file_round_trips_and_a_foreign_file_is_refused(
    stopper: CurveStopper, tmp_path: Path
) -> None:
    path = tmp_path / "stopper.json"
    save_stopper(stopper, path)
    loaded = load_stopper(path)
    assert loaded.provenance["runs"] == 128 and loaded.provenance["kb_file"] == "synthetic"
    for plateau in (0.4, 0.7, 0.9):
        for upto in (0.125, 0.5, 0.875):
            curve = curve_of(saturating(0.25, plateau, 0.3), upto=upto)
            assert loaded.predict(curve, SHAPE) == stopper.predict(curve, SHAPE)
    path.write_text('{"kind": "something-else", "format": 7}')
    with pytest.raises(CurveModelError, match="format 7"):
        load_stopper(path)


def test_a_curve_at_another_cadence_is_interpolated_onto_the_grid() -> None:
    evaluations = [
        (s, Evaluation(loss=1.0 - s / 200, accuracy=0.2 + s / 200)) for s in range(0, 51, 10)
    ]  # every 10 %
    curve = Curve.from_evaluations(evaluations, total_steps=100)
    assert curve is not None
    prefix = curve.prefix(DEFAULT_GRID)
    assert prefix is not None
    metric, _ = prefix
    assert metric == pytest.approx(
        [0.2, 0.2625, 0.325, 0.3875, 0.45]
    )  # at 0, 1/8, 2/8, 3/8, 4/8 of the run
    assert Curve.from_evaluations([(0, Evaluation(loss=1.0))], 10) is None  # no accuracy: no curve


def test_a_real_run_is_stopped_by_the_hook_and_reports_why(
    stopper: CurveStopper, intents: Path
) -> None:
    request = request_for(intents, max_steps=16).model_copy(deep=True)
    request = request.model_copy(
        update={"options": request.options.model_copy(update={"eval_every": 4})}
    )
    calls: list[int] = []

    def best() -> float:
        calls.append(1)
        return 1.0  # another trial of the study reached perfect accuracy: nothing can beat it

    hook = stop_hook(stopper, RunShape.of(request.config), best)
    outcome = run_training(request, site=FAST_SITE, hooks=RunHooks(should_stop=hook))
    assert outcome.status == "completed" and outcome.early_stopped
    assert outcome.step < 16 and outcome.stop_reason is not None
    assert outcome.stop_reason.startswith("learning curve: final accuracy predicted")
    assert calls and outcome.adapter is not None

    unbeaten = run_training(
        request,
        site=FAST_SITE,
        hooks=RunHooks(should_stop=stop_hook(stopper, RunShape.of(request.config), lambda: None)),
    )
    assert unbeaten.step == 16 and not unbeaten.early_stopped and unbeaten.stop_reason is None


def test_a_checkpoint_keeps_the_evaluations_and_a_resumed_run_sees_its_whole_curve(
    intents_binary: Path, cache_dir: Path
) -> None:
    request = request_for(intents_binary, max_steps=12, cache=cache_dir)
    request = request.model_copy(
        update={"options": request.options.model_copy(update={"eval_every": 3})}
    )
    steps: list[int] = []

    def pause_after_7() -> Control | None:
        return Control.pause if len(steps) >= 7 else None

    def count(progress: Any) -> None:
        if progress.kind != "estimate":
            steps.append(progress.step)

    first = run_training(
        request, site=FAST_SITE, hooks=RunHooks(control=pause_after_7, on_progress=count)
    )
    assert first.status == "paused" and first.checkpoint is not None
    saved = checkpoint_from_bytes(
        first.checkpoint, expect_fingerprint=_fingerprint_of(first.checkpoint)
    )
    assert [step for step, _ in saved.evaluations] == [0, 3, 6]
    assert saved.evaluations[1][1]["accuracy"] == first.evaluations[1][1].accuracy

    seen: list[list[int]] = []

    def record(step: int, total: int, evaluations: list[tuple[int, Evaluation]]) -> None:
        seen.append([s for s, _ in evaluations])

    second = run_training(
        request, site=FAST_SITE, resume_from=first.checkpoint, hooks=RunHooks(should_stop=record)
    )
    assert second.step == 12 and seen[0] == [
        0,
        3,
        6,
        9,
    ]  # the first call after resume has the whole prefix
    assert [s for s, _ in second.evaluations] == [0, 3, 6, 9, 12]

    # a checkpoint written before evaluations were kept still resumes, with an empty curve
    state = torch.load(io.BytesIO(first.checkpoint), weights_only=True)
    del state["evaluations"]
    buffer = io.BytesIO()
    torch.save(state, buffer)
    old = checkpoint_from_bytes(buffer.getvalue(), expect_fingerprint=state["fingerprint"])
    assert old.evaluations == [] and old.position.step == saved.position.step


def _fingerprint_of(data: bytes) -> str:
    return str(torch.load(io.BytesIO(data), weights_only=True)["fingerprint"])


# ----------------------------------------------------------------- the agent through a real NATS
@pytest.fixture(scope="module")
def nats_url(module_nats: str) -> str:
    return module_nats


async def test_the_agent_stops_a_trial_that_cannot_beat_its_study_best(
    nats_url: str, tmp_path: Path, stopper: CurveStopper, intents_binary: Path
) -> None:
    model = tmp_path / "stopper.json"
    save_stopper(stopper, model)
    settings = AgentSettings(
        nats_url=nats_url,
        data_dir=tmp_path / "data",
        heartbeat_s=0.5,
        ack_wait_s=3.0,
        retry_backoff_s=0.2,
    )
    service = create_service(
        "fra1", settings.model_copy(update={**AGENT, "agent_curve_stop_model": model})
    )
    async with Bus(settings) as bus, service.running():
        dataset = await upload_dataset(settings, intents_binary)
        study = uuid4()
        kv = await bus.js.key_value(STUDIES_BUCKET)
        await kv.put(
            str(study),
            StudyBest(study_id=study, metric_name="accuracy", best=1.0, completed=3)
            .model_dump_json()
            .encode(),
        )
        hopeless, first_of_other = uuid4(), uuid4()
        await bus.assign(
            assignment("fra1", AssignmentAction.start, hopeless, spec(dataset)).model_copy(
                update={"study_id": study}
            )
        )
        await bus.assign(
            assignment("fra1", AssignmentAction.start, first_of_other, spec(dataset)).model_copy(
                update={"study_id": uuid4()}
            )
        )  # a study with no best yet: never stopped by the predictor
        stopped = await bus.wait_for(RunCompleted, hopeless)
        finished = await bus.wait_for(RunCompleted, first_of_other)
    assert stopped.early_stopped and stopped.steps < 8
    assert stopped.stop_reason is not None and stopped.stop_reason.startswith("learning curve")
    assert finished.steps == 8 and not finished.early_stopped
