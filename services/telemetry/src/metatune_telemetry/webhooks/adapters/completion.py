"""Whether the studies a batch's events touch have ended: the stored facts, read in the batch's
transaction (the decision is :mod:`..domain.completion`'s).

The event that ends a study may be its ``StudyStopped`` or its last trial's final event, stored
by different writers at once. Each study is checked under a transaction-scoped advisory lock
held to commit: the second writer waits for the first to commit, and its check (a new snapshot,
at READ COMMITTED) then sees the first one's rows. So whichever order they arrive in, one of them
sees the study ended; should both, the notification's id (the study's) keeps one in the outbox.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import dict_row

from ..domain.completion import (
    StudyFacts,
    TrialFacts,
    completion,
    completion_body,
    completion_notification,
)
from ..domain.notifications import Notification

STUDY_LOCK = "SELECT pg_advisory_xact_lock(1952803943, hashtext(%s::text))"
# a job's study where the event named only the job; else the id is the study's
STUDY_OF = "SELECT coalesce((SELECT study_id FROM job_requests WHERE job_id = %(ref)s), %(ref)s)"
STOP_FACTS = (
    "SELECT s.trials_requested, s.metric_name, st.spec->>'name' AS name, "
    "st.spec->>'deadline' AS deadline "
    "FROM study_stops s LEFT JOIN studies st USING (study_id) WHERE s.study_id = %s"
)
TRIAL_FACTS = (
    "SELECT q.job_id, r.status, x.job_id IS NOT NULL AS cancelled, coalesce(r.config, q.config) AS config, "
    "r.metrics, q.metric_name, coalesce(r.early_stopped, false) AS early_stopped, r.adapter_key, "
    "coalesce(r.energy_wh, 0) AS energy_wh, coalesce(r.emissions_g, 0) AS emissions_g, "
    "r.finished_at "
    "FROM job_requests q LEFT JOIN run_results r USING (job_id) "
    "LEFT JOIN job_cancellations x USING (job_id) WHERE q.study_id = %s"
)


async def study_endings(
    cur: psycopg.AsyncCursor[Any], refs: Mapping[UUID, datetime]
) -> list[tuple[Notification, str]]:
    """The ``study.completed`` notifications (and bodies) of the studies ``refs`` (study or job
    ids, each with the time of the event that named it) whose end is now stored."""
    at_of: dict[UUID, datetime] = {}
    for ref, at in refs.items():
        await cur.execute(STUDY_OF, {"ref": ref})
        row = await cur.fetchone()
        assert row is not None
        at_of[row[0]] = max(at, at_of.get(row[0], at))
    out = []
    for study in sorted(at_of):  # one lock order for every writer
        await cur.execute(STUDY_LOCK, (study,))
        facts = await _facts(cur.connection, study)
        done = completion(facts) if facts is not None else None
        if done is not None:
            out.append((completion_notification(study), completion_body(done, at_of[study])))
    return out


async def _facts(conn: psycopg.AsyncConnection[Any], study: UUID) -> StudyFacts | None:
    """The study's stop and trials as stored; None when it has not stopped."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(STOP_FACTS, (study,))
        stop = await cur.fetchone()
        if stop is None:
            return None
        await cur.execute(TRIAL_FACTS, (study,))
        trials = await cur.fetchall()
    return StudyFacts(
        study_id=study,
        name=stop["name"],
        trials_requested=stop["trials_requested"],
        metric_name=stop["metric_name"],
        trials=[
            TrialFacts(
                job_id=t["job_id"],
                outcome=t["status"] or ("cancelled" if t["cancelled"] else None),
                config=t["config"],
                metrics=t["metrics"],
                metric_name=t["metric_name"],
                early_stopped=t["early_stopped"],
                adapter_key=t["adapter_key"],
                energy_wh=t["energy_wh"],
                emissions_g=t["emissions_g"],
                ended_at=t["finished_at"],
            )
            for t in trials
        ],
        deadline=None if stop["deadline"] is None else datetime.fromisoformat(stop["deadline"]),
    )
