"""``quantize_snapshot``: build another index variant from the stored embeddings.

No re-encoding: the variant is trained and filled from ``embeddings.npy``. Its recall@20 is
measured against exact search on sampled passage vectors, and unless the search knobs are
given, the cheapest probes/candidates setting that reaches ``target_recall`` is chosen.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ragdesk.core.atomic import remove_temp_files
from ragdesk.core.catalog import Catalog
from ragdesk.core.errors import BadInputError
from ragdesk.core.paths import DataDir
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.safe_json import as_int
from ragdesk.core.snapshots import faiss_variants as fv
from ragdesk.core.snapshots import locks
from ragdesk.core.snapshots import variant_search as vs
from ragdesk.core.snapshots import variant_tuning as vt
from ragdesk.core.snapshots.index import load_embeddings
from ragdesk.core.snapshots.lifecycle import snapshot_folder
from ragdesk.core.snapshots.manifest import (
    MANIFEST_FILE,
    VariantEntry,
    read_manifest,
    sha256_file,
    write_manifest,
)

if TYPE_CHECKING:
    import faiss

# ivf-pq "ondisk": 1 keeps the inverted lists in a file of their own (fv.fill_on_disk)
BUILD_KEYS = {fv.IVF_PQ: ("nlist", "m", "nbits", "ondisk"),
              fv.HNSW_SQ8: ("M", "ef_construction")}
SEARCH_KEYS = {fv.IVF_PQ: "nprobe", fv.HNSW_SQ8: "ef_search"}
DEFAULT_TARGET_RECALL = 0.95
DEFAULT_QUERIES = 1000


@dataclass(frozen=True)
class QuantizeResult:
    snapshot: str
    variant: str
    file: str
    bytes: int
    bytes_per_passage: float
    recall_at_20: float
    params: dict[str, object]
    build_s: float
    tuned_on: str = ""
    tuning: list[dict[str, float]] = field(default_factory=list)
    target_recall: float = DEFAULT_TARGET_RECALL
    # Set when the measured recall is below the target: the variant was still built and
    # recorded (it may be the best this snapshot allows), but its answers miss passages
    # that exact search finds, and the user has to hear it.
    warning: str = ""

    def to_json(self) -> dict[str, object]:
        return {"snapshot": self.snapshot, "variant": self.variant, "file": self.file,
                "bytes": self.bytes, "bytes_per_passage": self.bytes_per_passage,
                "recall_at_20": self.recall_at_20, "params": self.params,
                "build_s": self.build_s, "tuned_on": self.tuned_on,
                "target_recall": self.target_recall, "below_target": bool(self.warning),
                "warning": self.warning}


def quantize_snapshot(
    data: DataDir,
    catalog: Catalog,
    name: str,
    variant: str,
    *,
    params: dict[str, object] | None = None,
    target_recall: float = DEFAULT_TARGET_RECALL,
    queries: int = DEFAULT_QUERIES,
    make_default: bool = False,
    query_vectors: np.ndarray | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> QuantizeResult:
    """Build (or rebuild) ``variant`` of snapshot ``name`` and record it.

    ``params`` may hold build settings (ivf-pq: nlist, m, nbits; hnsw-sq8: M,
    ef_construction) and search settings (nprobe or ef_search, rerank); search settings
    that are not given are tuned to reach ``target_recall``. Recall is measured on
    ``query_vectors`` (real questions, encoded) when given, otherwise on ``queries``
    stand-in questions made from sampled passages (``faiss_variants.sample_queries``).
    """
    fv.check_variant(variant)
    params = dict(params or {})
    if not 0 < target_recall <= 1:
        raise BadInputError(f"The target recall must be in (0, 1], not {target_recall}.")
    if queries < 1:
        raise BadInputError(f"At least one query is needed to measure recall, not {queries}.")
    folder, slug = snapshot_folder(data, catalog, name)
    manifest = read_manifest(folder)
    emb = load_embeddings(folder, manifest)
    n = emb.shape[0]
    prog = Progress(None, "exact search for the tuning queries", progress)
    prog.set(0)
    sample, tuned_on = _tuning_queries(emb, query_vectors, queries, name)
    _, exact_ids = fv.exact_search(emb, sample, vt.RECALL_K, release=True)
    tuning: list[dict[str, float]] = []
    if variant == fv.FLAT:
        entry = manifest.variants[fv.FLAT]
        file, nbytes, chosen, recall, build_s = entry.file, entry.bytes, {}, 1.0, 0.0
        if make_default and manifest.default_variant != fv.FLAT:
            with locks.snapshot_lock(data.snapshots_dir, slug):
                manifest = read_manifest(folder)
                manifest.default_variant = fv.FLAT
                write_manifest(folder, manifest)
    else:
        built = _build_and_tune(variant, params, emb, sample, exact_ids, target_recall, prog,
                                progress, cancel, folder)
        chosen, recall, tuning, build_s = built.chosen, built.recall, built.tuning, built.build_s
        file, nbytes = _store_unless_cancelled(data, slug, folder, variant, built,
                                               make_default, cancel)
    catalog.upsert_variant(name, variant, file, bytes=nbytes, bytes_per_passage=nbytes / n,
                           recall_at_20=recall, params=chosen)
    return QuantizeResult(name, variant, file, nbytes, nbytes / n, recall, chosen,
                          round(build_s, 3), tuned_on, tuning, target_recall,
                          recall_warning(variant, recall, target_recall, params, chosen))


def recall_warning(variant: str, recall: float, target: float, given: dict[str, object],
                   chosen: dict[str, object]) -> str:
    """What to tell the user when ``recall`` fell short of ``target`` ("" when it did not)."""
    if recall >= target or variant == fv.FLAT:
        return ""
    knob = SEARCH_KEYS[variant]
    setting = ", ".join(f"{k}={chosen[k]}" for k in (knob, "rerank") if k in chosen)
    which = "the given" if knob in given and "rerank" in given else "the best tried"
    build = "m" if variant == fv.IVF_PQ else "M"
    return (f"recall@20 is {recall:.3f}, below the target {target:.2f}: {which} search "
            f"setting ({setting}) misses {1 - recall:.0%} of the top-20 passages exact search "
            f"finds. Try a larger {build}, {knob} or rerank, or keep the flat variant as the "
            "default.")


def _tuning_queries(emb: np.ndarray, query_vectors: np.ndarray | None, queries: int,
                    name: str) -> tuple[np.ndarray, str]:
    """The queries recall is measured on, and what they are (for the record)."""
    if query_vectors is None:
        sample = vt.sample_queries(emb, queries)
        return sample, f"{len(sample)} sampled passages turned to cosine {vt.PROXY_COSINE}"
    sample = np.ascontiguousarray(query_vectors, dtype=np.float32)
    if sample.ndim != 2 or sample.shape[1] != emb.shape[1] or len(sample) == 0:
        raise BadInputError(f"The tuning queries have shape {sample.shape}; the snapshot "
                            f"{name!r} holds {emb.shape[1]}-d vectors.")
    return sample, f"{len(sample)} given queries"


@dataclass
class _Built:
    """A built index and the search settings tuned for it."""

    index: faiss.Index
    chosen: dict[str, object]
    recall: float
    tuning: list[dict[str, float]]
    build_s: float


def _build_and_tune(variant: str, params: dict[str, object], emb: np.ndarray, sample: np.ndarray,
                    exact_ids: np.ndarray, target_recall: float, prog: Progress,
                    progress: ProgressCallback | None, cancel: CancelToken | None,
                    folder: Path) -> _Built:
    unknown = set(params) - set(BUILD_KEYS[variant]) - {SEARCH_KEYS[variant], "rerank"}
    if unknown:
        raise BadInputError(f"{variant} has no parameter {sorted(unknown)[0]!r}.",
                            hint=f"It takes {', '.join(BUILD_KEYS[variant])}, "
                            f"{SEARCH_KEYS[variant]} and rerank.")
    n, dim = emb.shape
    build = fv.default_params(variant, n, dim)
    build.update({k: as_int(v) for k, v in params.items() if k in BUILD_KEYS[variant]})
    if not build.get("ondisk"):
        build.pop("ondisk", None)
    _check_build(variant, build, n, dim)
    t0 = time.perf_counter()
    # built beside the index as a temporary file of its own (removed as one if killed),
    # named for good under the snapshot lock (_place_lists)
    lists = folder / f".{fv.index_file(variant)}.ivfdata.tmp-{os.getpid()}"
    try:
        index = fv.build_index(variant, build, emb, progress, cancel,
                               ondisk=lists if build.get("ondisk") else None)
    except BaseException:
        lists.unlink(missing_ok=True)
        raise
    build_s = time.perf_counter() - t0
    searcher = vs.RerankSearcher(emb, index, variant, build, 0)
    knob = SEARCH_KEYS[variant]
    prog.set(0, f"measuring recall@20 of {variant}")
    res = vt.tune(
        searcher, sample, exact_ids, target=target_recall,
        knobs=(as_int(params[knob]),) if knob in params else None,
        reranks=(as_int(params["rerank"]),) if "rerank" in params else None, cancel=cancel)
    return _Built(index, {**build, **res.params}, res.recall, res.table, build_s)


def _store_unless_cancelled(data: DataDir, slug: str, folder: Path, variant: str,
                            built: _Built, make_default: bool,
                            cancel: CancelToken | None) -> tuple[str, int]:
    try:
        if cancel is not None:
            cancel.raise_if_cancelled()
        return _store_variant(data, slug, folder, variant, built, make_default)
    finally:
        lists = fv.ondisk_file(built.index)
        if lists is not None and lists.name.startswith("."):  # never placed: its temp file
            lists.unlink(missing_ok=True)


def _store_variant(data: DataDir, slug: str, folder: Path, variant: str, built: _Built,
                   make_default: bool) -> tuple[str, int]:
    """Write the index and record it in the manifest; (its file name, its size on disk,
    with its on-disk inverted lists if it has them)."""
    file = fv.index_file(variant)
    path = folder / file
    with locks.snapshot_lock(data.snapshots_dir, slug):
        lists = _place_lists(folder, variant, built.index)
        # A quantize killed before its rename left its index's (or the manifest's)
        # temporary file for good; a ready snapshot's index files and manifest
        # are written only under this lock.
        remove_temp_files(folder, lambda target: target.startswith("index.")
                          or target == MANIFEST_FILE)
        fv.write_index(built.index, path)
        nbytes = path.stat().st_size
        checksum = sha256_file(path)
        # A crash between the rename above and this manifest write leaves a valid index
        # whose checksum `verify` reports as stale; running quantize again fixes it.
        manifest = read_manifest(folder)
        replaced = [f for f in fv.lists_files(variant, manifest.files) if f != lists]
        for f in replaced:
            del manifest.files[f]
        manifest.files[file] = {"size": nbytes, "sha256": checksum}
        if lists is not None:
            size = (folder / lists).stat().st_size
            manifest.files[lists] = {"size": size, "sha256": sha256_file(folder / lists)}
            nbytes += size
        manifest.variants[variant] = VariantEntry(file, nbytes, built.chosen, built.recall,
                                                  round(built.build_s, 3))
        if make_default:
            manifest.default_variant = variant
        write_manifest(folder, manifest)
        for f in replaced:
            (folder / f).unlink(missing_ok=True)
    return file, nbytes


def _place_lists(folder: Path, variant: str, index: faiss.Index) -> str | None:
    """Give an on-disk index's lists file its name for good, one no earlier build used:
    a reader of the index it replaces still has the old lists, and a crash before the
    index's own rename leaves the old index with its own lists."""
    tmp = fv.ondisk_file(index)
    if tmp is None:
        return None
    name = fv.lists_file(variant, secrets.token_hex(4))
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, folder / name)
    fv.point_to(index, Path(name))
    return name


def read_question_texts(path: Path, limit: int | None = None) -> list[str]:
    """The ``"question"`` of each line of a JSONL file (the NQ-open layout)."""
    out: list[str] = []
    if not Path(path).is_file():
        raise BadInputError("does not exist or is not a file.", path=path)
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                raise BadInputError(f"is not a JSON line ({exc}).", path=path,
                                    line=lineno) from exc
            q = obj.get("question") if isinstance(obj, dict) else None
            if not isinstance(q, str) or not q.strip():
                raise BadInputError('has no "question" string.', path=path, line=lineno)
            out.append(q)
            if limit is not None and len(out) >= limit:
                break
    if not out:
        raise BadInputError("holds no questions.", path=path)
    return out


def _check_build(variant: str, build: Mapping[str, int], n: int, dim: int) -> None:
    if variant == fv.IVF_PQ:
        nlist, m, nbits = int(build["nlist"]), int(build["m"]), int(build["nbits"])
        if not 1 <= nlist <= n:
            raise BadInputError(f"nlist must be between 1 and the {n:,} passages, not {nlist}.")
        if m < 1 or dim % m:
            raise BadInputError(f"m (PQ bytes) must divide the dimension {dim}; {m} does not.")
        if not 1 <= nbits <= 16 or n < (1 << nbits):
            raise BadInputError(f"nbits={nbits} needs at least {1 << nbits} passages and at "
                                "most 16 bits.")
        if build.get("ondisk") and not fv.ondisk_supported():
            raise BadInputError("This FAISS build has no on-disk inverted lists (FAISS leaves "
                                "them out on Windows).", hint="Leave out --on-disk.")
    else:
        if int(build["M"]) < 2:
            raise BadInputError(f"M must be at least 2, not {build['M']}.")
