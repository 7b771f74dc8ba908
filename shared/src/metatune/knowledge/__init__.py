"""The knowledge base of fine-tuning runs: records, search space, store, import (see records.py)."""

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
# The store (PostgreSQL) and the public-table importer are imported from their modules:
# ``metatune.knowledge.store.KnowledgeStore``, ``metatune.knowledge.public.import_public``.
