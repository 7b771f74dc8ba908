"""The knowledge base of fine-tuning runs: records, files, search space, statistics, store (see records.py)."""

from .errors import KbFileError, KbSchemaMismatch, KnowledgeBaseError
from .files import KbFile, read_kb_file, repair_kb_file, write_kb_file
from .records import (
    KB_SCHEMA_VERSION,
    CurvePoint,
    DatasetInfo,
    Hardware,
    KbFileHeader,
    KbRun,
    Provenance,
    RunStatus,
    StudyBest,
)

__all__ = [
    "KB_SCHEMA_VERSION",
    "CurvePoint",
    "DatasetInfo",
    "Hardware",
    "KbFile",
    "KbFileError",
    "KbFileHeader",
    "KbRun",
    "KbSchemaMismatch",
    "KnowledgeBaseError",
    "Provenance",
    "RunStatus",
    "StudyBest",
    "read_kb_file",
    "repair_kb_file",
    "write_kb_file",
]
# The store (PostgreSQL) is imported from its module, ``metatune.knowledge.store.KnowledgeStore``;
# the public tables, the portfolio and the build are the knowledge-base package's (``metatune_kb``).
