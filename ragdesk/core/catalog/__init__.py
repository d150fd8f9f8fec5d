"""The catalog: one SQLite database (through SQLAlchemy) that tracks snapshots, index
variants, import jobs, model packs and which snapshot is active."""

from ragdesk.core.catalog.catalog import Catalog
from ragdesk.core.catalog.migrations import SCHEMA_VERSION
from ragdesk.core.catalog.records import (
    STAGE_SPARSE,
    ImportJobRecord,
    IndexVariantRecord,
    ModelPackRecord,
    SnapshotRecord,
    SnapshotState,
)

__all__ = [
    "SCHEMA_VERSION",
    "STAGE_SPARSE",
    "Catalog",
    "ImportJobRecord",
    "IndexVariantRecord",
    "ModelPackRecord",
    "SnapshotRecord",
    "SnapshotState",
]
