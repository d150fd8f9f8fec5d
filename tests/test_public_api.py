"""The public ``ragdesk.load_engine`` API as README documents it, with every retriever."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.options import RetrieverName


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory, tiny_models: Any) -> Path:
    from ragdesk.core.app import AppContext
    from ragdesk.core.snapshots import import_snapshot

    root = tmp_path_factory.mktemp("api-data")
    app = AppContext(root)
    src = root / "wiki.jsonl"
    src.write_text("".join(json.dumps({"title": t, "text": " ".join(x.split()[:60])}) + "\n"
                           for t, x in list(tiny_models.corpus)[:30]), encoding="utf-8")
    import_snapshot(app.data, app.catalog, src, name="wiki", encoder=str(tiny_models.ctx_encoder))
    app.close()
    return root


@pytest.mark.parametrize("retriever", ["dense", "sparse", "hybrid"])
def test_load_engine_answers_with_each_retriever(data_root: Path, tiny_models: Any,
                                                 retriever: RetrieverName) -> None:
    import ragdesk
    from ragdesk.core.retrieval.hybrid import retrieve_batch
    from ragdesk.core.snapshots import SnapshotLibrary

    title = tiny_models.corpus[7][0]
    question = f"what is known about {title}?"
    engine = ragdesk.load_engine(snapshot="wiki",
                                 question_encoder=str(tiny_models.question_encoder),
                                 generator=str(tiny_models.bart), data_dir=data_root)
    try:
        ans = engine.answer(question, mode="token", n_docs=4, max_new_tokens=6,
                            retriever=retriever)
        # Independent of the engine: the same snapshot searched directly.
        from ragdesk.core.app import AppContext

        app = AppContext(data_root)
        lib = SnapshotLibrary(app.data, app.catalog)
        try:
            snap = lib.get("wiki")
            q = engine.question_encoder.encode([question])
            if retriever == "dense":
                expected = snap.search(q, 4)[0]
            else:
                expected = retrieve_batch(snap, [question], q, 4, retriever)[0]
            ids = [h.id for h in expected]
            inner = np.asarray(snap.embeddings())[ids].astype(np.float64) @ q[0]
        finally:
            lib.close()
            app.close()
        assert [d.id for d in ans.docs] == [h.id for h in expected]
        assert [d.title for d in ans.docs] == [h.title for h in expected]
        # Whatever chose the passages, p(z|x) is softmax(d(z)·q(x)) over them, as RAG trained.
        np.testing.assert_allclose([d.score for d in ans.docs], inner, rtol=1e-4, atol=1e-4)
        e = np.exp(inner - inner.max())
        np.testing.assert_allclose([d.prob for d in ans.docs], e / e.sum(), rtol=1e-4)
        assert ans.token_ids and len(ans.tokens) == len(ans.token_ids)
        for tok in ans.tokens:
            assert len(tok.posterior) == 4 and abs(sum(tok.posterior) - 1.0) < 1e-4
        assert ans.logprob < 0
    finally:
        engine.close()
