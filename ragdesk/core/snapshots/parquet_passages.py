"""Parquet passage files: one passage per row, columns ``text`` and optionally ``title`` and
``id`` (the layout of DPR's passages as the Hugging Face datasets publish them).

Read one record batch at a time (within row groups), so memory does not grow with the file.
Needs pyarrow (``pip install ragdesk[parquet]``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ragdesk.core.errors import BadInputError, RagdeskError

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

BATCH_ROWS = 4096
TEXT, TITLE, ID = "text", "title", "id"
PARQUET_HINT = "A parquet passage file has a `text` column and may have `title` and `id`."


def _parquet_file(path: Path) -> pq.ParquetFile:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise RagdeskError("Reading parquet files needs the pyarrow package.",
                           "Install it with `pip install ragdesk[parquet]` (or "
                           "`pip install pyarrow`).") from exc
    try:
        return pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's ArrowInvalid and OSError subclasses
        raise BadInputError(f"is not a readable parquet file ({exc}).", path=path) from exc


def _columns(path: Path, schema: pa.Schema) -> list[str]:
    import pyarrow as pa

    names = schema.names
    if TEXT not in names:
        raise BadInputError(f"has the columns {names}; a passage file needs `{TEXT}`.",
                            path=path, hint=PARQUET_HINT)
    for col in (TEXT, TITLE):
        if col in names and not (pa.types.is_string(schema.field(col).type)
                                 or pa.types.is_large_string(schema.field(col).type)):
            raise BadInputError(f"has a `{col}` column of {schema.field(col).type}, not "
                                "text.", path=path, hint=PARQUET_HINT)
    return [c for c in (ID, TEXT, TITLE) if c in names]


def parquet_passages(path: Path, on_bytes: Callable[[int], None]
                     ) -> Iterator[tuple[str, str, str | None]]:
    """(title, text, id) per row; ``on_bytes`` gets about how far into the file the reading
    is (rows read as a share of the file's size), after every batch."""
    pf = _parquet_file(path)
    columns = _columns(path, pf.schema_arrow)
    total = max(1, int(pf.metadata.num_rows))
    size = path.stat().st_size
    row = 0
    for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=columns):
        cols = {name: batch.column(i).to_pylist() for i, name in enumerate(columns)}
        texts = cols[TEXT]
        titles = cols.get(TITLE) or [""] * len(texts)
        ids = cols.get(ID) or [None] * len(texts)
        for k, text in enumerate(texts):
            if text is None:
                raise BadInputError(f"row {row + k} has no text.", path=path)
            ident = ids[k]
            yield titles[k] or "", text, None if ident is None else str(ident)
        row += len(texts)
        on_bytes(size * row // total)
