"""The training loop on the synthetic task, with a real snapshot and tiny models."""

from __future__ import annotations

import hashlib
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.core.training.helpers import examples as _examples
from tests.core.training.helpers import make_trainer as _trainer


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.is_file()}


def test_gradients_reach_the_question_encoder_and_never_the_passages(
        tiny_models: Any, index: Any) -> None:
    tr = _trainer(tiny_models, index, lr=1e-3)
    folder = Path(index.folder)
    before = _digest(folder)
    assert "embeddings.npy" in before
    emb_before = np.array(index.embeddings(), copy=True)
    ex = _examples()[0]
    loss = tr.example_loss(ex)
    loss.backward()
    q_grads = [p.grad for p in tr.encoder.model.parameters() if p.grad is not None]
    assert q_grads and any(float(g.abs().sum()) > 0 for g in q_grads)
    g_grads = [p.grad for p in tr.generator.model.parameters() if p.grad is not None]
    assert g_grads and any(float(g.abs().sum()) > 0 for g in g_grads)
    hits = index.search(np.zeros((1, index.manifest.dim), dtype=np.float32), 4)[0]
    assert not tr.passage_vectors([h.id for h in hits]).requires_grad
    tr.train_step(_examples()[:2])
    np.testing.assert_array_equal(np.asarray(index.embeddings()), emb_before)
    assert _digest(folder) == before  # embeddings, index and passages are untouched


def test_loss_falls_on_the_synthetic_task(tiny_models, index) -> None:  # type: ignore[no-untyped-def]
    tr = _trainer(tiny_models, index, lr=3e-3, question_encoder_lr=1e-4, epochs=6,
                  evaluate_before=False)
    st = tr.run(_examples(), None)
    per_epoch = [np.mean(st.losses[i:i + 2]) for i in range(0, len(st.losses), 2)]
    assert st.step == 12 and len(per_epoch) == 6
    assert per_epoch[-1] < 0.7 * per_epoch[0], per_epoch


class CopyReader:
    """A generator model that already reads: the answer's tokens are likely exactly when they
    occur in the passage (logits = scale * [token in input]). Pretrained readers such as BART
    have this skill; a tiny random BART cannot learn it within a unit test, and without it the
    generator has no reason to prefer one passage, so nothing would teach the retriever."""

    @staticmethod
    def build(base_gen):  # type: ignore[no-untyped-def]
        import torch

        from ragdesk.core.engine.generators import Seq2SeqGenerator

        class Model(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.config = base_gen.model.config
                self.generation_config = base_gen.model.generation_config
                self.vocab = int(self.config.vocab_size)
                self.scale = torch.nn.Parameter(torch.tensor(5.0))
                self.out = torch.nn.Linear(1, self.vocab)

            def get_output_embeddings(self):  # type: ignore[no-untyped-def]
                return self.out

            def forward(self, input_ids, attention_mask, decoder_input_ids, **kw):  # type: ignore[no-untyped-def]
                present = torch.zeros(input_ids.shape[0], self.vocab)
                present.scatter_(1, input_ids * attention_mask, 1.0)
                logits = self.scale * present[:, None, :].expand(
                    -1, decoder_input_ids.shape[1], -1)
                return types.SimpleNamespace(logits=logits)

        return Seq2SeqGenerator(Model(), base_gen.tokenizer, "copy-reader")


@pytest.mark.parametrize("mode", ["sequence", "token"])
def test_retrieval_accuracy_goes_up(tiny_models, index, mode: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.models import load_generator

    reader = CopyReader.build(load_generator(tiny_models.bart))
    # The learning rate suits τ = 1; the tiny normalized encoder's default τ (0.05) scales the
    # retrieval gradient by 20 (test_training_uses_the_snapshot_temperature covers τ).
    monkeypatch.setattr(index, "temperature", 1.0)
    tr = _trainer(tiny_models, index, generator=reader, mode=mode, lr=1e-4, epochs=4)
    exs = _examples()
    loss_before = _mean_loss(tr, exs)
    st = tr.run(exs, exs, generate_eval=False)
    first, last = st.evaluations[0], st.evaluations[-1]
    assert first["label"] == "before training" and last["label"] == "epoch 4"
    assert [e["epoch"] for e in st.evaluations] == [0, 1, 2, 3, 4]  # as the labels count
    # measured on the training questions themselves (no held-out set): said in every entry
    assert {e["questions"] for e in st.evaluations} == {"training"}
    assert last["top_k"]["1"] > first["top_k"]["1"], [e["top_k"] for e in st.evaluations]
    assert last["top_k"]["1"] == 1.0
    # with the reader fixed, a lower loss is a larger p(z|x) for the gold passage (small:
    # normalized 24-d vectors give cosine scores within a narrow range)
    assert _mean_loss(tr, exs) < loss_before


def test_training_uses_the_snapshot_temperature(tiny_models, index, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The loss is built on the p(z|x) the engine answers with: softmax(score / τ)."""
    from ragdesk.core.models import load_generator

    reader = CopyReader.build(load_generator(tiny_models.bart))
    exs = _examples()[:3]
    losses = {}
    for tau in (1.0, 0.05):
        monkeypatch.setattr(index, "temperature", tau)
        tr = _trainer(tiny_models, index, generator=reader, mode="token", lr=1e-4, epochs=1)
        losses[tau] = _mean_loss(tr, exs)
    assert losses[1.0] != pytest.approx(losses[0.05], rel=1e-4)


def _mean_loss(tr, exs) -> float:  # type: ignore[no-untyped-def]
    import torch

    tr.encoder.model.eval()
    with torch.no_grad():
        return float(np.mean([float(tr.example_loss(e)) for e in exs]))


def _flatten_embeddings(encoder) -> None:  # type: ignore[no-untyped-def]
    """Make the question encoder's output constant: every token embeds to zero, so every
    position carries the same LayerNorm bias through the network."""
    import torch

    emb = encoder.model.embeddings
    with torch.no_grad():
        for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
            getattr(emb, name).weight.zero_()


@pytest.mark.parametrize("action", ["warn", "stop", "freeze-retriever"])
def test_collapse_guard_fires_on_a_constant_question_encoder(
        tiny_models: Any, index: Any, action: str) -> None:
    import torch

    tr = _trainer(tiny_models, index, on_collapse=action, lr=1e-3)
    exs = _examples()
    lines: list[str] = []
    assert not tr.record_evaluation(tr.evaluate(exs, generate=False), "before", lines.append)
    _flatten_embeddings(tr.encoder)
    q = tr.encoder.encode([e.question for e in exs])
    assert np.allclose(q, q[0], atol=1e-5)  # the construction really is constant
    stop = tr.record_evaluation(tr.evaluate(exs, generate=False), "epoch 1", lines.append)
    assert tr.state.evaluations[-1]["retrieval"]["distinct_top1"] == 1
    assert any(line.startswith("warning: retrieval collapse") for line in lines), lines
    assert stop is (action == "stop")
    assert (tr.state.stopped is not None) is (action == "stop")
    frozen = action == "freeze-retriever"
    assert tr.state.retriever_frozen is frozen
    q_before = [p.detach().clone() for p in tr.encoder.model.parameters()]
    g_before = [p.detach().clone() for p in tr.generator.model.parameters()]
    tr.train_step(exs[:2])
    q_same = all(torch.equal(a, b) for a, b in
                 zip(q_before, tr.encoder.model.parameters(), strict=True))
    assert q_same is frozen
    assert not all(torch.equal(a, b) for a, b in
                   zip(g_before, tr.generator.model.parameters(), strict=True))


def test_guard_stops_a_run_that_collapses(tiny_models: Any, index: Any) -> None:
    tr = _trainer(tiny_models, index, on_collapse="stop", epochs=3, lr=1e-3)
    step = tr.train_step

    def collapsing_step(batch: list[Any]) -> float:
        loss: float = step(batch)
        _flatten_embeddings(tr.encoder)
        return loss

    tr.train_step = collapsing_step
    st = tr.run(_examples(), _examples(), generate_eval=False)
    assert st.stopped is not None and "distinct top-1" in st.stopped
    assert st.epoch == 1 and st.step == 2  # stopped after the first epoch's evaluation


def test_evaluation_matches_exact_search_and_has_answer(tiny_models, index) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.evaluation import has_answer

    tr = _trainer(tiny_models, index, eval_ks=(1, 2, 4), eval_em_limit=3)
    exs = _examples()
    res = tr.evaluate(exs)
    q = tr.encoder.encode([e.question for e in exs])
    emb = np.asarray(index.embeddings(), dtype=np.float32)
    order = np.argsort(-(q @ emb.T), axis=1, kind="stable")
    passages = {p.id: p for p in index.get_passages(list(range(index.size)))}
    for k in (1, 2, 4):
        hits = [any(has_answer(passages[int(i)].title, passages[int(i)].text, e.answers)
                    for i in order[n, :k])
                for n, e in enumerate(exs)]
        assert res.top_k[str(k)] == pytest.approx(np.mean(hits))
    assert res.em_questions == 3 and res.em is not None and 0.0 <= res.em <= 1.0
    assert res.retrieval.distinct_top1 == len(set(order[:, 0].tolist()))


@pytest.mark.parametrize("which", ["bart", "causal_lm"])
def test_generator_layers_trains_only_the_last_decoder_blocks(
        tiny_models: Any, index: Any, which: str) -> None:
    import torch

    from ragdesk.core.models import load_generator
    from ragdesk.core.training.trainer import decoder_blocks

    gen = load_generator(getattr(tiny_models, which))
    blocks = decoder_blocks(gen.model)
    names = {id(p): n for n, p in gen.model.named_parameters()}
    last = {names[id(p)] for p in blocks[-1].parameters()}
    assert last and all(("decoder" in n) or which == "causal_lm" for n in last)
    tr = _trainer(tiny_models, index, generator=gen, generator_layers=1, lr=1e-3)
    before = {n: p.detach().clone() for n, p in gen.model.named_parameters()}
    losses = [tr.train_step(_examples()[:4]) for _ in range(2)]
    assert all(np.isfinite(losses))
    changed = {n for n, p in gen.model.named_parameters() if not torch.equal(before[n], p)}
    assert changed and changed <= last, sorted(changed - last)[:5]


def test_cancel_checkpoints_between_steps_and_stops(tiny_models, index) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.errors import Cancelled
    from ragdesk.core.progress import CancelToken

    tr = _trainer(tiny_models, index, epochs=2, evaluate_before=False)
    token = CancelToken()
    saved: list[tuple[int, int]] = []
    updates = []

    def progress(u):  # type: ignore[no-untyped-def]
        updates.append(u)
        token.cancel()  # the user presses Cancel while the first step is reported

    with pytest.raises(Cancelled):
        tr.run(_examples(), None, save=lambda t: saved.append((t.state.step, t.state.position)),
               progress=progress, cancel=token)
    assert saved == [(1, 4)] and tr.state.step == 1
    assert updates[0].total == 16 and "loss" in updates[0].message
