"""Which questions a run trains on, the guard's figures in the log, and the best models kept
by held-out retrieval."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.core.training.helpers import examples as _examples
from tests.core.training.helpers import make_trainer as _trainer


def _with_unanswerable() -> list[Any]:
    from ragdesk.core.training.data import Example

    return [*_examples(), Example("what is the secret word of zed?", ("zzqxv",)),
            Example("what colour is the sky of mars?", ("the",))]  # "the" matches nothing


@pytest.mark.parametrize("depth", [1, 2, 16])
def test_questions_without_a_gold_answer_in_reach_are_skipped(
        tiny_models: Any, index: Any, depth: int) -> None:
    from ragdesk.core.matching import has_answer

    tr = _trainer(tiny_models, index, n_docs=2, answer_depth=depth)
    exs = _with_unanswerable()
    lines: list[str] = []
    got = tr.select_questions(exs, lines.append)
    # independent reference: exact inner-product search over the stored vectors
    q = tr.encoder.encode([e.question for e in exs])
    emb = np.asarray(index.embeddings(), dtype=np.float32)
    order = np.argsort(-(q @ emb.T), axis=1, kind="stable")[:, :depth]
    passages = {p.id: p for p in index.get_passages(list(range(index.size)))}
    want = [n for n, e in enumerate(exs)
            if any(has_answer(passages[int(i)].title, passages[int(i)].text, e.answers)
                   for i in order[n])]
    assert got == want
    assert 8 not in got and 9 not in got
    if depth == 16:  # every passage: exactly the answerable ones
        assert got == list(range(8))
    assert lines == [f"training on {len(want)} of 10 questions: the other {10 - len(want)} "
                     f"have no gold answer in the top {depth} passages the question encoder "
                     "retrieves before training (the has-answer test of `ragdesk eval`), so "
                     "no passage it reads can teach it; --all-questions keeps them"]
    keep_all = _trainer(tiny_models, index, n_docs=2, skip_unanswerable=False)
    assert keep_all.select_questions(exs) == list(range(10))


def test_the_chosen_questions_are_what_a_run_trains_on_and_keeps(tiny_models, index) -> None:  # type: ignore[no-untyped-def]
    tr = _trainer(tiny_models, index, n_docs=2, answer_depth=16, batch_size=3,
                  evaluate_before=False)
    st = tr.run(_with_unanswerable(), None)
    assert st.selected == list(range(8))
    assert st.examples_seen == 8 and st.step == 3  # 8 questions in batches of 3
    none = _trainer(tiny_models, index, n_docs=2)
    from ragdesk.core.errors import BadInputError

    with pytest.raises(BadInputError, match="nothing to learn from") as err:
        none.run(_with_unanswerable()[8:], None)
    assert "--all-questions" in str(err.value.hint)


def test_every_evaluation_logs_the_guard_figures_with_tau(tiny_models, index) -> None:  # type: ignore[no-untyped-def]
    tr = _trainer(tiny_models, index, epochs=1, eval_every=1, lr=1e-3)
    lines: list[str] = []
    tr.run(_examples(), _examples()[:4], generate_eval=False, report=lines.append)
    guard = [x for x in lines if x.startswith("guard (")]
    labels = [e["label"] for e in tr.state.evaluations]
    assert labels == ["before training", "step 1", "epoch 1"]
    assert [g.split(")")[0] for g in guard] == [f"guard ({x}" for x in labels]
    tau = index.temperature
    for g, e in zip(guard, tr.state.evaluations, strict=True):
        r = e["retrieval"]
        assert f"p(z|x) at tau {tau:g} over the top 4" in g
        assert f"mean entropy {r['mean_entropy']:.4f} nats" in g
        assert f"distinct top-1 {r['distinct_top1']} of 4" in g
    first = tr.state.evaluations[0]["retrieval"]
    assert guard[-1].endswith(f"at before training: entropy {first['mean_entropy']:.4f}, "
                              f"distinct top-1 {first['distinct_top1']}")


def _result(top_k: float) -> Any:
    from ragdesk.core.training.evaluate import EvalResult
    from ragdesk.core.training.guard import RetrievalStats

    return EvalResult(4, {"1": 0.0, "4": top_k}, None, 0, RetrievalStats(4, 4, 1.0, 3, 0.05))


def test_best_models_follow_held_out_top_k(tiny_models, index) -> None:  # type: ignore[no-untyped-def]
    tr = _trainer(tiny_models, index)
    saved: list[int] = []

    def save(t: Any) -> None:
        saved.append(t.state.step)

    for step, acc in [(0, 0.5), (1, 0.5), (2, 0.75), (3, 0.25), (4, 1.0), (5, 1.0)]:
        tr.state.step = step
        tr._track_best(_result(acc), f"step {step}", save, None)
    # the untuned models (step 0) write nothing; ties keep the earlier models
    assert saved == [2, 4]
    assert tr.state.best == {"label": "step 4", "step": 4, "k": 4, "top_k": 1.0}


def test_a_collapsed_run_registers_the_best_models(tmp_path: Path) -> None:
    from ragdesk.core.training.config import TrainState
    from ragdesk.core.training.run import BEST_DIR, _models_to_register

    final = tmp_path / "final"
    (tmp_path / BEST_DIR).mkdir()
    ok = [{"label": "before training", "collapse": []}, {"label": "epoch 1", "collapse": []}]
    bad = [ok[0], {"label": "epoch 1", "collapse": ["1 distinct top-1 passages"]}]
    best = {"label": "step 2", "step": 2, "k": 4, "top_k": 0.75}
    assert _models_to_register(tmp_path, final, TrainState(evaluations=ok, best=best),
                               None) == final
    lines: list[str] = []
    assert _models_to_register(tmp_path, final, TrainState(evaluations=bad, best=best),
                               lines.append) == tmp_path / BEST_DIR
    assert "step 2" in lines[0] and "75.0%" in lines[0]
    untuned = {"label": "before training", "step": 0, "k": 4, "top_k": 0.75}
    lines.clear()
    assert _models_to_register(tmp_path, final, TrainState(evaluations=bad, best=untuned),
                               lines.append) == final
    assert lines[0].startswith("warning: the guard saw a collapse")


def test_a_run_keeps_the_best_models_on_disk(tiny_models, index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``save_best`` is called exactly when a held-out evaluation beats all earlier ones."""
    tr = _trainer(tiny_models, index, epochs=2, eval_every=1, lr=1e-3)
    written: list[tuple[int, float]] = []
    st = tr.run(_examples(), _examples()[:4], generate_eval=False, held_out=True,
                save_best=lambda t: written.append((t.state.step,
                                                    float(t.state.best["top_k"]))))
    accs = [(e["step"], e["top_k"]["4"]) for e in st.evaluations]
    expected, best = [], accs[0][1]
    for step, acc in accs[1:]:
        if acc > best:
            expected.append((step, acc))
            best = acc
    assert written == expected
    assert st.best is not None and float(st.best["top_k"]) == max(a for _, a in accs)


@pytest.mark.parametrize(("after", "no_gain"), [(0.6, False), (0.5, True), (0.4, True)])
def test_the_description_of_a_pack_says_when_tuning_gained_nothing(
        after: float, no_gain: bool) -> None:
    """A tuned pack is registered whatever the held-out measure says; its description, which
    the models list and dialog show, says so where the measure did not rise."""
    from types import SimpleNamespace

    from ragdesk.core.models import PackSpec
    from ragdesk.core.training.config import TrainState
    from ragdesk.core.training.run import _description

    state = TrainState(epoch=1, selected=list(range(8)), evaluations=[
        {"label": "before", "top_k": {"5": 0.5}}, {"label": "epoch 1", "top_k": {"5": after}}])
    trainer = SimpleNamespace(state=state, config=SimpleNamespace(
        generator_frozen=True, n_docs=5))
    spec = PackSpec(name="starter", kind="starter", question_encoder="q", passage_encoder=None,
                    generator="g", generator_kind="causal")
    text = _description(spec, "train.jsonl", trainer, "vital", Path("final"),  # type: ignore[arg-type]
                        held_out=True)
    assert f"held-out top-5 50.0% -> {after * 100:.1f}%" in text
    assert ("no gain over starter" in text) is no_gain
