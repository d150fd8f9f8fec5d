"""Importing snapshots: every format end to end, embeddings against transformers, and every
failure leaving the catalog, the other snapshots and the active one as they were."""

from __future__ import annotations

import bz2
import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.catalog import Catalog
from ragdesk.core.errors import (
    AlreadyExistsError,
    BadInputError,
    Cancelled,
    DiskFullError,
    MissingModelError,
)
from ragdesk.core.paths import DataDir
from ragdesk.core.progress import CancelToken, ProgressUpdate
from ragdesk.core.snapshots import import_snapshot, open_snapshot, read_manifest
from tests.core.snapshots.test_sources import dump as xml_dump
from tests.core.snapshots.test_sources import page
from tests.core.snapshots.util import (
    exact_top_k,
    naive_passages,
    open_data,
    reference_dpr_ctx,
    write_jsonl,
)


@pytest.fixture()
def env(tmp_path: Path) -> tuple[DataDir, Catalog]:
    return open_data(tmp_path / "data")


def snapshot_state(data: DataDir, catalog: Catalog) -> dict[str, Any]:
    """Everything a failed import must leave alone."""
    files = {}
    for p in sorted(data.snapshots_dir.rglob("*")):
        if p.is_file() and not p.name.startswith("."):
            files[str(p.relative_to(data.root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return {
        "snapshots": [(s.name, s.state, s.passages, s.variants) for s in catalog.list_snapshots()],
        "active": catalog.active_snapshot(),
        "files": files,
    }


def test_jsonl_import_matches_transformers_and_exact_search(
        env: tuple[DataDir, Catalog], tiny_models: Any, small_corpus: list[tuple[str, str]],
        tmp_path: Path) -> None:
    data, catalog = env
    src = write_jsonl(tmp_path / "corpus.jsonl", small_corpus)
    updates: list[ProgressUpdate] = []
    rec = import_snapshot(data, catalog, src, name="Small corpus",
                          encoder=str(tiny_models.ctx_encoder), progress=updates.append,
                          batch_size=4)
    expected = naive_passages(small_corpus)
    assert len(expected) > len(small_corpus)  # some articles were split
    assert rec.state == "ready" and rec.passages == len(expected)
    assert rec.encoder_family == "dpr" and rec.dim == 32
    assert rec.active  # the first snapshot becomes the active one
    assert [v.variant for v in rec.variants] == ["flat"]
    enc_updates = [u for u in updates if u.message.startswith("encoding")]
    assert enc_updates[-1].done == enc_updates[-1].total == len(expected)

    index = open_snapshot(data, catalog)
    try:
        emb = index.embeddings()
        ref = reference_dpr_ctx(tiny_models.ctx_encoder, expected)
        np.testing.assert_allclose(emb, ref, rtol=1e-4, atol=1e-4)
        got = index.get_passages(list(range(len(expected))))
        assert [(p.title, p.text) for p in got] == expected

        queries = ref[[0, 5, 9]] + 0.01
        hits = index.search(queries, 5)
        ref_scores, _ = exact_top_k(ref, queries, 5)
        for q, row, ref_row in zip(queries, hits, ref_scores, strict=True):
            assert len(row) == 5
            np.testing.assert_allclose([h.score for h in row], ref_row, rtol=1e-4)
            for h in row:  # each score is that passage's exact inner product
                assert h.score == pytest.approx(float(ref[h.id] @ q), rel=1e-4)
                assert (h.title, h.text) == expected[h.id]
    finally:
        index.close()

    manifest = read_manifest(data.snapshot_dir(rec.slug))
    assert manifest.encoder.id == str(tiny_models.ctx_encoder)
    assert manifest.encoder.pooling == "cls-pooler" and manifest.dim == 32
    for fname, meta in manifest.files.items():
        raw = (data.snapshot_dir(rec.slug) / fname).read_bytes()
        assert meta == {"size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    assert not any(data.staging_dir.iterdir())


def test_sentence_transformers_encoder_and_text_encoder_object(
        env: tuple[DataDir, Catalog], tiny_models: Any, small_corpus: list[tuple[str, str]],
        tmp_path: Path) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    from ragdesk.core.encoders import load_encoder

    data, catalog = env
    enc = load_encoder(tiny_models.st_encoder)
    src = write_jsonl(tmp_path / "c.jsonl", small_corpus[:4])
    rec = import_snapshot(data, catalog, src, name="st", encoder=enc)
    assert rec.encoder_family == "sentence-transformers" and rec.dim == 24
    index = open_snapshot(data, catalog, "st")
    emb = np.asarray(index.embeddings())
    index.close()
    # Reference: mean pooling over the real tokens, then L2 normalisation (modules.json).
    tok = AutoTokenizer.from_pretrained(str(tiny_models.st_encoder))
    model = AutoModel.from_pretrained(str(tiny_models.st_encoder)).eval()
    for i, (title, text) in enumerate(naive_passages(small_corpus[:4])):
        batch = tok(f"{title}. {text}", return_tensors="pt", truncation=True, max_length=128)
        with torch.no_grad():
            h = model(**batch).last_hidden_state[0]
        v = h.mean(0).numpy()
        np.testing.assert_allclose(emb[i], v / np.linalg.norm(v), rtol=1e-4, atol=1e-5)


def test_dpr_tsv_import(env: tuple[DataDir, Catalog], dpr_ctx: Any, tmp_path: Path) -> None:
    data, catalog = env
    p = tmp_path / "psgs_w100.tsv"
    rows = [("1", "Paris is the capital of France.", "Paris"),
            ("2", "Berlin is the capital of Germany.", "Berlin"),
            ("3", " ".join(["long"] * 120), "Long")]
    p.write_text("id\ttext\ttitle\n" + "".join(f"{a}\t{b}\t{c}\n" for a, b, c in rows))
    rec = import_snapshot(data, catalog, p, name="tsv", encoder=dpr_ctx)
    assert rec.passages == 3  # DPR rows are passages already: not re-split
    index = open_snapshot(data, catalog, "tsv")
    assert [(x.title, x.text) for x in index.get_passages([0, 1, 2])] == \
        [(c, b) for _, b, c in rows]
    index.close()


def test_wiki_xml_bz2_import(env: tuple[DataDir, Catalog], dpr_ctx: Any, tmp_path: Path) -> None:
    data, catalog = env
    body = " ".join(f"word{i}" for i in range(230))
    xml = xml_dump([page("Long", 0, body), page("Redirect", 0, "#REDIRECT [[Long]]", "Long"),
                    page("Talk:Long", 1, "talk")])
    p = tmp_path / "dump.xml.bz2"
    p.write_bytes(bz2.compress(xml.encode()))
    rec = import_snapshot(data, catalog, p, name="xml", encoder=dpr_ctx)
    assert rec.passages == 3 and rec.source == str(p.resolve())
    index = open_snapshot(data, catalog, "xml")
    texts = [x.text for x in index.get_passages([0, 1, 2])]
    index.close()
    assert texts == [t for _, t in naive_passages([("Long", body)])]


def test_vital_articles_import_with_limit(env: tuple[DataDir, Catalog], dpr_ctx: Any) -> None:
    from ragdesk.core.snapshots import vital_articles_path

    data, catalog = env
    rec = import_snapshot(data, catalog, "vital-articles", name="vital", encoder=dpr_ctx,
                          limit=40, default_pack="starter")
    assert rec.passages == 40 and rec.source == "vital-articles"
    assert rec.default_pack == "starter"
    raw = json.loads(vital_articles_path().read_text(encoding="utf-8"))
    expected = naive_passages([(v["title"], v["extract"]) for v in raw.values()][:40])[:40]
    index = open_snapshot(data, catalog, "vital")
    assert [(x.title, x.text) for x in index.get_passages(list(range(40)))] == expected
    index.close()


def test_precomputed_embeddings(env: tuple[DataDir, Catalog], dpr_ctx: Any,
                                tmp_path: Path) -> None:
    data, catalog = env
    arts = [(f"T{i}", f"passage {i}") for i in range(50)]
    src = write_jsonl(tmp_path / "p.jsonl", arts)
    vecs = np.random.default_rng(0).standard_normal((50, 32)).astype(np.float16)
    np.save(tmp_path / "v.npy", vecs)
    rec = import_snapshot(data, catalog, src, name="pre", encoder=dpr_ctx,
                          embeddings=tmp_path / "v.npy")
    index = open_snapshot(data, catalog, "pre")
    assert index.embeddings().dtype == np.float16  # float16 kept: half the disk
    np.testing.assert_array_equal(index.embeddings(), vecs)
    q = vecs[[3]].astype(np.float32)
    hit = index.search(q, 1)[0][0]
    ref_scores, ref_ids = exact_top_k(vecs.astype(np.float32), q, 1)
    assert hit.id == ref_ids[0, 0] and hit.score == pytest.approx(ref_scores[0, 0], rel=1e-5)
    index.close()
    assert rec.passages == 50

    np.save(tmp_path / "short.npy", vecs[:49])
    with pytest.raises(BadInputError, match=r"49 rows.*50 passages"):
        import_snapshot(data, catalog, src, name="short", encoder=dpr_ctx,
                        embeddings=tmp_path / "short.npy")
    before = snapshot_state(data, catalog)
    np.save(tmp_path / "wide.npy", np.zeros((50, 16), np.float32))
    with pytest.raises(BadInputError, match="16-dimensional"):
        import_snapshot(data, catalog, src, name="wide", encoder=dpr_ctx,
                        embeddings=tmp_path / "wide.npy")
    assert snapshot_state(data, catalog) == before  # refused before touching anything


# ---- failures --------------------------------------------------------------------------


@pytest.fixture()
def with_existing(env: tuple[DataDir, Catalog], dpr_ctx: Any, tmp_path: Path
                  ) -> tuple[DataDir, Catalog, dict[str, Any]]:
    data, catalog = env
    src = write_jsonl(tmp_path / "keep.jsonl", [(f"K{i}", f"keep me {i}") for i in range(6)])
    import_snapshot(data, catalog, src, name="keep", encoder=dpr_ctx)
    return data, catalog, snapshot_state(data, catalog)


def assert_untouched(data: DataDir, catalog: Catalog, before: dict[str, Any]) -> None:
    after = snapshot_state(data, catalog)
    assert after["files"] == before["files"]
    assert after["active"] == before["active"] == "keep"
    assert [s for s in after["snapshots"] if s[0] == "keep"] == before["snapshots"]
    index = open_snapshot(data, catalog)  # the active snapshot still answers
    assert len(index.search(index.embeddings()[:1], 3)[0]) == 3
    index.close()


def test_existing_name_is_refused(with_existing: Any, dpr_ctx: Any, tmp_path: Path) -> None:
    data, catalog, before = with_existing
    src = write_jsonl(tmp_path / "other.jsonl", [("a", "b")])
    with pytest.raises(AlreadyExistsError, match="'keep' already exists"):
        import_snapshot(data, catalog, src, name="keep", encoder=dpr_ctx)
    assert snapshot_state(data, catalog) == before
    # "KEEP" would share the folder name "keep": it now gets a folder of its own (see
    # tests/redteam/test_messages.py), so it is no longer refused.


def test_missing_encoder(with_existing: Any, tmp_path: Path) -> None:
    data, catalog, before = with_existing
    src = write_jsonl(tmp_path / "other.jsonl", [("a", "b")])
    with pytest.raises(MissingModelError):
        import_snapshot(data, catalog, src, name="new", encoder=str(tmp_path / "no-model"))
    with pytest.raises(MissingModelError):
        import_snapshot(data, catalog, src, name="new", encoder="nobody/no-such-model")
    with pytest.raises(BadInputError, match="encoder is needed"):
        import_snapshot(data, catalog, src, name="new", encoder=None)
    assert snapshot_state(data, catalog) == before


@pytest.mark.parametrize("content", [b"", b"\x00\x01\x02binary\x00" * 50])
def test_empty_and_binary_files_touch_nothing(with_existing: Any, dpr_ctx: Any,
                                              tmp_path: Path, content: bytes) -> None:
    data, catalog, before = with_existing
    p = tmp_path / "bad.jsonl"
    p.write_bytes(content)
    with pytest.raises(BadInputError):
        import_snapshot(data, catalog, p, name="bad", encoder=dpr_ctx)
    assert snapshot_state(data, catalog) == before


def test_malformed_line_fails_the_import_cleanly(with_existing: Any, dpr_ctx: Any,
                                                 tmp_path: Path) -> None:
    data, catalog, before = with_existing
    p = write_jsonl(tmp_path / "bad.jsonl", [(f"t{i}", f"text {i}") for i in range(4100)])
    with open(p, "a") as fh:
        fh.write("{not json}\n")
    with pytest.raises(BadInputError) as ei:
        import_snapshot(data, catalog, p, name="bad", encoder=dpr_ctx)
    assert ei.value.line == 4101
    rec = catalog.get_snapshot("bad")
    assert rec.state == "failed" and "line 4101" in (rec.error or "")
    assert not (data.staging_dir / "bad").exists()  # nothing to resume: staging removed
    assert not data.snapshot_dir("bad").exists()
    assert_untouched(data, catalog, before)
    # Fixed input under the same name: a failed import can be run again.
    p.write_text("".join(p.read_text().splitlines(keepends=True)[:3]))
    assert import_snapshot(data, catalog, p, name="bad", encoder=dpr_ctx).state == "ready"


def test_truncated_bz2_fails_the_import_cleanly(with_existing: Any, dpr_ctx: Any,
                                                tmp_path: Path) -> None:
    data, catalog, before = with_existing
    body = [page(f"A{i}", 0, f"Article {i} says " + " ".join(f"w{i * j}" for j in range(150)))
            for i in range(400)]
    full = bz2.compress(xml_dump(body).encode(), compresslevel=1)  # 100 kB blocks
    p = tmp_path / "cut.xml.bz2"
    p.write_bytes(full[: len(full) * 2 // 3])  # whole first blocks: it fails mid-stream
    with pytest.raises(BadInputError, match="truncated"):
        import_snapshot(data, catalog, p, name="cut", encoder=dpr_ctx)
    assert catalog.get_snapshot("cut").state == "failed"
    assert not (data.staging_dir / "cut").exists() and not data.snapshot_dir("cut").exists()
    assert_untouched(data, catalog, before)


def test_disk_full_fails_cleanly(with_existing: Any, dpr_ctx: Any, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    data, catalog, before = with_existing

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", no_space, raising=False)
    src = write_jsonl(tmp_path / "big.jsonl", [(f"t{i}", f"text {i}") for i in range(30)])
    with pytest.raises(DiskFullError, match="disk is full"):
        import_snapshot(data, catalog, src, name="full", encoder=dpr_ctx)
    rec = catalog.get_snapshot("full")
    assert rec.state == "failed" and "Free some space" in (rec.error or "")
    assert_untouched(data, catalog, before)
    monkeypatch.undo()
    assert import_snapshot(data, catalog, src, name="full", encoder=dpr_ctx).state == "ready"


def test_disk_full_while_writing_the_manifest(with_existing: Any, dpr_ctx: Any, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import ragdesk.core.atomic as atomic

    data, catalog, before = with_existing
    real_open = open

    def full_open(file: Any, mode: str = "r", *a: Any, **kw: Any) -> Any:
        fh = real_open(file, mode, *a, **kw)
        if "manifest.json" in str(file) and "w" in mode:
            fh.close()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(file))
        return fh

    monkeypatch.setattr(atomic, "open", full_open, raising=False)
    src = write_jsonl(tmp_path / "m.jsonl", [(f"t{i}", f"text {i}") for i in range(10)])
    with pytest.raises(DiskFullError):
        import_snapshot(data, catalog, src, name="m", encoder=dpr_ctx)
    assert catalog.get_snapshot("m").state == "failed"
    assert not data.snapshot_dir("m").exists()
    assert_untouched(data, catalog, before)


def test_cancel_keeps_staging_and_resumes(with_existing: Any, dpr_ctx: Any,
                                          small_corpus: list[tuple[str, str]],
                                          tmp_path: Path) -> None:
    data, catalog, before = with_existing
    src = write_jsonl(tmp_path / "c.jsonl", small_corpus)
    token = CancelToken()

    def cancel_after_some(u: ProgressUpdate) -> None:
        if u.message.startswith("encoding") and u.done >= 8:
            token.cancel()

    with pytest.raises(Cancelled):
        import_snapshot(data, catalog, src, name="c", encoder=dpr_ctx, batch_size=4,
                        progress=cancel_after_some, cancel=token)
    rec = catalog.get_snapshot("c")
    assert rec.state == "failed" and "resume" in (rec.error or "")
    assert (data.staging_dir / rec.slug).is_dir()
    assert_untouched(data, catalog, before)

    updates: list[ProgressUpdate] = []
    rec = import_snapshot(data, catalog, src, name="c", encoder=dpr_ctx, batch_size=4,
                          progress=updates.append)
    first = next(u for u in updates if u.message.startswith("encoding"))
    assert first.done >= 8 and "resumed" in first.message
    assert not any(u.message.startswith("reading") for u in updates)  # passages kept
    index = open_snapshot(data, catalog, "c")
    ref = reference_dpr_ctx(Path(dpr_ctx.info.id), naive_passages(small_corpus))
    np.testing.assert_allclose(index.embeddings(), ref, rtol=1e-4, atol=1e-4)
    index.close()


def test_changed_arguments_restart_instead_of_resuming(env: tuple[DataDir, Catalog],
                                                       dpr_ctx: Any, tmp_path: Path) -> None:
    data, catalog = env
    src = write_jsonl(tmp_path / "c.jsonl", [(f"t{i}", f"text {i}") for i in range(40)])
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        import_snapshot(data, catalog, src, name="c", encoder=dpr_ctx, cancel=token)
    rec = import_snapshot(data, catalog, src, name="c", encoder=dpr_ctx, limit=10)
    assert rec.passages == 10


def test_rerun_after_a_kill_between_the_folder_and_the_catalog_is_done(
        with_existing: Any, dpr_ctx: Any, tmp_path: Path) -> None:
    """Killed after the complete folder was renamed into place, before the catalog said
    "ready": running the same import again (how a user resumes) is done, not "already
    exists"; another import of that name is still refused."""
    from ragdesk.core.catalog import SnapshotState

    data, catalog, before = with_existing
    catalog.update_snapshot("keep", state=SnapshotState.IMPORTING)
    other = write_jsonl(tmp_path / "other.jsonl", [("a", "b")])
    with pytest.raises(AlreadyExistsError, match="'keep' already exists"):
        import_snapshot(data, catalog, other, name="keep", encoder=dpr_ctx)
    catalog.update_snapshot("keep", state=SnapshotState.IMPORTING)
    rec = import_snapshot(data, catalog, tmp_path / "keep.jsonl", name="keep", encoder=dpr_ctx)
    assert rec.state == "ready" and rec.passages == 6
    assert_untouched(data, catalog, before)


def test_a_file_of_empty_lines_shows_progress_and_cancels_while_no_passage_comes(
        env: tuple[DataDir, Catalog], dpr_ctx: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Millions of empty lines (a small .gz can inflate to a billion): lines that hold no
    passage still move the progress bar, and Cancel stops the reading then, not after the
    last line. (Plain text here, so that the position read advances line by line.)"""
    import time

    data, catalog = env
    src = tmp_path / "newlines.jsonl"
    src.write_bytes(b'{"title": "t", "text": "one passage"}\n' + b"\n" * 4_000_000)
    clock = [0.0]

    def tick() -> float:  # a tenth of a second between two looks at the clock
        clock[0] += 0.1
        return clock[0]

    monkeypatch.setattr(time, "monotonic", tick)

    token = CancelToken()
    reading: list[ProgressUpdate] = []

    def watch(u: ProgressUpdate) -> None:
        if u.message.startswith("reading") and 0 < u.done < src.stat().st_size:
            reading.append(u)
            if len(reading) == 3:
                token.cancel()

    with pytest.raises(Cancelled):
        import_snapshot(data, catalog, src, name="nl", encoder=dpr_ctx, progress=watch,
                        cancel=token)
    assert len(reading) == 3  # reported within the empty lines, then stopped
    assert reading[0].done < reading[-1].done  # the position read advances
    assert "1 passage" in reading[-1].message
