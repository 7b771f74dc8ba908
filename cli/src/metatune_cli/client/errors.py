"""What the client raises: every error is a :class:`~metatune.errors.MetaTuneError`.

The CLI turns each into its one ``error:`` line and exit code: :class:`InvalidRequest` 2 (bad
input: nothing was published), :class:`NotFound` 1, :class:`~metatune.errors.BusUnavailable` 3,
:class:`StillRunning` 4.
"""

from __future__ import annotations

from uuid import UUID

from metatune.errors import BusUnavailable, MetaTuneError, ObjectNotFound


class InvalidRequest(MetaTuneError, ValueError):
    """An argument the platform would refuse (a malformed id, an unknown datacenter, a study file
    that does not validate); raised before anything is uploaded or published."""


class NotFound(MetaTuneError, LookupError):
    """What was asked for is not in the event log (a study, a job) or has no adapter."""


class StillRunning(MetaTuneError, TimeoutError):
    """A wait ran past its limit; the study goes on."""

    def __init__(self, study_id: UUID, timeout_s: float) -> None:
        self.study_id = study_id
        super().__init__(
            f"study {study_id} has not finished after {timeout_s:.0f} s; it goes on: "
            f"`metatune study show {study_id}` follows it"
        )


__all__ = ["BusUnavailable", "InvalidRequest", "NotFound", "ObjectNotFound", "StillRunning"]
