"""FAISS index variants over a snapshot's embeddings, with exact re-ranking.

- ``flat``: exact inner-product search over the memory-mapped ``embeddings.npy`` itself
  (no second copy on disk).
- ``hnsw-sq8``: ``HNSW{M},SQ8`` (the layout of the RAG paper's 36 GB index).
- ``ivf-pq``: ``IVF{nlist},PQ{m}x{nbits}``.

The compressed variants only pick candidates: their best ``rerank`` candidates are re-scored
with the exact inner product against rows read from the memory-mapped embeddings, so the
scores the engine sees are always exact (as in transformers' retriever), the embeddings stay
on disk, and only the compressed index is resident (:mod:`.variant_search`). ``nprobe`` /
``ef_search`` and ``rerank`` are tuned per snapshot against exact search
(:mod:`.variant_tuning`). This module builds, writes and reads the indexes, and searches
exactly.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ragdesk.core.atomic import fsync_dir
from ragdesk.core.errors import BadInputError, CorruptSnapshotError, DiskFullError, is_disk_full
from ragdesk.core.pages import release_pages
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.safe_json import as_int

if TYPE_CHECKING:
    import faiss

FLAT = "flat"
HNSW_SQ8 = "hnsw-sq8"
IVF_PQ = "ivf-pq"
VARIANTS = (FLAT, HNSW_SQ8, IVF_PQ)
ADD_CHUNK = 65536
# Vectors per block of an on-disk build: the block's codes (about 100 MB for 768-d PQ96) are
# what it holds in memory.
ONDISK_BLOCK = 1 << 20
EXACT_BLOCK = 65536
# Indexes at least this big are memory-mapped instead of read into memory.
MMAP_MIN_BYTES = 64 << 20


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


def default_params(variant: str, n: int, dim: int) -> dict[str, int]:
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


def factory_string(variant: str, params: Mapping[str, object]) -> str:
    if variant == HNSW_SQ8:
        return f"HNSW{as_int(params['M'])},SQ8"
    if variant == IVF_PQ:
        # "np": no polysemous training, which only helps Hamming-distance filtering (unused
        # here) and makes training some 50x slower.
        return f"IVF{as_int(params['nlist'])},PQ{as_int(params['m'])}x{as_int(params['nbits'])}np"
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


def build_index(variant: str, params: Mapping[str, object], emb: np.ndarray,
                progress: ProgressCallback | None = None,
                cancel: CancelToken | None = None, ondisk: Path | None = None) -> faiss.Index:
    """Train (on a seeded sample) and fill a FAISS index from the embeddings, in chunks.

    ``ondisk`` (ivf-pq): the inverted lists go to that file instead of memory
    (``fill_on_disk``); ``write_index`` then writes only the index's small header part.
    """
    import faiss

    n, dim = emb.shape
    index = faiss.index_factory(dim, factory_string(variant, params),
                            faiss.METRIC_INNER_PRODUCT)
    prog = Progress(n, f"building {variant}", progress)
    if variant == IVF_PQ:
        nlist, nbits = as_int(params["nlist"]), as_int(params["nbits"])
        n_train = min(n, max(64 * nlist, 64 * (1 << nbits), 65536))
    else:
        n_train = min(n, 65536)
        _hnsw(index).efConstruction = as_int(params.get("ef_construction", 80))
    prog.set(0, f"training {variant} on {min(n, n_train):,} vectors")
    index.train(training_sample(emb, n_train))
    if ondisk is not None and variant == IVF_PQ:
        return fill_on_disk(index, emb, ondisk, prog, cancel)
    _fill(index, emb, 0, n, prog, cancel)
    return index


def _fill(index: faiss.Index, emb: np.ndarray, start: int, stop: int, prog: Progress,
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


def fill_on_disk(trained: faiss.Index, emb: np.ndarray, ivfdata: Path, prog: Progress,
                 cancel: CancelToken | None) -> faiss.Index:
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


def _ondisk_lists(index: faiss.Index) -> Any:
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


def ondisk_file(index: faiss.Index) -> Path | None:
    """The file holding an index's inverted lists, when they are on disk."""
    lists = _ondisk_lists(index)
    return None if lists is None else Path(lists.filename)


def point_to(index: faiss.Index, ivfdata: Path) -> None:
    """Make an on-disk index name ``ivfdata`` as its lists' file (after a rename): only the
    name counts, since it is read with IO_FLAG_ONDISK_SAME_DIR (``read_index``)."""
    _ondisk_lists(index).filename = str(ivfdata)


def write_index(index: faiss.Index, path: Path) -> None:
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


def read_index(path: Path, ondisk: bool = False) -> faiss.Index:
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


def _hnsw(index: faiss.Index) -> faiss.HNSW:
    """The graph of an hnsw-sq8 index (FAISS hands back its concrete class, IndexHNSWSQ)."""
    import faiss

    if not isinstance(index, faiss.IndexHNSW):
        raise TypeError(f"{type(index).__name__} is not an HNSW index")
    return index.hnsw


def set_search_params(index: faiss.Index, variant: str, params: Mapping[str, object]) -> None:
    import faiss

    if variant == IVF_PQ and "nprobe" in params:
        faiss.extract_index_ivf(index).nprobe = as_int(params["nprobe"])
    elif variant == HNSW_SQ8 and "ef_search" in params:
        _hnsw(index).efSearch = as_int(params["ef_search"])


# ---- search --------------------------------------------------------------------------


def pad_results(d: np.ndarray, i: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
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
        return pad_results(np.zeros((len(q), 0), np.float32), np.zeros((len(q), 0), np.int64), k)
    if emb.dtype == np.float32 and emb.flags["C_CONTIGUOUS"]:
        d, i = faiss.knn(q, emb, kk, metric=faiss.METRIC_INNER_PRODUCT)
        return pad_results(d.astype(np.float32), i.astype(np.int64), k)
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
    return pad_results(best_d, best_i, k)
