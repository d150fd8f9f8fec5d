"""``encode_passages``: check the arguments, plan the shards, skip the finished ones, run
the rest on Ray (:mod:`.ray_job`), and say what was done."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from ragdesk.core.atomic import remove_temp_files
from ragdesk.core.distributed.plan import (
    DEFAULT_SHARD_ROWS,
    DTYPES,
    LOCK_FILE,
    ShardPlan,
    claim_folder,
    finished_shards,
    job_record,
    recorded_passages,
)
from ragdesk.core.distributed.reader import count_passages
from ragdesk.core.encoders import FAST_ENV, EncoderInfo, load_encoder
from ragdesk.core.errors import AlreadyExistsError, BadInputError, RagdeskError
from ragdesk.core.progress import ProgressCallback
from ragdesk.core.snapshots.sources import open_source

if TYPE_CHECKING:
    from types import ModuleType


@dataclass(frozen=True)
class EncodeOptions:
    source: str
    encoder: str
    out: Path
    fmt: str | None = None
    ray_address: str | None = None
    actors: int = 1
    gpus_per_actor: float = 0.0
    batch_size: int = 64
    dtype: str = "float32"
    shard_rows: int = DEFAULT_SHARD_ROWS

    def check(self) -> None:
        if self.actors < 1:
            raise BadInputError(f"--actors must be at least 1, not {self.actors}.")
        if self.gpus_per_actor < 0:
            raise BadInputError(f"--gpus-per-actor cannot be negative ({self.gpus_per_actor}).")
        if self.batch_size < 1:
            raise BadInputError(f"--batch-size must be at least 1, not {self.batch_size}.")
        if self.dtype not in DTYPES:
            raise BadInputError(f"--dtype must be one of {', '.join(DTYPES)}, not "
                                f"{self.dtype!r}.")
        if self.out.exists() and not self.out.is_dir():
            raise BadInputError("is not a folder.", path=self.out)


@dataclass(frozen=True)
class EncodeReport:
    out: str
    encoder: str
    dim: int
    dtype: str
    passages: int
    shards: int
    skipped: int  # finished by an earlier run
    written: int
    encoded: int  # passages encoded by this run
    seconds: float  # this run's Ray stage, from connecting to the last shard
    actors: int
    # from connecting until the first shard came back: the cluster and actors starting
    first_shard_seconds: float | None = None

    @property
    def passages_per_s(self) -> float | None:
        return self.encoded / self.seconds if self.encoded and self.seconds > 0 else None

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "passages_per_s": self.passages_per_s}


@contextlib.contextmanager
def _hold(folder: Path) -> Iterator[None]:
    lock = FileLock(str(folder / LOCK_FILE))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise AlreadyExistsError(f"Another `ragdesk encode` is writing into {folder}.",
                                 "Wait for it to finish, or write into another --out "
                                 "folder.") from None
    try:
        yield
    finally:
        lock.release()


def _encoder_info(encoder: str) -> EncoderInfo:
    """What the shards are made with (their width, and the id the job file records)."""
    return load_encoder(encoder, role="passage", device="cpu").info


def _plan(opts: EncodeOptions, info: EncoderInfo, progress: ProgressCallback | None
          ) -> tuple[ShardPlan, set[int]]:
    """The shard plan, claimed in the output folder, and the shards already finished."""
    fingerprint = open_source(opts.source, opts.fmt).fingerprint()
    n = (recorded_passages(opts.out, fingerprint)
         or count_passages(opts.source, opts.fmt, progress))
    plan = ShardPlan(n, opts.shard_rows)
    claim_folder(opts.out, job_record(fingerprint, info.to_json(), plan, opts.dtype))
    return plan, finished_shards(opts.out, plan, info.dim, opts.dtype)


def encode_passages(opts: EncodeOptions, progress: ProgressCallback | None = None
                    ) -> EncodeReport:
    """Encode ``opts.source`` into embedding shards in ``opts.out`` on Ray; resumes a job
    that was stopped, skipping the shards it finished."""
    from ragdesk.core.distributed import ray_job

    opts.check()
    ray = ray_job.import_ray()  # before minutes of counting, not after
    if opts.ray_address:  # a wrong address, too
        ray_job.check_address(opts.ray_address)
    info = _encoder_info(opts.encoder)
    opts.out.mkdir(parents=True, exist_ok=True)
    with _hold(opts.out):
        remove_temp_files(opts.out)  # a killed run's half-written shards
        plan, done = _plan(opts, info, progress)
        report: dict[str, Any] = {"out": str(opts.out), "encoder": info.id, "dim": info.dim,
                  "dtype": opts.dtype, "passages": plan.passages, "shards": plan.count,
                  "skipped": len(done), "actors": opts.actors}
        if len(done) == plan.count:
            return EncodeReport(**report, written=0, encoded=0, seconds=0.0)
        t0 = time.monotonic()
        written, encoded, first_at = _run(ray, opts, plan, done, info.dim, progress)
        return EncodeReport(**report, written=written, encoded=encoded,
                            seconds=time.monotonic() - t0,
                            first_shard_seconds=None if first_at is None else first_at - t0)


def _run(ray: ModuleType, opts: EncodeOptions, plan: ShardPlan, done: set[int], dim: int,
         progress: ProgressCallback | None) -> tuple[int, int, float | None]:
    """Shards written, passages encoded, and when (``time.monotonic()``) the first shard
    came back."""
    from ragdesk.core.distributed import ray_job

    environ = {FAST_ENV: os.environ[FAST_ENV]} if FAST_ENV in os.environ else {}
    spec = ray_job.ActorSpec(opts.encoder, opts.actors, opts.gpus_per_actor, opts.batch_size,
                             opts.dtype, opts.shard_rows, environ)
    done_rows = sum(plan.rows(i) for i in done)
    prog = ray_job.progress_for(plan.passages, done_rows, progress)
    with ray_job.ray_session(ray, opts.ray_address, spec):
        try:
            source = open_source(opts.source, opts.fmt).path
            datasource = ray_job.passage_datasource(ray.data, source, opts.fmt, plan, done)
            written, first_at = ray_job.run_pool(ray, datasource, spec, opts.out, plan, prog)
        except Exception as exc:
            cause = ray_job.ragdesk_cause(exc)
            if cause is not None and cause is not exc:
                raise cause from exc
            raise
    missing = sorted(set(range(plan.count))
                     - finished_shards(opts.out, plan, dim, opts.dtype))
    if missing:
        raise RagdeskError(f"The job ended with {len(missing):,} shards not written "
                           f"(the first: {plan.name(missing[0])}).",
                           "Run the same command again to encode the missing shards.")
    return written, plan.passages - done_rows, first_at
