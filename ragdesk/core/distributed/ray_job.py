"""The encoding job on Ray: a one-task read on the driver's node, an actor pool running
:class:`~ragdesk.core.distributed.actor.PassageEncoder`, and the driver writing the shards.

Ray is imported inside these functions only (see the package docstring). Where things run:

- the read task streams the source where the driver runs (``supports_distributed_reads``
  is False), so only the driver's machine needs the source file;
- the actors load the encoder by the name or folder given, so every node needs ragdesk and
  the model (the same folder path, or the hub id in its Hugging Face cache);
- the vectors come back to the driver, which writes the shards: only the driver's machine
  needs the output folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import os
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.core.distributed import loopback
from ragdesk.core.distributed.actor import PassageEncoder
from ragdesk.core.distributed.plan import ShardPlan
from ragdesk.core.distributed.reader import unfinished_shards
from ragdesk.core.distributed.writer import write_returned
from ragdesk.core.errors import RagdeskError
from ragdesk.core.progress import Progress, ProgressCallback

if TYPE_CHECKING:
    from types import ModuleType

    import pyarrow as pa
    from ray.data import Dataset, Datasource, ReadTask
    from ray.data.block import BlockMetadata

log = logging.getLogger(__name__)

INSTALL_HINT = 'Install it with `pip install "ragdesk[distributed]"`.'
# The read task's share of a CPU: it mostly waits on the disk and on back-pressure. A local
# cluster also declares one CPU more than its actors use: with exactly the actors' CPUs the
# read task would wait for a free CPU that the actors, waiting for its rows, never give up.
READ_CPUS = 0.5
ACTOR_CPUS = 1.0
LOCAL_HOST = "127.0.0.1"
# A wrong --ray-address fails within this; Ray alone retries for many minutes.
CONNECT_TIMEOUT_S = 15.0


def import_ray() -> ModuleType:
    try:
        import ray
        import ray.data
    except ImportError as exc:
        raise RagdeskError("Distributed encoding needs Ray (ray[data]), which is not "
                           "installed.", INSTALL_HINT) from exc
    return ray


@dataclass(frozen=True)
class ActorSpec:
    """What each actor of the pool runs, and on what."""

    encoder: str
    actors: int
    gpus_per_actor: float
    batch_size: int
    dtype: str
    shard_rows: int
    environ: dict[str, str]

    def constructor_kwargs(self) -> dict[str, object]:
        return {"encoder": self.encoder, "device": "cuda" if self.gpus_per_actor else "cpu",
                "dtype": self.dtype, "batch_size": self.batch_size,
                "shard_rows": self.shard_rows, "environ": self.environ}


def start_ray(ray: ModuleType, address: str | None, spec: ActorSpec) -> None:
    """Connect to the cluster at ``address``, or start a local one on 127.0.0.1 sized for
    the actors (plus one CPU, see READ_CPUS). Use :func:`ray_session` to get both the
    start and the matching :func:`stop_ray`."""
    # A desktop tool does not report usage to Ray's servers unless the user asked for it.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    common: dict[str, object] = {"logging_level": logging.WARNING, "log_to_driver": True}
    if address:
        connect(ray, address, common)
        return
    # Ray reads the setting when it starts the GCS and the raylet; the workers the raylet
    # starts later inherit its environment, so it need not outlast the start.
    with loopback.single_node():
        try:
            # "local", not None: None joins a cluster started earlier on this machine (from
            # RAY_ADDRESS or /tmp/ray), whose CPUs were sized for something else.
            ctx = ray.init(address="local", num_cpus=int(spec.actors * ACTOR_CPUS) + 1,
                           include_dashboard=False, _node_ip_address=LOCAL_HOST, **common)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RagdeskError(f"Could not start a local Ray cluster: {exc}") from exc
        loopback.check_local_cluster(ray, ctx)


def check_address(address: str) -> None:
    """Refuse a malformed address, or one where nothing accepts a connection ("auto":
    the cluster Ray finds on this machine, checked by Ray itself)."""
    if address == "auto":
        return
    host, port = loopback.parse_address(address)
    loopback.probe(host, port, address, CONNECT_TIMEOUT_S)


def connect(ray: ModuleType, address: str, common: dict[str, object]) -> None:
    """Join the cluster at ``address`` as given, or fail within CONNECT_TIMEOUT_S: Ray
    itself retries an address where no cluster answers for many minutes."""
    check_address(address)
    try:
        with loopback.deadline(CONNECT_TIMEOUT_S, address):
            ray.init(address=address, **common)
    except BaseException as exc:
        ray.shutdown()  # whatever a failed connect left half set up
        if isinstance(exc, ConnectionError | RuntimeError | ValueError):
            raise RagdeskError(f"Could not connect to the Ray cluster at {address}: {exc}",
                               loopback.HINT) from exc
        raise


def stop_ray(ray: ModuleType) -> None:
    ray.shutdown()


@contextlib.contextmanager
def ray_session(ray: ModuleType, address: str | None, spec: ActorSpec) -> Iterator[None]:
    """Ray started (or joined) for one job, and shut down after it."""
    start_ray(ray, address, spec)
    try:
        yield
    finally:
        stop_ray(ray)


def _block_metadata(ray_data: ModuleType, rows: int, path: Path) -> BlockMetadata:
    """BlockMetadata across Ray versions (its fields changed between 2.40 and 2.60)."""
    cls: Any = ray_data.block.BlockMetadata  # called with the fields this version has
    values = {"num_rows": rows, "size_bytes": None, "schema": None,
              "input_files": [str(path)], "exec_stats": None, "task_exec_stats": None}
    names = {f.name for f in dataclasses.fields(cls)}
    meta: BlockMetadata = cls(**{k: v for k, v in values.items() if k in names})
    return meta


def passage_datasource(ray_data: Any, source: Path, fmt: str | None, plan: ShardPlan,
                       skip: Collection[int]) -> Datasource:
    """A datasource with one read task that streams the source's unfinished shards, one
    row (shard, start, titles, texts) per shard."""
    todo = plan.count - len(skip)
    skipped = frozenset(skip)

    def read() -> Iterator[pa.Table]:
        import pyarrow as pa

        for shard in unfinished_shards(source, fmt, plan, skipped):
            yield pa.Table.from_pydict({"shard": [shard.index], "start": [shard.start],
                                        "titles": [shard.titles], "texts": [shard.texts]})

    class PassageSource(ray_data.Datasource):  # type: ignore[misc]
        @property
        def supports_distributed_reads(self) -> bool:
            return False  # the source is a file on the driver's machine

        def estimate_inmemory_data_size(self) -> int | None:
            return None

        def get_read_tasks(self, parallelism: int, **_: object) -> list[ReadTask]:
            return [ray_data.ReadTask(read, _block_metadata(ray_data, todo, source))]

    return PassageSource()


def _read(ray_data: ModuleType, datasource: Datasource) -> Dataset:
    read: Callable[..., Dataset] = ray_data.read_datasource  # its signature varies by version
    if "num_cpus" in inspect.signature(read).parameters:
        return read(datasource, override_num_blocks=1, num_cpus=READ_CPUS)
    return read(datasource, override_num_blocks=1, ray_remote_args={"num_cpus": READ_CPUS})


def build_dataset(ray: ModuleType, datasource: Datasource, spec: ActorSpec) -> Dataset:
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # ragdesk prints its own progress line
    # A block is one row, so one shard: the unit an actor takes (Ray would otherwise pack
    # small shards into one block of up to 128 MiB, and one actor would get them all) and
    # the unit of back-pressure (the read runs a few shards ahead of the actors, no more).
    ctx.target_max_block_size = 1
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # its plan and stats, per run
    return _read(ray.data, datasource).map_batches(
        PassageEncoder, fn_constructor_kwargs=spec.constructor_kwargs(), batch_size=1,
        batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=spec.actors),
        num_cpus=ACTOR_CPUS, num_gpus=spec.gpus_per_actor or None)  # None: no GPU asked


def run_pool(ray: ModuleType, datasource: Datasource, spec: ActorSpec, out: Path, plan: ShardPlan,
             progress: Progress) -> tuple[int, float | None]:
    """Drive the dataset to its end, writing each shard as it comes back; the shards
    written, and when (``time.monotonic()``) the first came back."""
    ds = build_dataset(ray, datasource, spec)
    t0 = time.monotonic()
    written, first_at = 0, None
    for batch in ds.iter_batches(batch_size=1, batch_format="numpy"):
        rows = write_returned(out, plan, batch)
        written += len(batch["shard"])
        first_at = first_at or time.monotonic()
        progress.update(rows, f"encoding passages ({written:,} shards written)")
    log.info("actor pool done in %.1f s", time.monotonic() - t0)
    return written, first_at


def ragdesk_cause(exc: BaseException) -> RagdeskError | None:
    """The ragdesk error an actor raised, out of Ray's wrappers (a model missing on a node)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, RagdeskError):
            return cur
        seen.add(id(cur))
        nxt = getattr(cur, "cause", None)
        cur = nxt if isinstance(nxt, BaseException) else cur.__cause__
    return None


def progress_for(total: int, done: int, callback: ProgressCallback | None) -> Progress:
    msg = "encoding passages" if not done else f"encoding passages (resumed at {done:,})"
    prog = Progress(total, msg, callback, start_done=done)
    prog.set(done)
    return prog
