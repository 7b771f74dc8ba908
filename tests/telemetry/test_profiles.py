"""The classes each study's profile counted, which put chance (1 / classes) beside every accuracy:
stored from ``metatune.datasets.profiled`` (a study profiled again keeps its latest profile, an
older one arriving late changes nothing), and backfilled from the event log by telemetry_0009,
which rolls back and applies again."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from uuid import UUID, uuid4

from metatune import contracts as c
from metatune import subjects
from metatune_telemetry.disclosure.adapters.queries import study_classes
from metatune_telemetry.ingest.adapters.writer import EventWriter
from tests.support.samples import FEATURES, NOW, SPEC

from .recording import incoming, roll_back

H = timedelta(hours=1)
PROFILES = "telemetry_0009_profiles"


def profiled(study: UUID, classes: int, at: datetime) -> tuple[str, c.DatasetProfiled]:
    features = FEATURES.model_copy(update={"n_classes": classes})
    return subjects.DATASETS_PROFILED, c.DatasetProfiled(
        occurred_at=at, study_id=study, spec=SPEC, features=features
    )


async def test_a_study_keeps_the_classes_of_its_latest_profile(db) -> None:
    study = uuid4()
    writer = EventWriter(db)
    await writer.write(incoming([profiled(study, 4, NOW)]))
    assert await study_classes(db, study) == 4
    await writer.write(incoming([profiled(study, 3, NOW + H)], first=2))  # profiled again
    await writer.write(incoming([profiled(study, 5, NOW - H)], first=3))  # an older one, late
    assert await study_classes(db, study) == 3
    assert await study_classes(db, uuid4()) is None  # never profiled: no chance baseline


async def test_the_profiles_migration_fills_from_the_log_and_rolls_back(db) -> None:
    lm, classifier = uuid4(), uuid4()
    await EventWriter(db).write(
        incoming(
            [profiled(classifier, 4, NOW), profiled(lm, 0, NOW), profiled(classifier, 6, NOW + H)]
        )
    )
    exists = "SELECT to_regclass('study_profiles') IS NOT NULL"
    await asyncio.to_thread(roll_back, db, PROFILES)
    assert (await db.fetch(exists))[0][0] is False
    assert await db.migrate() == [PROFILES]
    assert dict(await db.fetch("SELECT study_id, n_classes FROM study_profiles")) == {
        classifier: 6,  # the latest of its two profiles
        lm: 0,  # a causal LM: no classes, so no chance baseline
    }
