"""Index snapshots: import, encode, quantize, switch, verify; crash-safe, tracked in SQLite.

A snapshot is ``snapshots/<slug>/`` under the data directory: ``manifest.json`` (source,
encoder, variants, checksums), ``passages.sqlite`` (id, title, text), ``embeddings.npy``
(row i = passage i, memory-mapped) and ``index.<variant>.faiss`` files. It is built in
``staging/<slug>/`` and renamed into place only when complete.
"""

from ragdesk.core.snapshots.builder import import_snapshot
from ragdesk.core.snapshots.chunking import PASSAGE_WORDS, split_words
from ragdesk.core.snapshots.faiss_variants import VARIANTS
from ragdesk.core.snapshots.index import (
    SnapshotIndex,
    SnapshotLibrary,
    open_searchable,
    open_snapshot,
)
from ragdesk.core.snapshots.lifecycle import (
    RecoveryReport,
    recover,
    remove_snapshot,
    remove_variant,
    set_default_variant,
)
from ragdesk.core.snapshots.manifest import Manifest, VariantEntry, read_manifest
from ragdesk.core.snapshots.quantize import QuantizeResult, quantize_snapshot
from ragdesk.core.snapshots.sources import FORMATS, detect_format
from ragdesk.core.snapshots.starter import (
    VITAL_ARTICLES,
    starter_encoder_path,
    vital_articles_path,
)
from ragdesk.core.snapshots.verify import VerifyReport, verify_snapshot

__all__ = [
    "FORMATS",
    "PASSAGE_WORDS",
    "VARIANTS",
    "VITAL_ARTICLES",
    "Manifest",
    "QuantizeResult",
    "RecoveryReport",
    "SnapshotIndex",
    "SnapshotLibrary",
    "VariantEntry",
    "VerifyReport",
    "detect_format",
    "import_snapshot",
    "open_searchable",
    "open_snapshot",
    "quantize_snapshot",
    "read_manifest",
    "recover",
    "remove_snapshot",
    "remove_variant",
    "set_default_variant",
    "split_words",
    "starter_encoder_path",
    "verify_snapshot",
    "vital_articles_path",
]
