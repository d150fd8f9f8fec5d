"""One rule for every front end: a snapshot whose dense vectors are still being computed
answers with BM25, and one holding fewer passages than K answers with all it holds; the answer
says which retriever searched. Checked on the core function and through `ragdesk ask`."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ragdesk.core.session import ready_plan

SNAP = "half-built"


def test_the_plan_falls_back_to_bm25_and_to_the_passages_there_are() -> None:
    ready = SimpleNamespace(name="big", size=1000, has_dense=True)
    plan = ready_plan(ready, "hybrid", 5)
    assert (plan.retriever, plan.n_docs, plan.notes()) == ("hybrid", 5, [])
    staged = SimpleNamespace(name="staged", size=1000, has_dense=False)
    plan = ready_plan(staged, "dense", 5)
    assert plan.retriever == "sparse" and plan.dense_pending and plan.n_docs == 5
    assert "BM25" in plan.notes()[0] and "'staged'" in plan.notes()[0]
    small = SimpleNamespace(name="mydocs", size=4, has_dense=True)
    plan = ready_plan(small, "dense", 5)
    assert plan.retriever == "dense" and plan.n_docs == 4 and plan.fewer_docs
    assert plan.notes() == ["reading all 4 passages of 'mydocs' (K = 5 asked)"]


@pytest.fixture()
def staged_dir(data_dir: Path, tiny_models: Any) -> Path:
    """A data directory whose active snapshot was interrupted after its BM25 stage, while
    its dense vectors were being encoded (as quitting during the starter setup leaves it)."""
    from ragdesk.core.app import AppContext
    from ragdesk.core.errors import Cancelled
    from ragdesk.core.progress import CancelToken, ProgressUpdate
    from ragdesk.core.snapshots import import_snapshot, recover

    app = AppContext(data_dir)
    src = data_dir.parent / "passages.jsonl"
    src.write_text("".join(json.dumps({"title": t, "text": " ".join(x.split()[:60])}) + "\n"
                           for t, x in tiny_models.corpus[:12]), encoding="utf-8")
    cancel = CancelToken()

    def stop_when_encoding(u: ProgressUpdate) -> None:
        if u.message.startswith("encoding") and u.done > 0:
            cancel.cancel()

    with pytest.raises(Cancelled):
        import_snapshot(app.data, app.catalog, src, name=SNAP, fmt="jsonl", staged=True,
                        encoder=str(tiny_models.ctx_encoder), batch_size=4,
                        progress=stop_when_encoding, cancel=cancel)
    recover(app.data, app.catalog)
    rec = app.catalog.get_snapshot(SNAP)
    assert rec.state == "failed" and rec.searchable  # BM25 only
    app.catalog.set_active(SNAP)
    app.close()
    return data_dir


def _models(tiny_models: Any) -> list[str]:
    return ["--question-encoder", str(tiny_models.question_encoder),
            "--generator", str(tiny_models.bart), "--max-new-tokens", "4"]


def test_ask_answers_from_a_half_built_snapshot_with_bm25(cli: Any, staged_dir: Path,
                                                         tiny_models: Any) -> None:
    code, out, err = cli("ask", "who wrote the first book", *_models(tiny_models), "--json",
                         "--docs", "3")
    assert code == 0, err
    ans = json.loads(out)
    assert ans["retriever"] == "sparse" and ans["snapshot"] == SNAP
    assert len(ans["docs"]) == 3
    assert "BM25 keyword search" in err and "are not all computed yet" in err
    code, out, err = cli("ask", "who wrote the first book", *_models(tiny_models))
    assert code == 0, err
    assert "BM25 retrieval" in out  # the answer says which retriever searched


def test_ask_reads_all_the_passages_of_a_small_snapshot(cli: Any, data_dir: Path,
                                                        tiny_models: Any) -> None:
    from ragdesk.core.app import AppContext
    from ragdesk.core.snapshots import import_snapshot

    app = AppContext(data_dir)
    src = data_dir.parent / "two.jsonl"
    src.write_text("".join(json.dumps({"title": t, "text": " ".join(x.split()[:40])}) + "\n"
                           for t, x in tiny_models.corpus[:2]), encoding="utf-8")
    import_snapshot(app.data, app.catalog, src, name="mydocs", fmt="jsonl",
                    encoder=str(tiny_models.ctx_encoder))
    app.catalog.set_active("mydocs")
    app.close()
    code, out, err = cli("ask", "who wrote the first book", *_models(tiny_models), "--json")
    assert code == 0, err
    ans = json.loads(out)
    assert len(ans["docs"]) == 2 and ans["retriever"] == "dense"
    assert "reading all 2 passages of 'mydocs' (K = 5 asked)" in err
