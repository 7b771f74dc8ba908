"""The MetaTune client: submit a study, follow it, read its results, download an adapter, cancel.

``Client`` blocks; ``AsyncClient`` is the same for asyncio. Both work through the bus as the CLI
does (which calls them): the event log is read as the admin, submissions and cancellations are
published as the submitter. Errors are :class:`~metatune.errors.MetaTuneError`::

    from metatune_cli.client import Client

    with Client() as client:
        receipt = client.submit("examples/study.yaml", trials=2)
        client.wait(receipt.study_id, on_progress=lambda p: print(p.line))
        for trial in client.results(receipt.study_id):
            print(trial.job_id, trial.status, trial.metrics)
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metatune.errors import MetaTuneError

    from .aio import AsyncClient
    from .errors import BusUnavailable, InvalidRequest, NotFound, ObjectNotFound, StillRunning
    from .models import (
        AdapterDownload,
        Cancellation,
        Progress,
        Receipt,
        StudyCancellation,
        StudyDetail,
        StudySummary,
        TrialResult,
        TrialSummary,
    )
    from .sync import Client

# Each name is imported on first use (PEP 562): `metatune submit --help` imports the submission
# module of this package without the bus client, the model card and what they import.
_HOMES = {
    "MetaTuneError": "metatune.errors",
    "AsyncClient": ".aio",
    "Client": ".sync",
    **dict.fromkeys(
        ("BusUnavailable", "InvalidRequest", "NotFound", "ObjectNotFound", "StillRunning"),
        ".errors",
    ),
    **dict.fromkeys(
        (
            "AdapterDownload",
            "Cancellation",
            "Progress",
            "Receipt",
            "StudyCancellation",
            "StudyDetail",
            "StudySummary",
            "TrialResult",
            "TrialSummary",
        ),
        ".models",
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(home, __name__), name)


__all__ = [
    "AdapterDownload",
    "AsyncClient",
    "BusUnavailable",
    "Cancellation",
    "Client",
    "InvalidRequest",
    "MetaTuneError",
    "NotFound",
    "ObjectNotFound",
    "Progress",
    "Receipt",
    "StillRunning",
    "StudyCancellation",
    "StudyDetail",
    "StudySummary",
    "TrialResult",
    "TrialSummary",
]
