"""The passages of a source in the order ``index import`` stores them, by shard.

The same reader and splitter as the import (:func:`ragdesk.core.snapshots.sources.open_source`
and :func:`ragdesk.core.snapshots.chunking.passages`), so that passage ``i`` here is the
passage an import of the same source stores at position ``i``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from ragdesk.core.distributed.plan import ShardPlan
from ragdesk.core.errors import BadInputError
from ragdesk.core.progress import Progress, ProgressCallback
from ragdesk.core.snapshots.chunking import PassageRow, passages
from ragdesk.core.snapshots.sources import open_source
from ragdesk.core.units import plural

COUNT_REPORT_EVERY = 10_000


def count_passages(source: str, fmt: str | None, progress: ProgressCallback | None) -> int:
    """How many passages the source gives (one pass over it, as the import's first phase)."""
    src = open_source(source, fmt)
    prog = Progress(src.size, f"counting the passages of {src.path.name}", progress,
                    unit="bytes")
    n = 0
    for _ in passages(src.documents()):
        n += 1
        if n % COUNT_REPORT_EVERY == 0:
            prog.set(src.bytes_read, f"counting passages: {n:,}")
    if n == 0:
        raise BadInputError("contains no passages: no article text was found in it.",
                            path=src.path)
    prog.set(src.size, f"{plural(n, 'passage')} in {src.path.name}")
    return n


@dataclass(frozen=True)
class ShardText:
    """The passages of one shard: positions ``start`` to ``start + len(texts) - 1``."""

    index: int
    start: int
    titles: list[str]
    texts: list[str]


def unfinished_shards(source: str | Path, fmt: str | None, plan: ShardPlan,
                      skip: Collection[int]) -> Iterator[ShardText]:
    """The passages of every shard not in ``skip``, one shard at a time, in order.

    Skipped shards are still read (their passages fix the positions of those after them)
    but never held: memory is one shard of text.
    """
    src = open_source(source, fmt)
    rows: list[PassageRow] = []
    shard = 0
    for pos, row in enumerate(passages(src.documents())):
        if pos >= plan.passages:
            break  # the source grew since it was counted; the plan says how far to go
        if pos == (shard + 1) * plan.shard_rows:
            if rows:
                yield _shard_text(plan, shard, rows)
            rows, shard = [], shard + 1
        if shard not in skip:
            rows.append(row)
    if rows:
        yield _shard_text(plan, shard, rows)


def _shard_text(plan: ShardPlan, shard: int, rows: list[PassageRow]) -> ShardText:
    return ShardText(shard, plan.bounds(shard)[0], [r.title for r in rows],
                     [r.text for r in rows])
