"""``manifest.json``: what a snapshot holds, how it was made, and a checksum of every file."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from ragdesk.core.atomic import write_json_atomic
from ragdesk.core.encoders import FLOAT32, EncoderInfo, EncoderPrecision
from ragdesk.core.errors import BadInputError, CorruptSnapshotError
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.safe_json import as_int, as_object, as_opt_float, loads_bounded

MANIFEST_FILE = "manifest.json"
EMBEDDINGS_FILE = "embeddings.npy"
FORMAT_NAME = "ragdesk-snapshot"
FORMAT_VERSION = 1
FLAT = "flat"
_HASH_BLOCK = 1 << 22


@dataclass
class VariantEntry:
    """One searchable index over the embeddings. ``flat`` searches the embeddings themselves."""

    file: str
    bytes: int
    params: dict[str, object] = field(default_factory=dict)
    recall_at_20: float | None = None
    build_s: float | None = None

    def to_json(self) -> dict[str, object]:
        return {"file": self.file, "bytes": self.bytes, "params": self.params,
                "recall_at_20": self.recall_at_20, "build_s": self.build_s}

    @classmethod
    def from_json(cls, d: dict[str, object]) -> VariantEntry:
        return cls(file=str(d["file"]), bytes=as_int(d["bytes"]),
                   params=dict(as_object(d.get("params") or {})),
                   recall_at_20=as_opt_float(d.get("recall_at_20")),
                   build_s=as_opt_float(d.get("build_s")))


@dataclass
class Manifest:
    name: str
    slug: str
    created: str
    source: dict[str, object]
    passages: int
    encoder: EncoderInfo
    embeddings_dtype: str
    dim: int
    variants: dict[str, VariantEntry]
    default_variant: str
    files: dict[str, dict[str, object]]  # relative name -> {"size", "sha256"}
    # what the passages were encoded in and questions are; None: not recorded (older
    # snapshots, precomputed vectors), questions in float32
    precision: EncoderPrecision | None = None

    @property
    def query_precision(self) -> str:
        """The precision questions asked of this snapshot are encoded in."""
        return self.precision.questions if self.precision is not None else FLOAT32

    def to_json(self) -> dict[str, object]:
        extra = {} if self.precision is None else {"precision": self.precision.to_json()}
        return {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "name": self.name,
            "slug": self.slug,
            "created": self.created,
            "source": self.source,
            "passages": self.passages,
            "encoder": self.encoder.to_json(),
            "embeddings": {"file": EMBEDDINGS_FILE, "dtype": self.embeddings_dtype,
                           "shape": [self.passages, self.dim]},
            "variants": {k: v.to_json() for k, v in self.variants.items()},
            "default_variant": self.default_variant,
            "files": self.files,
            **extra,
        }

    @classmethod
    def from_json(cls, d: dict[str, object]) -> Manifest:
        if d.get("format") != FORMAT_NAME:
            raise ValueError("not a ragdesk snapshot manifest")
        if as_int(d.get("format_version", 0)) > FORMAT_VERSION:
            raise ValueError(f"format version {d['format_version']} is newer than this ragdesk")
        emb = as_object(d["embeddings"])
        shape = emb["shape"]
        if not isinstance(shape, (list, tuple)):
            raise TypeError(f"the embeddings' shape is not a list: {shape!r}")
        return cls(
            name=str(d["name"]), slug=str(d["slug"]), created=str(d["created"]),
            source=dict(as_object(d.get("source") or {})), passages=as_int(d["passages"]),
            encoder=EncoderInfo.from_json(as_object(d["encoder"])),
            embeddings_dtype=str(emb["dtype"]), dim=as_int(shape[1]),
            variants={k: VariantEntry.from_json(as_object(v))
                      for k, v in as_object(d["variants"]).items()},
            default_variant=str(d.get("default_variant") or FLAT),
            files={str(k): dict(as_object(v)) for k, v in as_object(d["files"]).items()},
            precision=_precision_of(d),
        )


def _precision_of(d: dict[str, object]) -> EncoderPrecision | None:
    if "precision" in d:
        return EncoderPrecision.from_json(d["precision"])
    made = as_object(d.get("source") or {}).get("precision")
    # Snapshots made before the choice recorded only their passages' precision, in the
    # source; their questions were encoded in float32.
    return None if made is None else EncoderPrecision(passages=str(made), questions=FLOAT32)


def read_manifest(folder: Path) -> Manifest:
    path = folder / MANIFEST_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise CorruptSnapshotError(f"{path} is missing.") from exc
    except OSError as exc:
        raise CorruptSnapshotError(f"{path} cannot be read ({exc}).") from exc
    try:
        return Manifest.from_json(as_object(loads_bounded(raw, max_bytes=len(raw))))
    except BadInputError as exc:
        raise CorruptSnapshotError(f"{path} is not a valid snapshot manifest (it "
                                   f"{exc.message.rstrip('.')}).") from exc
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise CorruptSnapshotError(f"{path} is not a valid snapshot manifest ({exc}).") from exc


def recorded_precision(folder: Path) -> EncoderPrecision | None:
    """The encoder precision a snapshot folder's manifest records (None: none recorded, or
    no readable manifest, as for a snapshot still importing)."""
    try:
        return read_manifest(folder).precision
    except CorruptSnapshotError:
        return None


def write_manifest(folder: Path, manifest: Manifest) -> None:
    write_json_atomic(folder / MANIFEST_FILE, manifest.to_json())


def sha256_file(path: Path, progress: Progress | None = None,
                cancel: CancelToken | None = None) -> str:
    """Checksum in 4 MiB blocks; advances ``progress`` by bytes read."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            if cancel is not None:
                cancel.raise_if_cancelled()
            block = fh.read(_HASH_BLOCK)
            if not block:
                break
            h.update(block)
            if progress is not None:
                progress.update(len(block))
    return h.hexdigest()


def checksum_files(folder: Path, names: list[str], message: str,
                   progress: ProgressCallback | None = None,
                   cancel: CancelToken | None = None,
                   stats: dict[str, os.stat_result] | None = None) -> dict[str, dict[str, object]]:
    """The manifest entries of ``names``; ``stats`` receives each file's stat as it was
    before its hash (the stamp :func:`ragdesk.core.snapshots.checked.update_verified`
    records)."""
    total = sum((folder / n).stat().st_size for n in names)
    prog = Progress(total, message, progress, unit="bytes")
    out: dict[str, dict[str, object]] = {}
    for n in names:
        p = folder / n
        st = p.stat()
        out[n] = {"size": st.st_size, "sha256": sha256_file(p, prog, cancel)}
        if stats is not None:
            stats[n] = st
    return out
