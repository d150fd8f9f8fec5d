"""The Engine over real snapshots (tiny DPR encoders): retrieval, snapshot switching during an
answer, the retriever hook, packs, model loading once, and errors a user can cause."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.errors import BadInputError, EncoderMismatchError, RagdeskError
from ragdesk.core.types import AnswerToken, Hit

SNAP_A, SNAP_B = "wiki-a", "wiki-b"


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory, tiny_models: Any) -> Path:
    """A data directory with two snapshots of 12 passages each (A active)."""
    from ragdesk.core.app import AppContext
    from ragdesk.core.snapshots import import_snapshot

    root = tmp_path_factory.mktemp("engine-data")
    app = AppContext(root)
    corpus = list(tiny_models.corpus)
    for name, part in ((SNAP_A, corpus[:12]), (SNAP_B, corpus[100:112])):
        src = root / f"{name}.jsonl"
        src.write_text("".join(json.dumps({"title": t, "text": " ".join(x.split()[:60])}) + "\n"
                               for t, x in part), encoding="utf-8")
        import_snapshot(app.data, app.catalog, src, name=name,
                        encoder=str(tiny_models.ctx_encoder), fmt="jsonl")
    app.catalog.set_active(SNAP_A)
    app.close()
    return root


@pytest.fixture(scope="module")
def engine(data_root: Path, tiny_models: Any) -> Any:
    from ragdesk import load_engine

    eng = load_engine(question_encoder=str(tiny_models.question_encoder),
                      generator=str(tiny_models.bart), data_dir=data_root)
    yield eng
    eng.close()


def test_retrieval_is_the_snapshot_search(engine: Any) -> None:
    index = engine.library.get(SNAP_A)
    q = "when was the city founded"
    vec = engine.question_encoder.encode([q])
    hits = index.search(vec, 4)[0]
    docs = engine.retrieve(q, n_docs=4)
    assert [d.id for d in docs] == [h.id for h in hits]
    assert [d.score for d in docs] == pytest.approx([h.score for h in hits])
    probs = np.exp(np.array([h.score for h in hits]) - max(h.score for h in hits))
    assert [d.prob for d in docs] == pytest.approx(list(probs / probs.sum()), abs=1e-6)
    assert all(d.snapshot == SNAP_A for d in docs)


def test_answer_uses_the_retrieved_docs(engine: Any) -> None:
    q = "who wrote the first book"
    ans = engine.answer(q, mode="token", n_docs=3, max_new_tokens=6)
    direct = engine.answer_from_docs(
        q, [Hit(d.id, d.title, d.text, d.score) for d in engine.retrieve(q, n_docs=3)],
        mode="token", max_new_tokens=6)
    assert ans.token_ids == direct.token_ids
    assert ans.snapshot == SNAP_A and len(ans.docs) == 3
    assert {"retrieve_s", "encode_s", "decode_s", "total_s"} <= set(ans.timings)


def test_a_switch_during_an_answer_does_not_affect_it(engine: Any) -> None:
    q = "what is the largest animal"
    before = engine.answer(q, mode="sequence", decoding="fast", n_docs=3, max_new_tokens=6,
                           min_new_tokens=6)
    switched: list[bool] = []

    def on_token(_: AnswerToken) -> None:
        if not switched:
            engine.library.switch(SNAP_B)
            switched.append(True)

    try:
        during = engine.answer(q, mode="token", n_docs=3, max_new_tokens=6, min_new_tokens=6,
                               on_token=on_token)
        after = engine.answer(q, mode="token", n_docs=3, max_new_tokens=6)
    finally:
        engine.library.switch(SNAP_A)
    assert switched
    assert during.snapshot == SNAP_A
    assert [d.id for d in during.docs] == [d.id for d in before.docs]
    assert after.snapshot == SNAP_B
    assert {d.text for d in after.docs}.isdisjoint({d.text for d in during.docs})


def test_pinned_snapshot(engine: Any, data_root: Path, tiny_models: Any) -> None:
    ans = engine.answer("when was the city founded", snapshot=SNAP_B, n_docs=2,
                        max_new_tokens=4)
    assert ans.snapshot == SNAP_B


def test_more_docs_than_the_snapshot_holds(engine: Any) -> None:
    with pytest.raises(BadInputError, match="holds only 12"):
        engine.answer("who?", n_docs=13)


def test_retriever_hook(engine: Any) -> None:
    from ragdesk.core.retrieval.registry import register_retriever, unregister_retriever

    with pytest.raises(BadInputError, match="Unknown retriever 'no-such-retriever'"):
        engine.answer("who?", retriever="no-such-retriever")
    seen: list[Any] = []

    def fake(req: Any) -> list[Hit]:
        seen.append(req)
        return [Hit(1, "T", "some text", 3.0), Hit(2, "U", "other text", 1.0)]

    register_retriever("test-fake", fake)
    try:
        ans = engine.answer("who?", retriever="test-fake", n_docs=2, max_new_tokens=3)
    finally:
        unregister_retriever("test-fake")
    assert [d.id for d in ans.docs] == [1, 2]
    assert seen[0].n_docs == 2 and seen[0].snapshot.name == SNAP_A


def test_a_second_question_loads_nothing(engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import transformers

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("a model or tokenizer was loaded again")

    monkeypatch.setattr(transformers.PreTrainedModel, "from_pretrained", refuse)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", refuse)
    for mode in ("token", "sequence"):
        engine.answer("who wrote the first book", mode=mode, n_docs=2, max_new_tokens=3)


def test_default_pack_of_the_snapshot(data_root: Path, tiny_models: Any) -> None:
    from ragdesk import load_engine
    from ragdesk.core.app import AppContext
    from ragdesk.core.models import PackSpec, register_pack

    app = AppContext(data_root)
    register_pack(app.catalog, PackSpec(
        name="tiny-pack", kind="custom", question_encoder=str(tiny_models.question_encoder),
        passage_encoder=str(tiny_models.ctx_encoder), generator=str(tiny_models.causal_lm),
        generator_kind="causal", encoder_family="dpr", encoder_dim=32), replace=True)
    app.catalog.update_snapshot(SNAP_B, default_pack="tiny-pack")
    app.close()
    eng = load_engine(snapshot=SNAP_B, data_dir=data_root)
    try:
        assert eng.generator.kind == "causal"
        ans = eng.answer("who wrote the first book", n_docs=2, max_new_tokens=3)
        assert ans.snapshot == SNAP_B
    finally:
        eng.close()


def test_mismatched_question_encoder(data_root: Path, tiny_models: Any) -> None:
    from ragdesk import load_engine

    eng = load_engine(question_encoder=str(tiny_models.st_encoder),
                      generator=str(tiny_models.bart), data_dir=data_root)
    try:
        with pytest.raises(EncoderMismatchError):
            eng.answer("who?", n_docs=2)
    finally:
        eng.close()


@pytest.mark.parametrize("what", ["generator", "question_encoder", "snapshot"])
def test_load_engine_errors(data_root: Path, tiny_models: Any, tmp_path: Path,
                            what: str) -> None:
    from ragdesk import load_engine

    kw: dict[str, Any] = {"question_encoder": str(tiny_models.question_encoder),
                          "generator": str(tiny_models.bart), "data_dir": data_root}
    if what == "snapshot":
        kw["snapshot"] = "no-such-snapshot"
    else:
        (tmp_path / "empty").mkdir()
        kw[what] = str(tmp_path / "empty")
    with pytest.raises(RagdeskError):
        load_engine(**kw)
