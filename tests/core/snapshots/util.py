"""Helpers shared by the snapshot tests and the CLI tests: corpora, references, catalogs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragdesk.core.catalog import Catalog
from ragdesk.core.paths import DataDir


def open_data(root: Path) -> tuple[DataDir, Catalog]:
    data = DataDir(root).ensure()
    return data, Catalog(data.catalog_path)


def write_jsonl(path: Path, articles: Sequence[tuple[str, str]]) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for i, (title, text) in enumerate(articles):
            fh.write(json.dumps({"id": f"doc{i}", "title": title, "text": text}) + "\n")
    return path


def naive_passages(articles: Sequence[tuple[str, str]], words: int = 100
                   ) -> list[tuple[str, str]]:
    """DPR's split, written as plainly as possible: every 100 words start a new passage."""
    out: list[tuple[str, str]] = []
    for title, text in articles:
        current: list[str] = []
        for w in text.split():
            current.append(w)
            if len(current) == words:
                out.append((title, " ".join(current)))
                current = []
        if current:
            out.append((title, " ".join(current)))
    return out


def reference_dpr_ctx(folder: Path, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """Passage vectors straight from transformers' DPRContextEncoder, one passage at a time
    (no padding), as DPR encodes a (title, text) pair."""
    import torch
    from transformers import AutoTokenizer, DPRContextEncoder

    tok = AutoTokenizer.from_pretrained(str(folder))
    model = DPRContextEncoder.from_pretrained(str(folder)).eval()
    out = []
    with torch.no_grad():
        for title, text in pairs:
            enc = tok(title, text, return_tensors="pt", truncation="only_second", max_length=512)
            out.append(model(**enc).pooler_output[0].numpy())
    return np.stack(out).astype(np.float32)


def clustered_vectors(n: int, dim: int, clusters: int, seed: int = 0,
                      spread: float = 0.35) -> np.ndarray:
    """Unit vectors around random centres: structure like real embeddings, unlike Gaussians."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    labels = rng.integers(0, clusters, n)
    x = centres[labels] + spread * rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


def exact_top_k(emb: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The brute-force reference: every inner product, fully sorted."""
    scores = queries.astype(np.float64) @ np.asarray(emb, dtype=np.float64).T
    ids = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, ids, axis=1), ids


def synthetic_snapshot_files(folder: Path, n: int, dim: int, seed: int = 0,
                             clusters: int = 200) -> tuple[Path, Path, np.ndarray]:
    """A JSONL of n short passages and an aligned .npy of clustered vectors."""
    folder.mkdir(parents=True, exist_ok=True)
    vecs = clustered_vectors(n, dim, clusters, seed)
    src = write_jsonl(folder / "passages.jsonl",
                      [(f"Title {i}", f"synthetic passage number {i}") for i in range(n)])
    npy = folder / "vectors.npy"
    np.save(npy, vecs)
    return src, npy, vecs


def flip_byte(path: Path, offset: int | None = None) -> None:
    raw = bytearray(path.read_bytes())
    pos = len(raw) // 2 if offset is None else offset
    raw[pos] ^= 0xFF
    path.write_bytes(bytes(raw))
