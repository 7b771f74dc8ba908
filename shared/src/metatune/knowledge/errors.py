"""Errors of the knowledge base.

``MetaTuneError`` → ``KnowledgeBaseError`` → ``KbFileError`` (not a knowledge-base file, a line that
is not a run) → ``KbSchemaMismatch`` (a knowledge-base file of another schema version). A store that
cannot reach PostgreSQL raises :class:`metatune.errors.DatabaseUnavailable`.
"""

from __future__ import annotations

from pathlib import Path

from metatune.errors import MetaTuneError


class KnowledgeBaseError(MetaTuneError):
    """Base of every knowledge-base error."""


class KbFileError(KnowledgeBaseError):
    """A file is not a MetaTune knowledge-base file, or one of its lines is not a run."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class KbSchemaMismatch(KbFileError):
    """A knowledge-base file of another schema version than this code reads."""

    def __init__(self, path: Path | str, found: object, expected: int) -> None:
        self.found = found
        self.expected = expected
        super().__init__(
            path,
            f"knowledge-base schema version {found}, this code reads version {expected} "
            f"(rebuild the file or convert it with the matching MetaTune version)",
        )
