"""`ragdesk eval` on a small snapshot built from JSONL with the tiny encoders, checked against
an independent recomputation (exact numpy search, a fresh BM25 index, the metric functions)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.evaluation.metrics import exact_match, has_answer, token_f1
from ragdesk.core.snapshots import import_snapshot, open_snapshot


@pytest.fixture(scope="module")
def tiny_setup(tiny_models: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from ragdesk.core.app import AppContext
    from ragdesk.core.models.packs import PackSpec, register_pack

    root = tmp_path_factory.mktemp("cli-eval")
    data_dir = root / "data"
    articles = list(tiny_models.corpus[:60])
    src = root / "articles.jsonl"
    src.write_text("".join(json.dumps({"title": t, "text": x}) + "\n" for t, x in articles),
                   encoding="utf-8")
    rng = random.Random(0)
    questions = []
    for title, text in articles[:30]:
        words = text.split()
        i = rng.randrange(max(1, len(words) - 2))
        questions.append({"question": f"what about {title.lower()}?",
                          "answer": [" ".join(words[i:i + 2]) or title]})
    questions.append({"question": "something absent", "answer": ["zqxj vvkw"]})
    qpath = root / "questions.jsonl"
    qpath.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")

    ctx = AppContext(data_dir)
    import_snapshot(ctx.data, ctx.catalog, src, name="tiny", encoder=tiny_models.st_encoder,
                    fmt="jsonl")
    register_pack(ctx.catalog, PackSpec(
        name="tiny", kind="custom", question_encoder=str(tiny_models.st_encoder),
        passage_encoder=str(tiny_models.st_encoder), generator=str(tiny_models.causal_lm),
        generator_kind="causal", encoder_family="sentence-transformers"))
    ctx.close()
    return {"data_dir": data_dir, "questions": qpath, "items": questions,
            "encoder": tiny_models.st_encoder}


def _run(setup: dict[str, Any], capsys: pytest.CaptureFixture[str], *argv: str
         ) -> tuple[int, str, str]:
    from ragdesk.cli.main import main

    code = main(["--data-dir", str(setup["data_dir"]), "eval", str(setup["questions"]),
                 "--snapshot", "tiny", "--pack", "tiny", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _snapshot(setup: dict[str, Any]) -> Any:
    from ragdesk.core.app import AppContext

    ctx = AppContext(setup["data_dir"])
    return open_snapshot(ctx.data, ctx.catalog, "tiny")


def _expected_accuracy(setup: dict[str, Any], rankings: list[list[int]]
                       ) -> tuple[dict[str, float], dict[str, float], int]:
    snap = _snapshot(setup)
    ps = snap.get_passages(list(range(snap.size)))
    items = setup["items"]
    firsts, answerable = [], []
    for item, ranking in zip(items, rankings, strict=True):
        flags = [has_answer(ps[i].title, ps[i].text, item["answer"]) for i in ranking]
        firsts.append(flags.index(True) if any(flags) else None)
        answerable.append(any(has_answer(p.title, p.text, item["answer"]) for p in ps))

    def acc(rows: list[int | None]) -> dict[str, float]:
        return {str(k): sum(f is not None and f < k for f in rows) / len(rows)
                for k in (1, 5, 20, 100)}

    sub = [f for f, a in zip(firsts, answerable, strict=True) if a]
    return acc(firsts), acc(sub), len(sub)


def test_retrieval_only_json_matches_exact_numpy_search(
        tiny_setup: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    from ragdesk.core.encoders import load_encoder

    code, out, err = _run(tiny_setup, capsys, "--retrieval-only", "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["n"] == len(tiny_setup["items"])
    assert s["em"] is None and s["f1"] is None
    assert set(s["top_k_accuracy"]) == {"1", "5", "20", "100"}

    snap = _snapshot(tiny_setup)
    enc = load_encoder(tiny_setup["encoder"], role="question")
    q = enc.encode([i["question"] for i in tiny_setup["items"]])
    emb = np.asarray(snap.embeddings(), dtype=np.float32)
    rankings = [np.lexsort((np.arange(len(emb)), -(emb @ v)))[:100].tolist() for v in q]
    all_acc, ans_acc, n_ans = _expected_accuracy(tiny_setup, rankings)
    assert s["top_k_accuracy"] == pytest.approx(all_acc)
    assert s["answerable"]["n"] == n_ans < s["n"]
    assert s["answerable"]["top_k_accuracy"] == pytest.approx(ans_acc)
    assert s["answerable"]["em"] is None
    assert s["timings"]["retrieval_per_question_ms"] > 0
    assert s["config"]["retriever"] == "dense" and s["config"]["retrieval_only"] is True


def test_sparse_matches_an_independent_bm25_and_hybrid_runs(
        tiny_setup: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    from ragdesk.core.sparse.bm25 import BM25Index

    code, out, err = _run(tiny_setup, capsys, "--retrieval-only", "--json",
                          "--retriever", "sparse")
    assert code == 0, err
    s = json.loads(out)
    snap = _snapshot(tiny_setup)
    assert (snap.folder / "bm25" / "meta.json").exists()  # built lazily, inside the snapshot
    ps = snap.get_passages(list(range(snap.size)))
    bm = BM25Index.build([f"{p.title} {p.text}" for p in ps])
    rankings = [bm.search([i["question"]], 100)[0][0].tolist() for i in tiny_setup["items"]]
    all_acc, ans_acc, _ = _expected_accuracy(tiny_setup, rankings)
    assert s["top_k_accuracy"] == pytest.approx(all_acc)
    assert s["answerable"]["top_k_accuracy"] == pytest.approx(ans_acc)

    code, out, err = _run(tiny_setup, capsys, "--retrieval-only", "--json",
                          "--retriever", "hybrid", "--limit", "5")
    assert code == 0, err
    h = json.loads(out)
    assert h["n"] == 5 and h["config"]["retriever"] == "hybrid"


def test_out_file_and_text_summary(tiny_setup: dict[str, Any], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "preds.jsonl"
    code, out, err = _run(tiny_setup, capsys, "--retrieval-only", "--docs", "3",
                          "--out", str(out_file))
    assert code == 0, err
    assert "top-20 accuracy %" in out and "answerable" in out
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert len(rows) == len(tiny_setup["items"])
    assert [r["question"] for r in rows] == [i["question"] for i in tiny_setup["items"]]
    assert all(len(r["docs"]) == 3 for r in rows)
    assert all(r["docs"][0]["title"] and r["docs"][0]["text"] for r in rows)
    for r in rows:
        assert [d["has_answer"] for d in r["docs"]] == [
            has_answer(d["title"], d["text"], r["answers"]) for d in r["docs"]]


def test_malformed_question_file_is_a_clean_error(tiny_setup: dict[str, Any], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from ragdesk.cli.main import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "a", "answer": ["b"]}\n\n{"question": "c", "answer": 3}\n')
    code = main(["--data-dir", str(tiny_setup["data_dir"]), "eval", str(bad),
                 "--snapshot", "tiny", "--pack", "tiny", "--retrieval-only"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{bad}, line 3" in err and "answer" in err
    assert "Traceback" not in err


def test_end_to_end_em_and_f1_with_tiny_generator(
        tiny_setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "preds.jsonl"
    code, out, err = _run(tiny_setup, capsys, "--json", "--limit", "6", "--docs", "2",
                          "--mode", "token", "--out", str(out_file))
    assert code == 0, err
    s = json.loads(out)
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert len(rows) == 6 and all(isinstance(r["prediction"], str) for r in rows)
    assert all(len(r["docs"]) == 2 and "prob" in r["docs"][0] for r in rows)
    em = [exact_match(r["prediction"], r["answers"]) for r in rows]
    f1 = [token_f1(r["prediction"], r["answers"]) for r in rows]
    assert s["em"] == pytest.approx(np.mean(em))
    assert s["f1"] == pytest.approx(np.mean(f1))
    assert s["timings"]["answer_per_question_ms"] > 0


def test_calibrate_fits_and_stores_the_snapshot_temperature(
        tiny_setup: dict[str, Any], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`index calibrate` fits τ on exact top-K scores and answer passages (recomputed here
    with numpy and the has-answer test), stores it with the snapshot, and eval then uses it."""
    from ragdesk.cli.main import main
    from ragdesk.core.encoders import load_encoder
    from ragdesk.core.evaluation import calibrate
    from ragdesk.core.posterior import fit_temperature

    # The tiny models' random scores fit τ at the bound of the search, which calibrate
    # refuses to store (tests/redteam/test_answer_limits.py); here the fit and the storing
    # are what is tested.
    monkeypatch.setattr(calibrate, "_check_inside_bounds", lambda fit: None)

    base = ["--data-dir", str(tiny_setup["data_dir"]), "index", "calibrate", "tiny",
            str(tiny_setup["questions"]), "--pack", "tiny", "--docs", "10", "--json"]
    assert main([*base, "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out)
    snap = _snapshot(tiny_setup)
    assert snap.temperature != pytest.approx(dry["temperature"])  # nothing stored yet

    enc = load_encoder(tiny_setup["encoder"], role="question")
    q = enc.encode([i["question"] for i in tiny_setup["items"]])
    emb = np.asarray(snap.embeddings(), dtype=np.float32)
    ps = snap.get_passages(list(range(snap.size)))
    scores, positives = [], []
    for v, item in zip(q, tiny_setup["items"], strict=True):
        s = emb @ v
        top = np.lexsort((np.arange(len(emb)), -s))[:10]
        scores.append([float(s[i]) for i in top])
        positives.append([has_answer(ps[i].title, ps[i].text, item["answer"]) for i in top])
    want = fit_temperature(scores, positives)
    assert dry["temperature"] == pytest.approx(want.temperature, rel=1e-3)
    assert dry["questions_used"] == want.questions and not dry["stored"]

    assert main(base) == 0
    assert json.loads(capsys.readouterr().out)["stored"]
    assert _snapshot(tiny_setup).temperature == pytest.approx(want.temperature, rel=1e-3)
    code, out, err = _run(tiny_setup, capsys, "--retrieval-only", "--json")
    assert code == 0, err
    assert json.loads(out)["config"]["temperature"] == pytest.approx(want.temperature, rel=1e-3)
    (snap.folder / "calibration.json").unlink()  # leave the module's snapshot as it was


def test_only_model_features_skips_the_closed_book_pass_and_keeps_the_answers(
        tiny_setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragdesk.core.confidence import CLOSED_BOOK

    rows = {}
    for name, extra in (("every", ()), ("model", ("--only-model-features",))):
        out_file = tmp_path / f"{name}.jsonl"
        code, _, err = _run(tiny_setup, capsys, "--limit", "4", "--docs", "2",
                            "--out", str(out_file), *extra)
        assert code == 0, err
        rows[name] = [json.loads(line) for line in out_file.read_text().splitlines()]
    # the tiny snapshot has no confidence model, so it reads no closed-book feature
    assert all("closed_book_s" in r["timings"] for r in rows["every"])
    assert all(set(CLOSED_BOOK) <= set(r["features"]) for r in rows["every"])
    assert not any("closed_book_s" in r["timings"] for r in rows["model"])
    assert not any(set(CLOSED_BOOK) & set(r["features"]) for r in rows["model"])
    assert ([r["prediction"] for r in rows["model"]]
            == [r["prediction"] for r in rows["every"]])


def _summary_first_line(capsys: pytest.CaptureFixture[str], **config: object) -> str:
    """The first line `eval` prints for a summary of ``config`` (the run's settings)."""
    from ragdesk.cli.eval_cmd import _print_summary

    settings = {"retrieval_only": False, "mode": "token", "decoding": None, "style": "short",
                "grounded": True, "precision": None, "snapshot": "s", "passages": 10,
                "pack": "p", "retriever": "dense", "n_docs": 5, "temperature": 1.0, **config}
    _print_summary({"config": settings, "n": 2, "em": 0.5, "f1": 0.5,
                    "top_k_accuracy": {"5": 0.5},
                    "timings": {"retrieval_per_question_ms": 1.0, "question_encoding_s": 0.1,
                                "search_s": 0.1, "total_s": 1.0}})
    return capsys.readouterr().out.splitlines()[0]


@pytest.mark.parametrize(("mode", "decoding", "named"), [
    ("together", None, "Read together;"), ("token", None, "RAG-Token;"),
    ("sequence", "fast", "RAG-Sequence, fast decoding;")])
def test_the_summary_names_the_reading_mode_as_every_front_end_does(
        mode: str, decoding: str | None, named: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    first = _summary_first_line(capsys, mode=mode, decoding=decoding)
    assert named in first and "RAG-Together" not in first


@pytest.mark.parametrize(("key", "said"), [
    ("sparse", "; BM25 retriever;"), ("hybrid", "; hybrid retriever;")])
def test_the_eval_summary_names_the_retriever_as_ask_does(
        key: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    first = _summary_first_line(capsys, retrieval_only=True, retriever=key)
    assert said in first and "sparse" not in first
