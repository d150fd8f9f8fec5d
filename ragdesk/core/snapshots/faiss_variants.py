"""FAISS index variants over a snapshot's embeddings, with exact re-ranking.

- ``flat``: exact inner-product search over the memory-mapped ``embeddings.npy`` itself
  (no second copy on disk).
- ``hnsw-sq8``: ``HNSW{M},SQ8`` (the layout of the RAG paper's 36 GB index).
- ``ivf-pq``: ``IVF{nlist},PQ{m}x{nbits}``.

The compressed variants only pick candidates: their best ``rerank`` candidates are re-scored
with the exact inner product against rows read from the memory-mapped embeddings, so the
scores the engine sees are always exact (as in transformers' retriever), the embeddings stay
on disk, and only the compressed index is resident. ``nprobe`` / ``ef_search`` and
``rerank`` are tuned per snapshot against exact search (``tune``).
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragdesk.core.atomic import fsync_dir
from ragdesk.core.errors import BadInputError, CorruptSnapshotError, DiskFullError, is_disk_full
from ragdesk.core.pages import release_pages
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback

FLAT = "flat"
HNSW_SQ8 = "hnsw-sq8"
IVF_PQ = "ivf-pq"
VARIANTS = (FLAT, HNSW_SQ8, IVF_PQ)
RECALL_K = 20
ADD_CHUNK = 65536
# Vectors per block of an on-disk build: the block's codes (about 100 MB for 768-d PQ96) are
# what it holds in memory.
ONDISK_BLOCK = 1 << 20
EXACT_BLOCK = 65536
# Indexes at least this big are memory-mapped instead of read into memory.
MMAP_MIN_BYTES = 64 << 20
# Grids the tuner walks; a value is skipped when it does not apply (nprobe > nlist).
NPROBE_GRID = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
EF_GRID = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512)
RERANK_GRID = (20, 30, 50, 75, 100, 150, 200, 300, 400, 600, 800, 1000)


def index_file(variant: str) -> str:
    return f"index.{variant}.faiss"


def lists_file(variant: str, token: str) -> str:
    """The file of a variant's on-disk inverted lists (one name per build)."""
    return f"index.{variant}.{token}.ivfdata"


def lists_files(variant: str, names: Iterable[str]) -> list[str]:
    """Which of ``names`` are on-disk inverted lists of ``variant``."""
    return [f for f in names if f.startswith(f"index.{variant}.") and f.endswith(".ivfdata")]


def check_variant(variant: str) -> str:
    if variant not in VARIANTS:
        raise BadInputError(f"{variant!r} is not an index variant.",
                            hint=f"Choose one of: {', '.join(VARIANTS)}.")
    return variant


def _pow2_near(x: float) -> int:
    return 1 << max(0, round(math.log2(max(1.0, x))))


def _divisor_at_most(dim: int, target: int) -> int:
    for m in range(max(1, target), 0, -1):
        if dim % m == 0:
            return m
    return 1


# Sub-vector widths FAISS encodes with SIMD kernels (fvec_L2sqr_ny_D4/_D8). Other widths take
# a scalar loop: 768-d vectors in PQ128 (6 dims per byte) encode at ~120 us each on one core
# of this machine, in PQ96 (8 dims) at ~10 us, and adding is most of an ivf-pq build.
FAST_PQ_WIDTHS = (8, 4)


def pq_bytes(dim: int, target: int) -> int:
    """Bytes per PQ code (``m``): the largest with a fast sub-vector width that is at most
    ``target``, else the largest divisor of ``dim`` at most ``target``."""
    fast = [dim // w for w in FAST_PQ_WIDTHS
            if dim % w == 0 and dim // 16 <= dim // w <= max(1, target)]
    return max(fast) if fast else _divisor_at_most(dim, max(1, target))


def default_params(variant: str, n: int, dim: int) -> dict[str, Any]:
    """Build parameters that suit ``n`` vectors of ``dim`` dimensions."""
    if variant == HNSW_SQ8:
        return {"M": 32, "ef_construction": 80}
    if variant == IVF_PQ:
        if n < 64:
            raise BadInputError(
                f"ivf-pq needs at least 64 passages to train on; this snapshot has {n}.",
                hint="Use the flat variant for a snapshot this small.")
        nlist = min(_pow2_near(math.sqrt(n)), max(1, n // 39))
        # 256 centroids per sub-quantizer need ~10k training vectors; fewer get fewer bits.
        nbits = int(min(8, max(4, math.floor(math.log2(max(16, n // 39))))))
        # The largest code that keeps everything resident (codes, 8-byte ids, coarse
        # centroids, PQ codebooks) within 1/16 of the flat vectors, 4 to 16 dims per byte.
        fixed = (nlist + (1 << nbits)) * dim * 4 / n + 8
        m = int(min(dim // 4, max(dim // 16, dim / 4 - fixed)))
        return {"nlist": nlist, "m": pq_bytes(dim, m), "nbits": nbits}
    return {}


def factory_string(variant: str, params: dict[str, Any]) -> str:
    if variant == HNSW_SQ8:
        return f"HNSW{int(params['M'])},SQ8"
    if variant == IVF_PQ:
        # "np": no polysemous training, which only helps Hamming-distance filtering (unused
        # here) and makes training some 50x slower.
        return f"IVF{int(params['nlist'])},PQ{int(params['m'])}x{int(params['nbits'])}np"
    raise ValueError(f"{variant} has no FAISS factory string")


def _rows(emb: np.ndarray, start: int, stop: int, release: bool = False) -> np.ndarray:
    """Rows as float32; ``release``: unmap the pages they came from (``pages.release_pages``) in
    one-pass jobs. Searches keep them: mapping them again costs ~0.3 s per GB read."""
    out = np.ascontiguousarray(emb[start:stop], dtype=np.float32)
    if release:
        release_pages(emb, start, stop)
    return out


def training_sample(emb: np.ndarray, n_train: int, seed: int = 0) -> np.ndarray:
    n = emb.shape[0]
    if n_train >= n:
        return _rows(emb, 0, n, release=True)
    idx = np.sort(np.random.default_rng(seed).choice(n, size=n_train, replace=False))
    out = np.empty((n_train, emb.shape[1]), dtype=np.float32)
    # Gathered and released a block of rows at a time: the kernel maps the cached pages
    # around each faulting one too (fault-around), so a 6% sample maps nearly the whole file.
    cuts = np.searchsorted(idx, np.arange(0, n + EXACT_BLOCK, EXACT_BLOCK))
    for b, (lo, hi) in enumerate(itertools.pairwise(cuts)):
        out[lo:hi] = emb[idx[lo:hi]]
        release_pages(emb, b * EXACT_BLOCK, (b + 1) * EXACT_BLOCK)
    return out


def build_index(variant: str, params: dict[str, Any], emb: np.ndarray,
                progress: ProgressCallback | None = None,
                cancel: CancelToken | None = None, ondisk: Path | None = None) -> Any:
    """Train (on a seeded sample) and fill a FAISS index from the embeddings, in chunks.

    ``ondisk`` (ivf-pq): the inverted lists go to that file instead of memory
    (``fill_on_disk``); ``write_index`` then writes only the index's small header part.
    """
    import faiss

    n, dim = emb.shape
    index: Any = faiss.index_factory(dim, factory_string(variant, params),
                                     faiss.METRIC_INNER_PRODUCT)
    prog = Progress(n, f"building {variant}", progress)
    if variant == IVF_PQ:
        nlist, nbits = int(params["nlist"]), int(params["nbits"])
        n_train = min(n, max(64 * nlist, 64 * (1 << nbits), 65536))
    else:
        n_train = min(n, 65536)
        index.hnsw.efConstruction = int(params.get("ef_construction", 80))
    prog.set(0, f"training {variant} on {min(n, n_train):,} vectors")
    index.train(training_sample(emb, n_train))
    if ondisk is not None and variant == IVF_PQ:
        return fill_on_disk(index, emb, ondisk, prog, cancel)
    _fill(index, emb, 0, n, prog, cancel)
    return index


def _fill(index: Any, emb: np.ndarray, start: int, stop: int, prog: Progress,
          cancel: CancelToken | None, ids: bool = False) -> None:
    """Add rows ``start:stop``; ``ids``: as ids ``start..`` (an index that does not start
    at row 0, as a block of an on-disk build), not as the index's next ids."""
    for s in range(start, stop, ADD_CHUNK):
        if cancel is not None:
            cancel.raise_if_cancelled()
        e = min(stop, s + ADD_CHUNK)
        if ids:
            index.add_with_ids(_rows(emb, s, e, release=True), np.arange(s, e, dtype=np.int64))
        else:
            index.add(_rows(emb, s, e, release=True))
        prog.set(e, "adding")


def fill_on_disk(trained: Any, emb: np.ndarray, ivfdata: Path, prog: Progress,
                 cancel: CancelToken | None) -> Any:
    """Fill an empty trained IVF index with inverted lists kept in the file ``ivfdata``
    (FAISS OnDiskInvertedLists, as ``faiss.contrib.ondisk.merge_ondisk`` builds them):
    ``ONDISK_BLOCK`` vectors at a time go into a copy of the index written beside it, and
    the blocks' lists are merged into the file. Only one block's codes are in memory."""
    import faiss

    fa: Any = faiss  # its stubs lack the on-disk classes
    blocks: list[Path] = []
    try:
        for start in range(0, emb.shape[0], ONDISK_BLOCK):
            part = fa.clone_index(trained)
            _fill(part, emb, start, min(emb.shape[0], start + ONDISK_BLOCK), prog, cancel,
                  ids=True)
            blocks.append(_block_path(ivfdata, len(blocks)))
            fa.write_index(part, str(blocks[-1]))
            del part
        prog.set(emb.shape[0], f"merging {len(blocks)} blocks into {ivfdata.name}")
        # merge_ondisk itself never frees the blocks' mapped lists; these are freed below.
        parts = [fa.read_index(str(b), fa.IO_FLAG_MMAP) for b in blocks]
        lists = fa.InvertedListsPtrVector()
        for part in parts:
            lists.push_back(fa.extract_index_ivf(part).invlists)
        ivf = fa.extract_index_ivf(trained)
        with quiet_stdout():
            ondisk = fa.OnDiskInvertedLists(ivf.nlist, ivf.code_size, str(ivfdata))
            ivf.ntotal = trained.ntotal = ondisk.merge_from_multiple(lists.data(),
                                                                     lists.size(), False)
        ivf.replace_invlists(ondisk, True)
        ondisk.this.disown()  # the index owns it now
        del parts, lists
    finally:
        for block in blocks:
            block.unlink(missing_ok=True)
    return trained


def _block_path(ivfdata: Path, k: int) -> Path:
    """Block ``k`` beside ``ivfdata``; for a temporary ``.NAME.tmp-PID`` it is one too
    (``.NAME.block-k.tmp-PID``), so that a killed build's blocks are removed with it."""
    head, sep, tail = ivfdata.name.rpartition(".tmp-")
    return ivfdata.with_name(f"{head}.block-{k}{sep}{tail}" if sep
                             else f"{ivfdata.name}.block-{k}")


def ondisk_supported() -> bool:
    import faiss

    return hasattr(faiss, "OnDiskInvertedLists")


def _ondisk_lists(index: Any) -> Any:
    import faiss

    fa: Any = faiss
    if not ondisk_supported():
        return None
    try:
        lists = fa.extract_index_ivf(index).invlists
    except RuntimeError:  # not an IVF index
        return None
    lists = fa.downcast_InvertedLists(lists)
    return lists if isinstance(lists, fa.OnDiskInvertedLists) else None


def ondisk_file(index: Any) -> Path | None:
    """The file holding an index's inverted lists, when they are on disk."""
    lists = _ondisk_lists(index)
    return None if lists is None else Path(lists.filename)


def point_to(index: Any, ivfdata: Path) -> None:
    """Make an on-disk index name ``ivfdata`` as its lists' file (after a rename): only the
    name counts, since it is read with IO_FLAG_ONDISK_SAME_DIR (``read_index``)."""
    _ondisk_lists(index).filename = str(ivfdata)


def write_index(index: Any, path: Path) -> None:
    """Write next to ``path`` and rename over it, so readers never see half a file."""
    import faiss

    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        faiss.write_index(index, str(tmp))
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except (RuntimeError, OSError) as exc:
        tmp.unlink(missing_ok=True)
        # FAISS reports a failed write as a RuntimeError carrying strerror's text.
        if (isinstance(exc, OSError) and is_disk_full(exc)) or "No space left" in str(exc) \
                or "quota exceeded" in str(exc):
            raise DiskFullError(f"The disk is full while writing {path}.") from exc
        raise
    fsync_dir(path.parent)


def read_index(path: Path, ondisk: bool = False) -> Any:
    """Read an index; large ones are memory-mapped (inverted lists and flat codes).

    ``ondisk``: its inverted lists are in a file of their own, looked for beside the index
    and not at the path they were built at (the snapshot folder is renamed from staging and
    can be moved)."""
    import faiss

    flags = faiss.IO_FLAG_ONDISK_SAME_DIR if ondisk else 0
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CorruptSnapshotError(
            f"{path} cannot be read ({exc.strerror or exc}).",
            "Run `ragdesk index verify NAME`; rebuild the index variant with `ragdesk index "
            "quantize NAME --variant V`.") from exc
    if size >= MMAP_MIN_BYTES:
        # MMAP_IFC maps IVF lists, flat codes and HNSW storage in faiss 1.15; plain MMAP
        # covers IVF lists only.
        flags |= faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY
    try:
        with quiet_stdout(ondisk):
            return faiss.read_index(str(path), flags)
    except RuntimeError as exc:
        raise CorruptSnapshotError(f"{path} cannot be read as a FAISS index ({exc}).") from exc


@contextmanager
def quiet_stdout(active: bool = True) -> Iterator[None]:
    """Silence the C library's stdout: FAISS printf()s about on-disk lists ("resizing",
    "IO_FLAG_ONDISK_SAME_DIR: updating ondisk filename"), which would corrupt the JSON
    that `--json` commands print there."""
    if not active:
        yield
        return
    import ctypes
    import sys

    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        libc.fflush(None)
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def set_search_params(index: Any, variant: str, params: dict[str, Any]) -> None:
    import faiss

    if variant == IVF_PQ and "nprobe" in params:
        faiss.extract_index_ivf(index).nprobe = int(params["nprobe"])
    elif variant == HNSW_SQ8 and "ef_search" in params:
        index.hnsw.efSearch = int(params["ef_search"])


# ---- search --------------------------------------------------------------------------


def _pad(d: np.ndarray, i: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    if d.shape[1] >= k:
        return d[:, :k], i[:, :k]
    nq = d.shape[0]
    dd = np.full((nq, k), -np.inf, dtype=np.float32)
    ii = np.full((nq, k), -1, dtype=np.int64)
    dd[:, : d.shape[1]] = d
    ii[:, : i.shape[1]] = i
    return dd, ii


def exact_search(emb: np.ndarray, queries: np.ndarray, k: int,
                 release: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k inner products over all rows; (scores, ids), -1 ids pad short results.
    ``release``: see ``_rows`` (float16 storage only)."""
    import faiss

    n = emb.shape[0]
    q = np.ascontiguousarray(queries, dtype=np.float32)
    kk = min(k, n)
    if kk == 0:
        return _pad(np.zeros((len(q), 0), np.float32), np.zeros((len(q), 0), np.int64), k)
    if emb.dtype == np.float32 and emb.flags["C_CONTIGUOUS"]:
        d, i = faiss.knn(q, emb, kk, metric=faiss.METRIC_INNER_PRODUCT)
        return _pad(d.astype(np.float32), i.astype(np.int64), k)
    # float16 (or strided) storage: convert block by block and merge.
    best_d = np.full((len(q), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(q), 0), dtype=np.int64)
    for start in range(0, n, EXACT_BLOCK):
        block = _rows(emb, start, min(n, start + EXACT_BLOCK), release)
        d, i = faiss.knn(q, block, min(kk, len(block)), metric=faiss.METRIC_INNER_PRODUCT)
        cd = np.concatenate([best_d, d.astype(np.float32)], axis=1)
        ci = np.concatenate([best_i, i.astype(np.int64) + start], axis=1)
        order = np.argsort(-cd, axis=1, kind="stable")[:, :kk]
        best_d = np.take_along_axis(cd, order, axis=1)
        best_i = np.take_along_axis(ci, order, axis=1)
    return _pad(best_d, best_i, k)


RERANK_CHUNK = 16  # queries gathered at once: chunk x candidates x dim floats in memory


def _repeats(ids: np.ndarray) -> np.ndarray:
    """True where an id already occurred earlier in its row."""
    order = np.argsort(ids, axis=1, kind="stable")
    srt = np.take_along_axis(ids, order, axis=1)
    rep = np.zeros(ids.shape, dtype=bool)
    np.put_along_axis(rep, order[:, 1:], srt[:, 1:] == srt[:, :-1], axis=1)
    return rep


def candidate_scores(emb: np.ndarray, queries: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Exact inner product of each query with each of its candidates (-inf for -1 ids).

    Rows are read from the (memory-mapped) embeddings once per chunk of queries, in id order.
    """
    q = np.ascontiguousarray(queries, dtype=np.float32)
    out = np.full(candidates.shape, -np.inf, dtype=np.float32)
    for s in range(0, len(q), RERANK_CHUNK):
        cand = candidates[s:s + RERANK_CHUNK]
        valid = (cand >= 0) & ~_repeats(cand)
        if not valid.any():
            continue
        uniq, inverse = np.unique(cand[valid], return_inverse=True)
        vecs = np.asarray(emb[uniq], dtype=np.float32)
        rows = np.nonzero(valid)[0]  # which query of the chunk each valid candidate belongs to
        part = out[s:s + RERANK_CHUNK]
        part[valid] = np.einsum("nd,nd->n", vecs[inverse], q[s:s + RERANK_CHUNK][rows])
    return out


def top_k_of(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best (scores, ids) per row, best first; -1 ids pad rows with fewer."""
    width = scores.shape[1]
    s = np.where(ids >= 0, scores, -np.inf).astype(np.float32)
    if width > k:
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
        s = np.take_along_axis(s, part, axis=1)
        ids = np.take_along_axis(ids, part, axis=1)
    order = np.argsort(-s, axis=1, kind="stable")
    s = np.take_along_axis(s, order, axis=1)
    i = np.where(np.isfinite(s), np.take_along_axis(ids, order, axis=1), -1)
    return _pad(s, i.astype(np.int64), k)


def rerank(emb: np.ndarray, queries: np.ndarray, candidates: np.ndarray,
           k: int) -> tuple[np.ndarray, np.ndarray]:
    """Re-score candidates with exact inner products and keep the best ``k``."""
    return top_k_of(candidate_scores(emb, queries, candidates), candidates, k)


class Searcher:
    """Top-k by exact inner product: ``search(queries, k) -> (scores, ids)``."""

    variant = FLAT

    def __init__(self, emb: np.ndarray) -> None:
        self.emb = emb

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return exact_search(self.emb, queries, k)

    @property
    def resident_bytes(self) -> int:
        return int(self.emb.nbytes)


class RerankSearcher(Searcher):
    """Candidates from a compressed FAISS index, re-scored exactly from the embeddings."""

    def __init__(self, emb: np.ndarray, index: Any, variant: str, params: dict[str, Any],
                 index_bytes: int) -> None:
        super().__init__(emb)
        self.index = index
        self.variant = variant
        self.params = dict(params)
        self.candidates = int(params.get("rerank", 100))
        self.index_bytes = index_bytes
        set_search_params(index, variant, params)

    def candidates_for(self, queries: np.ndarray, kc: int) -> np.ndarray:
        _, ids = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), kc)
        return np.asarray(ids, dtype=np.int64)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        kc = min(max(k, self.candidates), self.index.ntotal) or k
        return rerank(self.emb, queries, self.candidates_for(queries, kc), k)

    @property
    def resident_bytes(self) -> int:
        return self.index_bytes


def open_searcher(folder: Path, emb: np.ndarray, variant: str, file: str,
                  params: dict[str, Any]) -> Searcher:
    if variant == FLAT:
        return Searcher(emb)
    path = folder / file
    index = read_index(path, ondisk=bool(params.get("ondisk")))
    return RerankSearcher(emb, index, variant, params, path.stat().st_size)


# ---- recall and tuning ---------------------------------------------------------------


def recall_at_k(approx: np.ndarray, exact: np.ndarray, k: int = RECALL_K) -> float:
    """Mean fraction of the exact top-k ids that the approximate top-k found."""
    a, e = approx[:, :k], exact[:, :k]
    found = ((a[:, :, None] == e[:, None, :]) & (e[:, None, :] >= 0)).any(axis=1)
    total = int((e >= 0).sum())
    return float(found.sum() / total) if total else 1.0


# Questions are far from the passages that answer them (NQ-open dev questions reach a mean
# cosine of 0.47 with their best all-MiniLM-L6-v2 passage), and an index is much harder to
# search from there than from a stored vector: tuned on stored passage vectors, IVF-PQ
# reached recall@20 0.96 on them but 0.86 on the questions. Passage vectors pushed away to
# cosine 0.4 in a random direction gave recall within about 0.03 of the questions' across
# the whole probes x candidates grid (bench/index_bench.py).
PROXY_COSINE = 0.4


def sample_queries(emb: np.ndarray, n: int, seed: int = 1,
                   cosine: float = PROXY_COSINE) -> np.ndarray:
    """Stand-in questions for tuning: sampled passage vectors turned to ``cosine`` with
    their passage in a random direction (``cosine=1`` gives the passage vectors)."""
    p = training_sample(emb, min(n, emb.shape[0]), seed)
    norms = np.linalg.norm(p, axis=1, keepdims=True)
    u = p / np.where(norms > 0, norms, 1.0)
    if cosine >= 1.0:
        return u.astype(np.float32)
    noise = np.random.default_rng(seed + 1).standard_normal(p.shape).astype(np.float32)
    noise -= np.sum(noise * u, axis=1, keepdims=True) * u  # orthogonal to the passage
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    out: np.ndarray = (cosine * u + np.sqrt(1 - cosine**2) * noise).astype(np.float32)
    return out


FOUND_CHUNK = 256  # queries compared at once: chunk x candidates x k booleans


def found_at_depth(candidates: np.ndarray, exact: np.ndarray, k: int = RECALL_K
                   ) -> dict[int, float]:
    """For each depth r in 1..width: the share of the exact top-k ids (-1 ids are not ids)
    among the first r candidates. A lookup table, so every depth costs nothing more."""
    e = exact[:, :k]
    first = np.full(e.shape, np.iinfo(np.int64).max, dtype=np.int64)
    for s in range(0, len(e), FOUND_CHUNK):
        eq = candidates[s:s + FOUND_CHUNK, :, None] == e[s:s + FOUND_CHUNK, None, :]
        hit = eq.any(axis=1)
        first[s:s + len(hit)] = np.where(hit, eq.argmax(axis=1), first[s:s + len(hit)])
    valid = e >= 0
    total = int(valid.sum())
    if not total:
        return dict.fromkeys(range(1, candidates.shape[1] + 1), 1.0)
    # found_by[r] = exact ids first seen at a position < r, over all queries
    pos = first[valid]
    counts = np.bincount(pos[pos < candidates.shape[1]], minlength=candidates.shape[1])
    cum = np.cumsum(counts)
    return {r: float(cum[r - 1] / total) for r in range(1, candidates.shape[1] + 1)}


@dataclass(frozen=True)
class TuneResult:
    params: dict[str, Any]  # search parameters chosen: nprobe or ef_search, and rerank
    recall: float
    table: list[dict[str, Any]]  # every point tried: params, recall, cost


def _cost(variant: str, build: dict[str, Any], knob: int, rr: int, n: int, dim: int) -> float:
    """Rough work per query: codes scanned + exact rows read (a random read costs more)."""
    if variant == IVF_PQ:
        scanned = knob * n / max(1, int(build["nlist"])) * int(build["m"])
    else:
        scanned = knob * int(build["M"]) * dim / 4
    return scanned + rr * dim * 4


def tune(searcher: RerankSearcher, queries: np.ndarray, exact_ids: np.ndarray, *,
         target: float, k: int = RECALL_K, knobs: tuple[int, ...] | None = None,
         reranks: tuple[int, ...] | None = None,
         cancel: CancelToken | None = None,
         on_point: Callable[[dict[str, Any]], None] | None = None) -> TuneResult:
    """Cheapest (probes or ef, rerank) whose recall@k on ``queries`` reaches ``target``.

    One candidate search per probe setting serves every rerank depth: candidate lists come
    ordered by approximate score, so depth r uses the first r of them. Re-ranking by exact
    score keeps every exact top-k id that is among the candidates (only exact top-k ids can
    outscore one), so recall@k after re-ranking is the share of exact top-k ids among the
    candidates (``found_at_depth``), and no vector has to be read to tune.
    """
    variant = searcher.variant
    n, dim = searcher.emb.shape
    build = searcher.params
    knob_name = "nprobe" if variant == IVF_PQ else "ef_search"
    if knobs is None:
        limit = int(build["nlist"]) if variant == IVF_PQ else 10**9
        knobs = tuple(v for v in (NPROBE_GRID if variant == IVF_PQ else EF_GRID) if v <= limit)
    rr_grid = tuple(sorted({min(r, n) for r in (reranks or RERANK_GRID) if r >= k})) \
        or (min(k, n),)
    table: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    for knob in knobs:
        if cancel is not None:
            cancel.raise_if_cancelled()
        # Only depths that would still be cheaper than the best setting found are worth it.
        depths = [rr for rr in rr_grid if best is None
                  or _cost(variant, build, knob, rr, n, dim) < best["cost"]]
        if not depths:
            break  # more probes only cost more
        set_search_params(searcher.index, variant, {knob_name: knob})
        found = found_at_depth(searcher.candidates_for(queries, max(depths)), exact_ids, k)
        for rr in depths:
            point = {knob_name: knob, "rerank": rr, "recall": found[rr],
                     "cost": _cost(variant, build, knob, rr, n, dim)}
            table.append(point)
            if on_point is not None:
                on_point(point)
            if point["recall"] >= target:
                if best is None or point["cost"] < best["cost"]:
                    best = point
                break  # deeper reranks at this setting only cost more
    if best is None:
        best = max(table, key=lambda p: (p["recall"], -p["cost"]))
    chosen = {knob_name: int(best[knob_name]), "rerank": int(best["rerank"])}
    set_search_params(searcher.index, variant, {**build, **chosen})
    searcher.params.update(chosen)
    searcher.candidates = chosen["rerank"]
    return TuneResult(chosen, float(best["recall"]), table)
