"""Which passages go into which shard, and which shards a folder already holds.

Shard ``i`` holds the passages at positions ``i * shard_rows`` up to (not including)
``(i + 1) * shard_rows``: fixed boundaries, so a resumed job computes the same shards as an
uninterrupted one. The folder's job file records what the shards were made from (source,
encoder, shard size, dtype); a resume with other arguments is refused rather than mixing
two jobs' shards.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragdesk.core.atomic import write_json_atomic
from ragdesk.core.errors import BadInputError
from ragdesk.core.snapshots.shards import IDS_SUFFIX, NPY

SHARD_PREFIX = "part-"
JOB_FILE = ".ragdesk-encode.json"  # hidden: index import reads .npy and .parquet files only
LOCK_FILE = ".ragdesk-encode.lock"
DTYPES = ("float32", "float16")
DEFAULT_SHARD_ROWS = 10_000
NAME_DIGITS = 5


@dataclass(frozen=True)
class ShardPlan:
    passages: int
    shard_rows: int

    def __post_init__(self) -> None:
        if self.shard_rows < 1:
            raise BadInputError(f"--shard-size must be at least 1, not {self.shard_rows}.")

    @property
    def count(self) -> int:
        return -(-self.passages // self.shard_rows)

    def bounds(self, i: int) -> tuple[int, int]:
        start = i * self.shard_rows
        return start, min(self.passages, start + self.shard_rows)

    def rows(self, i: int) -> int:
        start, stop = self.bounds(i)
        return stop - start

    def name(self, i: int) -> str:
        # zero-padded so that plain and natural name orders agree
        return f"{SHARD_PREFIX}{i:0{max(NAME_DIGITS, len(str(self.count - 1)))}d}"

    def paths(self, folder: Path, i: int) -> tuple[Path, Path]:
        """(vectors, ids) of shard ``i``."""
        name = self.name(i)
        return folder / f"{name}{NPY}", folder / f"{name}{IDS_SUFFIX}"


def job_record(source: dict[str, object], encoder: dict[str, object], plan: ShardPlan,
               dtype: str) -> dict[str, object]:
    return {"source": source, "encoder": encoder, "passages": plan.passages,
            "shard_rows": plan.shard_rows, "dtype": dtype}


def claim_folder(folder: Path, record: dict[str, object]) -> None:
    """Record the job in ``folder``, or check that it is the job recorded there."""
    path = folder / JOB_FILE
    if path.exists():
        try:
            earlier = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            earlier = None
        if earlier == record:
            return
        differ = (sorted(k for k in record if not isinstance(earlier, dict)
                         or earlier.get(k) != record[k]))
        raise BadInputError(
            f"holds the shards of another encoding job (it differs in: {', '.join(differ)}).",
            path=folder, hint="Resume with the same source, --encoder, --shard-size and "
            "--dtype, or write into another (empty) --out folder.")
    if any(p.suffix == NPY for p in folder.iterdir()):
        raise BadInputError("already holds .npy files that no ragdesk encode job wrote.",
                            path=folder, hint="Write into an empty --out folder.")
    write_json_atomic(path, record)


def finished_shards(folder: Path, plan: ShardPlan, dim: int, dtype: str) -> set[int]:
    """The shards whose vectors and ids are both in ``folder``, with the planned shape."""
    done = set()
    for i in range(plan.count):
        vec_path, ids_path = plan.paths(folder, i)
        if not vec_path.is_file() or not ids_path.is_file():
            continue
        try:
            vec = np.load(vec_path, mmap_mode="r", allow_pickle=False)
            ids = np.load(ids_path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, EOFError):
            continue  # written by something else: encoded again
        start, stop = plan.bounds(i)
        if (vec.shape == (stop - start, dim) and vec.dtype == np.dtype(dtype)
                and ids.shape == (stop - start,) and len(ids)
                and int(ids[0]) == start and int(ids[-1]) == stop - 1):
            done.add(i)
    return done


def recorded_passages(folder: Path, source: dict[str, object]) -> int | None:
    """The passage count an earlier run of the same source recorded (a resume need not read
    the whole source once more just to count it)."""
    try:
        earlier = json.loads((folder / JOB_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(earlier, dict) or earlier.get("source") != source:
        return None
    passages = earlier.get("passages")
    return passages if isinstance(passages, int) and passages > 0 else None
