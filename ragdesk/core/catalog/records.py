"""The catalog's rows as values (snapshots, index variants, import jobs, model packs), the
snapshot states, and the folder names (slugs) snapshots are given."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum


class SnapshotState(str, Enum):
    IMPORTING = "importing"
    READY = "ready"
    FAILED = "failed"


# SnapshotRecord.stage of a snapshot that is not ready yet but answers with BM25: its
# passages and sparse index are complete (in its staging folder); dense vectors are pending.
STAGE_SPARSE = "sparse"


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _name_digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def slugify(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name.strip()).strip("-.").lower()
    # A name with no Latin letter or digit keeps a folder name of its own.
    return slug[:64] or f"snapshot-{_name_digest(name)}"


def unique_slug(name: str, taken: Collection[str]) -> str:
    """The folder name for a new snapshot: :func:`slugify`, or when another snapshot already
    has that folder, the same with a short hash of the name appended.

    Distinct names can share a slug (names differing in case or punctuation; before the
    digest in :func:`slugify`, every name written only in non-Latin letters became
    ``snapshot``); refusing the second name for that was a puzzle the user could not solve
    from the message.
    """
    slug = slugify(name)
    if slug not in taken:
        return slug
    return f"{slug[:55]}-{_name_digest(name)}"


@dataclass(frozen=True)
class IndexVariantRecord:
    variant: str
    file: str
    bytes: int
    bytes_per_passage: float | None
    recall_at_20: float | None
    params: dict[str, object]
    created_at: str


@dataclass(frozen=True)
class SnapshotRecord:
    id: int
    name: str
    slug: str
    folder: str
    state: str
    passages: int
    encoder_id: str | None
    encoder_family: str | None
    dim: int | None
    source: str | None
    error: str | None
    default_pack: str | None
    created_at: str
    variants: tuple[IndexVariantRecord, ...] = ()
    active: bool = False
    stage: str | None = None  # STAGE_SPARSE while an unfinished import answers with BM25

    @property
    def searchable(self) -> bool:
        """Whether questions can be asked of it now (ready, or BM25-ready while encoding)."""
        return self.state == SnapshotState.READY.value or self.stage == STAGE_SPARSE

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "slug": self.slug,
            "folder": self.folder,
            "state": self.state,
            "passages": self.passages,
            "encoder": self.encoder_id,
            "encoder_family": self.encoder_family,
            "dim": self.dim,
            "source": self.source,
            "error": self.error,
            "default_pack": self.default_pack,
            "created": self.created_at,
            "active": self.active,
            "stage": self.stage,
            "variants": [
                {
                    "variant": v.variant,
                    "file": v.file,
                    "bytes": v.bytes,
                    "bytes_per_passage": v.bytes_per_passage,
                    "recall_at_20": v.recall_at_20,
                    "params": v.params,
                }
                for v in self.variants
            ],
        }


@dataclass(frozen=True)
class ImportJobRecord:
    id: int
    snapshot_id: int | None
    kind: str
    state: str
    done: int
    total: int | None
    message: str | None
    started_at: str
    updated_at: str
    pid: int | None


@dataclass(frozen=True)
class ModelPackRecord:
    name: str
    kind: str
    question_encoder: str | None
    passage_encoder: str | None
    generator: str | None
    generator_kind: str | None
    details: dict[str, object]
    created_at: str
