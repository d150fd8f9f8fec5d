"""The callable class a Ray Data actor pool runs: ragdesk's passage encoder, loaded once per
actor, over rows that each hold one shard's passages. Imports no Ray: Ray pickles the class
by reference, so every node needs the same ragdesk installed."""

from __future__ import annotations

import os
from typing import Any

import numpy as np


class PassageEncoder:
    """Loads the encoder as ``index import`` does (``role="passage"``, the fused kernel where
    the model is a BERT on the CPU) and encodes what ``passage_inputs`` makes of the passages.

    Each returned row is one shard: its vectors padded with zero rows to ``shard_rows``, so
    that every row's tensor has the same shape (the last shard is shorter), and ``rows``,
    how many of them are real.
    """

    def __init__(self, encoder: str, device: str, dtype: str, batch_size: int,
                 shard_rows: int, environ: dict[str, str] | None = None) -> None:
        from ragdesk.core.encoders import load_encoder

        # The driver's choices that the encoder reads from the environment (the precision
        # switch): a worker's environment is the one its node was started with.
        os.environ.update(environ or {})
        loaded = load_encoder(encoder, role="passage", device=device)
        # the import's choice (ragdesk.core.snapshots.builder), so that the vectors equal a
        # local import's
        self.encoder = loaded.fast()
        self.dtype = np.dtype(dtype)
        self.batch_size = batch_size
        self.shard_rows = shard_rows

    def encode_shard(self, titles: Any, texts: Any) -> np.ndarray:
        from ragdesk.core.encoders import passage_inputs

        enc = self.encoder
        inputs = passage_inputs(enc, ((str(title), str(text))
                                      for title, text in zip(titles, texts, strict=True)))
        # length-sorted batches inside, as the import encodes
        vectors = enc.encode(inputs, batch_size=self.batch_size)
        out = np.zeros((self.shard_rows, enc.dim), dtype=self.dtype)
        out[:len(vectors)] = vectors
        return out

    def __call__(self, batch: dict[str, Any]) -> dict[str, np.ndarray]:
        vectors = [self.encode_shard(titles, texts)
                   for titles, texts in zip(batch["titles"], batch["texts"], strict=True)]
        return {"shard": np.asarray(batch["shard"], dtype=np.int64),
                "start": np.asarray(batch["start"], dtype=np.int64),
                "rows": np.asarray([len(t) for t in batch["texts"]], dtype=np.int64),
                "vectors": np.stack(vectors)}
