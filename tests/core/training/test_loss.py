"""The two RAG losses against transformers' RagSequenceForGeneration / RagTokenForGeneration
(same tiny BART, same passages, same doc scores) and against a naive loop."""

from __future__ import annotations

import math

import pytest

QUESTION = "what is the secret word of alice?"
PASSAGES = [("alice", "the secret word of alice is apple."),
            ("bob", "the secret word of bob is river."),
            ("carol", "the favourite colour of carol is pink.")]


def _inputs(tiny_models, answer: str):  # type: ignore[no-untyped-def]
    import torch

    from ragdesk.core.engine.generators import PassageText
    from ragdesk.core.models import load_generator
    from ragdesk.core.training.forward import answer_ids, answer_logprobs

    gen = load_generator(tiny_models.bart)
    passages = [PassageText(t, x) for t, x in PASSAGES]
    target = answer_ids(gen, answer)
    torch.manual_seed(0)
    doc_scores = torch.randn(1, len(passages)) * 2
    with torch.no_grad():
        lp = answer_logprobs(gen, QUESTION, passages, target)[None]
    return gen, passages, target, doc_scores, lp


@pytest.mark.parametrize("mode", ["sequence", "token"])
def test_loss_matches_transformers_rag(tiny_models, mode: str) -> None:  # type: ignore[no-untyped-def]
    import torch
    from transformers import RagSequenceForGeneration, RagTokenForGeneration

    from ragdesk.core.training.loss import rag_nll

    gen, passages, target, doc_scores, lp = _inputs(tiny_models, "apple")
    cls = RagSequenceForGeneration if mode == "sequence" else RagTokenForGeneration
    path = tiny_models.rag_sequence if mode == "sequence" else tiny_models.rag_token
    rag = cls.from_pretrained(str(path), use_safetensors=True).eval()
    ctx_ids, ctx_mask = gen.pad_batch([gen.input_ids(QUESTION, p) for p in passages])
    # RAG shifts decoder_input_ids left to make the targets: start token, then the answer.
    dec = torch.tensor([[gen.settings.start_token_id, *target]])
    with torch.no_grad():
        out = rag(context_input_ids=ctx_ids, context_attention_mask=ctx_mask,
                  doc_scores=doc_scores, decoder_input_ids=dec, labels=dec,
                  n_docs=len(passages), reduce_loss=False)
    ours = rag_nll(mode, doc_scores, lp, torch.ones(1, lp.shape[-1]))
    torch.testing.assert_close(ours, out.loss.reshape(-1).float(), rtol=1e-4, atol=1e-4)


def test_losses_match_a_naive_loop(tiny_models) -> None:  # type: ignore[no-untyped-def]
    import torch

    from ragdesk.core.training.loss import rag_sequence_nll, rag_token_nll

    _, _, _, doc_scores, lp = _inputs(tiny_models, "stone")
    k, t = lp.shape[1], lp.shape[2]
    s = doc_scores[0].tolist()
    prior = [math.exp(x) / sum(math.exp(y) for y in s) for x in s]
    p = lp[0].exp().tolist()
    seq = -math.log(sum(prior[z] * math.prod(p[z][i] for i in range(t)) for z in range(k)))
    tok = -sum(math.log(sum(prior[z] * p[z][i] for z in range(k))) for i in range(t))
    mask = torch.ones(1, t)
    assert rag_sequence_nll(doc_scores, lp, mask).item() == pytest.approx(seq, rel=1e-4)
    assert rag_token_nll(doc_scores, lp, mask).item() == pytest.approx(tok, rel=1e-4)


def test_padding_mask_ignores_padded_tokens() -> None:
    import torch

    from ragdesk.core.training.loss import rag_sequence_nll, rag_token_nll

    torch.manual_seed(1)
    scores = torch.randn(2, 3)
    lp = torch.log_softmax(torch.randn(2, 3, 5, 7), -1)[..., 0]  # [B, K, T]
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.float32)
    for fn in (rag_sequence_nll, rag_token_nll):
        batched = fn(scores, lp, mask)
        alone = fn(scores[:1], lp[:1, :, :3], torch.ones(1, 3))
        torch.testing.assert_close(batched[0], alone[0])


def test_sequence_gradient_is_prior_minus_posterior() -> None:
    """d NLL / d s_z = p(z|x) - p(z|x,y): what pushes the retriever toward useful passages."""
    import torch

    from ragdesk.core.training.loss import rag_sequence_nll

    torch.manual_seed(2)
    scores = torch.randn(1, 4, requires_grad=True)
    lp = torch.log_softmax(torch.randn(1, 4, 3, 11), -1)[..., 0]
    rag_sequence_nll(scores, lp, torch.ones(1, 3)).sum().backward()
    prior = torch.softmax(scores.detach(), -1)
    posterior = torch.softmax(scores.detach() + lp.sum(-1), -1)
    assert scores.grad is not None
    torch.testing.assert_close(scores.grad, prior - posterior)
