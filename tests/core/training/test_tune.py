"""The tuning job the app and ``ragdesk tune`` share: the passages objective with its
recipe, the generator never loaded, the questions counted at the depth training selects
them at, progress by step, Cancel then resume to the same end, clear errors for bad files,
and the tuned pack registered."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.core.training import synthetic


@pytest.fixture(scope="module")
def tune_template(tiny_models, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    """The synthetic snapshot (active) and a base pack 'tiny' over it."""
    root = tmp_path_factory.mktemp("tune") / "data"
    synthetic.build_snapshot(root, tiny_models.st_encoder)
    synthetic.register_tiny_pack(root, "tiny", tiny_models.st_encoder, tiny_models.st_encoder,
                                 tiny_models.bart)
    return root


@pytest.fixture()
def ctx(tune_template: Path, tmp_path: Path) -> Iterator[Any]:
    from ragdesk.core.app import AppContext

    shutil.copytree(tune_template, tmp_path / "data")
    c = AppContext(tmp_path / "data")
    yield c
    c.close()


def _questions(tmp_path: Path, copies: int = 2) -> Path:
    return synthetic.write_jsonl(tmp_path / "questions.jsonl", synthetic.questions() * copies)


def _job(path: Path, **choices: Any) -> Any:
    from ragdesk.core.training.tune import TuneChoices, TuneJob

    base: dict[str, Any] = {"n_docs": 8, "batch_size": 2, "held_out": 0.25, "epochs": 1}
    base.update(choices)
    return TuneJob(path, "tiny", choices=TuneChoices(**base))


def test_a_job_reports_steps_and_registers_the_tuned_pack(ctx, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.models import get_pack
    from ragdesk.core.training.tune import check_questions, run_tune

    path = _questions(tmp_path)
    check = check_questions(ctx.data, ctx.catalog, path, pack="tiny",
                            choices=_job(path).choices)
    # the passages objective looks deeper than the snapshot's 16 passages: every answer
    # there is held by one of them
    assert (check.questions, check.depth, check.snapshot) == (16, 16, "synth")
    assert check.answerable == 16
    updates: list[Any] = []
    res = run_tune(ctx.data, ctx.catalog, _job(path), progress=updates.append)

    stages = [u.stage for u in updates]
    assert stages[0] == "Loading the models"
    assert "Measuring the held-out questions (before training)" in stages
    assert "Measuring the held-out questions (epoch 1)" in stages
    steps = [u for u in updates if u.stage == "Training the question encoder"]
    total = -(-res.trained_on // 2)
    assert res.steps == total and 0 < res.trained_on <= 12
    # one update per optimizer step, counted in steps, with the loss of the steps so far
    assert [u.done for u in steps] == list(range(0, total + 1))
    assert all(u.total == total and u.total_steps == total for u in steps)
    assert all(u.loss is not None for u in steps[1:]) and steps[0].loss is None
    assert all(u.top_k_before is not None and u.k == 8 for u in steps)
    assert updates[-1].top_k == res.top_k_after  # the last measurement reaches the caller
    assert next(u.top_k for u in updates if u.top_k is not None) == res.top_k_before

    spec = get_pack(ctx.catalog, res.pack, ctx.data)
    assert res.pack == "tiny-tuned" and spec.kind == "custom"
    assert Path(spec.question_encoder).is_relative_to(res.folder)
    assert spec.generator == get_pack(ctx.catalog, "tiny", ctx.data).generator  # frozen
    assert res.pack in {r.name for r in ctx.catalog.list_model_packs()}
    evals = json.loads((Path(spec.question_encoder).parent / "training.json").read_text())
    first, last = evals["state"]["evaluations"][0], evals["state"]["evaluations"][-1]
    assert res.top_k_before == first["top_k"]["8"] and res.top_k_after == last["top_k"]["8"]
    assert first["n_questions"] == 4  # measured on the held-out share only


def test_a_job_trains_the_passages_objective_and_never_loads_the_generator(
        ctx: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.core.models import get_pack
    from ragdesk.core.training import run
    from ragdesk.core.training.tune import TuneChoices, run_tune

    # the measured recipe (docs/finetuning.md, "The retriever's own objective")
    recipe = TuneChoices()
    assert (recipe.epochs, recipe.lr, recipe.batch_size) == (6, 2e-5, 16)
    config = recipe.config()
    assert config.objective == "passages" and config.generator_frozen
    assert config.eval_em_limit == 0 and config.n_docs == 5

    def no_reader(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the tune job loaded the generator")

    monkeypatch.setattr(run, "load_generator", no_reader)
    path = _questions(tmp_path)
    res = run_tune(ctx.data, ctx.catalog, _job(path))
    assert res.steps == -(-res.trained_on // 2) and res.top_k_after is not None
    spec, base = get_pack(ctx.catalog, res.pack, ctx.data), get_pack(ctx.catalog, "tiny", ctx.data)
    assert (spec.generator, spec.generator_kind) == (base.generator, base.generator_kind)
    saved = json.loads((Path(spec.question_encoder).parent / "training.json").read_text())
    assert saved["config"]["objective"] == "passages"
    assert json.loads((res.folder / "job.json").read_text())["objective"] == "passages"


def test_the_check_counts_the_questions_with_a_gold_answer_at_the_passages_depth(
        ctx: Any, tiny_models: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from ragdesk.core.matching import AnswerMatcher, passage_string
    from ragdesk.core.models import load_question_encoder
    from ragdesk.core.snapshots import open_snapshot
    from ragdesk.core.training import config
    from ragdesk.core.training.tune import check_questions

    depth = 3  # below the snapshot's 16 passages, so that the depth decides the count
    monkeypatch.setattr(config, "PASSAGES_DEPTH", depth)
    path = _questions(tmp_path)
    check = check_questions(ctx.data, ctx.catalog, path, pack="tiny",
                            choices=_job(path).choices)  # K = 8: the depth is not K
    assert check.depth == depth

    # the same count by hand: exact inner products over every passage, then the top 3
    encoder = load_question_encoder(tiny_models.st_encoder)
    index = open_snapshot(ctx.data, ctx.catalog, "synth")
    try:
        emb = np.asarray(index.embeddings(), dtype=np.float64)
        rows = synthetic.questions() * 2
        q = encoder.encode([r["question"] for r in rows], role="question")
        count = 0
        for row, vec in zip(rows, q, strict=True):
            top = np.argsort(-(emb @ vec.astype(np.float64)), kind="stable")[:depth]
            found = index.get_passages([int(i) for i in top])
            matcher = AnswerMatcher(row["answer"])
            count += any(matcher.matches(passage_string(p.title, p.text)) for p in found)
    finally:
        index.close()
    assert check.answerable == count


def test_an_old_or_unreadable_job_file_does_not_break_a_job(ctx, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.training.tune import JOB_FILE, _saved_name, job_folder, run_tune

    path = _questions(tmp_path)
    job = _job(path)
    folder = job_folder(ctx.data, ctx.catalog, job)
    folder.mkdir(parents=True)
    # the file a job of the RAG objective wrote: no objective in it; its name is kept
    (folder / JOB_FILE).write_text(json.dumps({"name": "tiny-mine", "base_pack": "tiny"}))
    assert run_tune(ctx.data, ctx.catalog, job).pack == "tiny-mine"
    for text in ("", "{", "[1]", '{"name": 3}', '{"base_pack": "tiny"}', "[" * 100_000):
        (folder / JOB_FILE).write_text(text)
        assert _saved_name(folder / JOB_FILE) is None  # the job takes a new name instead
    assert _saved_name(folder / "missing.json") is None


def test_cancel_leaves_a_checkpoint_and_resume_ends_where_a_whole_run_does(
        ctx: Any, tiny_models: Any, tmp_path: Path) -> None:
    from ragdesk.core.app import AppContext
    from ragdesk.core.errors import Cancelled
    from ragdesk.core.progress import CancelToken
    from ragdesk.core.training.tune import resumable_step, run_tune

    path = _questions(tmp_path)
    job = _job(path, epochs=2)
    assert resumable_step(ctx.data, ctx.catalog, job) is None
    token = CancelToken()

    def press_cancel(u: Any) -> None:
        if u.step == 1:
            token.cancel()

    with pytest.raises(Cancelled):
        run_tune(ctx.data, ctx.catalog, job, progress=press_cancel, cancel=token)
    assert resumable_step(ctx.data, ctx.catalog, job) == 1
    assert "tiny-tuned" not in {r.name for r in ctx.catalog.list_model_packs()}

    resumed: list[Any] = []
    res = run_tune(ctx.data, ctx.catalog, job, progress=resumed.append)
    trained = [u.done for u in resumed if u.stage == "Training the question encoder"]
    assert trained[0] == 1  # from the checkpoint, not from the start
    # every step once, the second epoch's too (after the evaluation between them)
    assert trained == list(range(1, res.steps + 1))
    # the before-training measurement is the checkpoint's, not taken again
    assert "Measuring the held-out questions (before training)" not in {u.stage for u in resumed}

    # the same job, never interrupted, in a copy of the data folder as it was
    whole_root = tmp_path / "whole"
    synthetic.build_snapshot(whole_root, tiny_models.st_encoder)
    synthetic.register_tiny_pack(whole_root, "tiny", tiny_models.st_encoder,
                                 tiny_models.st_encoder, tiny_models.bart)
    other = AppContext(whole_root)
    try:
        whole = run_tune(other.data, other.catalog, job)
    finally:
        other.close()
    assert res.steps == whole.steps == 2 * -(-res.trained_on // 2)
    assert resumable_step(ctx.data, ctx.catalog, job) is None  # finished: nothing to resume
    assert res.top_k_after == whole.top_k_after


def test_a_second_job_gets_its_own_pack_name(ctx, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.training.tune import run_tune

    path = _questions(tmp_path)
    first = run_tune(ctx.data, ctx.catalog, _job(path))
    again = run_tune(ctx.data, ctx.catalog, _job(path))  # the same job: its own pack again
    other = run_tune(ctx.data, ctx.catalog, _job(path, held_out=0.5))
    assert first.pack == again.pack == "tiny-tuned" and other.pack == "tiny-tuned-2"
    assert first.folder == again.folder != other.folder


@pytest.mark.parametrize(("content", "expected"), [
    (None, "no such file"),
    ("\n\n", "holds no questions"),
    ('{"question": "who?"}\n', 'line 1: the "answer" field is missing'),
    ("[" * 200 + "]" * 200 + "\n", "nested more than 64 levels deep"),
    ('{"question": "what is the secret word of zed?", "answer": ["zzqxv"]}\n'
     '{"question": "what is the secret word of yan?", "answer": ["qqvvx"]}\n',
     "None of the 1 training questions has a gold answer"),
])
def test_bad_files_say_what_to_fix(ctx: Any, tmp_path: Path, content: str | None,
                                   expected: str) -> None:
    from ragdesk.core.errors import BadInputError
    from ragdesk.core.training.tune import check_questions, run_tune

    path = tmp_path / "bad.jsonl"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(BadInputError) as err:
        run_tune(ctx.data, ctx.catalog, _job(path))
    assert expected in err.value.message
    assert err.value.gui_hint and "--" not in err.value.gui_hint  # the app's words
    if content is not None and "zzqxv" in content:
        assert check_questions(ctx.data, ctx.catalog, path, pack="tiny").answerable == 0
    else:
        with pytest.raises(BadInputError, match=expected.split(":")[-1].strip()):
            check_questions(ctx.data, ctx.catalog, path, pack="tiny")


def test_a_run_that_shows_no_gain_says_so() -> None:
    """0.0% -> 0.0% on 8 held-out questions had read as a success."""
    from ragdesk.core.training.tune import TuneResult

    def result(before: float | None, after: float | None) -> TuneResult:
        return TuneResult(pack="starter-tuned", base_pack="starter", snapshot="wiki", k=5,
                          top_k_before=before, top_k_after=after, steps=4, trained_on=32,
                          held_out=8, folder=Path("."))

    assert result(0.25, 0.5).gained and result(0.25, 0.5).no_gain_note() is None
    nothing = result(0.0, 0.0).no_gain_note()
    assert nothing is not None and "Of the 8 held-out questions, none" in nothing
    assert "measured nothing" in nothing
    worse = result(0.5, 0.375).no_gain_note()
    assert worse is not None and "no more answers" in worse and "keep using starter" in worse
    assert not result(None, 0.5).gained  # nothing to compare with
    one = TuneResult(pack="p", base_pack="starter", snapshot="wiki", k=5, top_k_before=0.0,
                     top_k_after=0.0, steps=1, trained_on=3, held_out=1, folder=Path("."))
    assert "Of the 1 held-out question, none" in (one.no_gain_note() or "")
