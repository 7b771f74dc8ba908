"""Which events a study's webhook hears about, and how an event finds its study.

Users want to know when their study moves (profiled, trials requested, a trial infeasible or cancelled,
finished or failed, or their input rejected), not every progress tick.
"""

from __future__ import annotations

from typing import Any

from metatune import subjects

NOTIFIED_SUBJECTS = frozenset({
    subjects.DATASETS_PROFILED,
    subjects.JOBS_REQUESTED,
    subjects.JOBS_INFEASIBLE,
    subjects.JOBS_CANCELLED,
    subjects.RUNS_COMPLETED,
    subjects.RUNS_FAILED,
})


def is_notified(subject: str) -> bool:
    return subject in NOTIFIED_SUBJECTS or subject.startswith("metatune.errors.")


def study_ref(payload: dict[str, Any]) -> tuple[str | None, str | None]:
    """(study_id, job_id) named by an event, either may be None."""
    study = payload.get("study_id")
    job = payload.get("job_id")
    if study is None and job is None and payload.get("correlation_id"):
        study = payload["correlation_id"]  # error events carry only the correlation id
    return study, job


def webhook_body(subject: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"subject": subject, "event": payload}
