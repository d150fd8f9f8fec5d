"""ragdesk gives the tokens and log-likelihoods of transformers' RAG classes.

The references get exactly what ``RagRetriever`` would give them for the same passages
(``context_input_ids`` / ``context_attention_mask`` from its ``postprocess_docs``, and
``doc_scores``); ragdesk gets the passages and their retrieval scores.

``RagSequenceForGeneration.generate`` searches its candidates with the generator but no
attention mask, so padded inputs are read as text there (a transformers bug ragdesk does not
copy). Its cases therefore use passages trimmed to one token length and hand the reference
the inputs without padding; that the per-passage search itself equals transformers' with
padding and a mask is checked separately.
"""

from __future__ import annotations

from typing import Any

import pytest

from ragdesk.core.engine.generators import PassageText
from ragdesk.core.engine.rag_sequence import rag_sequence_generate
from ragdesk.core.engine.rag_token import rag_token_generate

from .conftest import N_DOCS, strip_special

NEW = 10  # new tokens per answer: enough to diverge, small enough to keep the suite fast
TOL = 1e-4


def _reference_nll(model: Any, ids: Any, mask: Any, scores: Any, labels: Any,
                   **kw: Any) -> float:
    import torch

    with torch.no_grad():
        out = model(context_input_ids=ids, context_attention_mask=mask, doc_scores=scores,
                    labels=labels, n_docs=N_DOCS, **kw)
    return float(-out.loss[0])


def test_generator_output_depends_on_the_passage(bart_gen: Any, make_cases: Any) -> None:
    """Without this, equal tokens would prove little."""
    import torch

    case = make_cases(0)
    ids, mask = case.context_input_ids, case.context_attention_mask
    with torch.no_grad():
        out = bart_gen.model.generate(ids, attention_mask=mask, max_new_tokens=NEW,
                                      num_beams=1)
    distinct = {tuple(row.tolist()) for row in out}
    assert len(distinct) >= 3


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("num_beams", [1, 4])
def test_rag_token_matches_transformers(bart_gen: Any, rag_token_ref: Any, make_cases: Any,
                                        seed: int, num_beams: int) -> None:
    case = make_cases(seed, equal_length=60)
    ids, mask = case.unpadded()
    # RagTokenForGeneration.generate ignores max_new_tokens; max_length counts the start token
    ref = rag_token_ref.generate(context_input_ids=ids, context_attention_mask=mask,
                                 doc_scores=case.doc_scores, n_docs=N_DOCS,
                                 num_beams=num_beams, max_length=NEW + 1)
    ans = rag_token_generate(bart_gen, case.question, case.hits, num_beams=num_beams,
                             max_new_tokens=NEW)
    assert ans.token_ids == strip_special(bart_gen, ref[0])
    assert len(ans.token_ids) > 0
    ref_ll = _reference_nll(rag_token_ref, ids, mask, case.doc_scores, ref)
    assert ans.logprob == pytest.approx(ref_ll, abs=TOL)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("num_beams", [1, 4])
def test_rag_token_matches_transformers_with_padding(
        bart_gen: Any, rag_token_ref: Any, make_cases: Any, seed: int, num_beams: int) -> None:
    """Passages of natural lengths, padded to 300 for the reference as RagRetriever does
    (ragdesk pads only to the longest). Padding changes float rounding in the reference's
    larger matrix products, so the log-likelihood is compared more loosely."""
    case = make_cases(seed)
    assert not bool(case.context_attention_mask.all())
    ref = rag_token_ref.generate(
        context_input_ids=case.context_input_ids,
        context_attention_mask=case.context_attention_mask, doc_scores=case.doc_scores,
        n_docs=N_DOCS, num_beams=num_beams, max_length=NEW + 1)
    ans = rag_token_generate(bart_gen, case.question, case.hits, num_beams=num_beams,
                             max_new_tokens=NEW)
    assert ans.token_ids == strip_special(bart_gen, ref[0])
    ref_ll = _reference_nll(rag_token_ref, case.context_input_ids, case.context_attention_mask,
                            case.doc_scores, ref)
    assert ans.logprob == pytest.approx(ref_ll, abs=1e-3)


def test_rag_token_min_new_tokens_matches(bart_gen: Any, rag_token_ref: Any,
                                          make_cases: Any) -> None:
    case = make_cases(3, equal_length=60)
    ids, mask = case.unpadded()
    ref = rag_token_ref.generate(context_input_ids=ids, context_attention_mask=mask,
                                 doc_scores=case.doc_scores, n_docs=N_DOCS, num_beams=2,
                                 max_length=9, min_new_tokens=8)
    ans = rag_token_generate(bart_gen, case.question, case.hits, num_beams=2, max_new_tokens=8,
                             min_new_tokens=8)
    assert ans.token_ids == strip_special(bart_gen, ref[0])
    assert len(ref[0]) == 9


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("num_beams", [1, 4])
def test_rag_sequence_thorough_matches_transformers(
        bart_gen: Any, rag_sequence_ref: Any, make_cases: Any, seed: int,
        num_beams: int) -> None:
    case = make_cases(seed, equal_length=60)
    ids, mask = case.unpadded()
    ref = rag_sequence_ref.generate(context_input_ids=ids, context_attention_mask=mask,
                                    doc_scores=case.doc_scores, n_docs=N_DOCS,
                                    num_beams=num_beams, max_new_tokens=NEW)
    ans = rag_sequence_generate(bart_gen, case.question, case.hits, decoding="thorough",
                                num_beams=num_beams, max_new_tokens=NEW)
    assert ans.token_ids == strip_special(bart_gen, ref[0])
    ref_ll = _reference_nll(rag_sequence_ref, ids, mask, case.doc_scores, ref[:1],
                            exclude_bos_score=True)
    assert ans.logprob == pytest.approx(ref_ll, abs=TOL)


@pytest.mark.parametrize("num_beams", [1, 4])
def test_per_passage_search_matches_generate_with_padding(
        bart_gen: Any, make_cases: Any, num_beams: int) -> None:
    """RAG-Sequence's first stage is the generator's own search under each passage (with
    the attention mask the reference forgets)."""
    import torch

    from ragdesk.core.engine.rag_sequence import _search
    from ragdesk.core.engine.request import AnswerRequest
    from ragdesk.core.options import AnswerOptions

    case = make_cases(4)
    ids, mask = case.context_input_ids, case.context_attention_mask
    assert not bool(mask.all())  # padded: the mask matters
    with torch.no_grad():
        ref = bart_gen.model.generate(ids, attention_mask=mask, num_beams=num_beams,
                                      num_return_sequences=num_beams, max_new_tokens=NEW)
    ctx = bart_gen.prepare(case.question, [PassageText(h.title, h.text) for h in case.hits])
    req = AnswerRequest.checked(case.question, AnswerOptions(
        mode="sequence", num_beams=num_beams, max_new_tokens=NEW), bart_gen)
    per_passage, cancelled, _ = _search(ctx, bart_gen, req, None)
    assert not cancelled
    pad = bart_gen.settings.pad_token_id
    for z in range(N_DOCS):
        for j, hyp in enumerate(per_passage[z]):
            row = ref[z * num_beams + j].tolist()[1:]
            while row and row[-1] == pad and len(row) > len(hyp.tokens):
                row.pop()
            assert hyp.tokens == row


def test_rag_sequence_log_likelihood_of_any_answer(bart_gen: Any, rag_sequence_ref: Any,
                                                    make_cases: Any) -> None:
    """Rescoring (one decoder pass per passage, encoder outputs reused) equals the
    reference's forward pass for hypotheses of different lengths."""
    import torch

    from ragdesk.core.engine.rag_sequence import Candidate, _rescore, _thorough_scores
    from ragdesk.core.retrieval import doc_log_probs

    case = make_cases(5)
    ctx = bart_gen.prepare(case.question, [PassageText(h.title, h.text) for h in case.hits])
    eos, pad = bart_gen.settings.eos_token_ids[0], bart_gen.settings.pad_token_id
    answers = [[400, 500, 600, eos], [700, eos], [300, 301, 302, 303, 304, 305, eos]]
    cands = [Candidate(a, {}) for a in answers]
    token_lp, stopped = _rescore(ctx, cands, pad, None)
    assert token_lp is not None and not stopped
    ours = _thorough_scores(cands, token_lp, doc_log_probs(case.hits), pad, False)
    start = bart_gen.settings.start_token_id
    width = 1 + max(len(a) for a in answers)
    labels = torch.full((len(answers), width), pad, dtype=torch.long)
    for i, a in enumerate(answers):
        labels[i, :1 + len(a)] = torch.tensor([start, *a])
    for i in range(len(answers)):
        ref = _reference_nll(rag_sequence_ref, case.context_input_ids,
                             case.context_attention_mask, case.doc_scores, labels[i:i + 1])
        assert float(ours[i]) == pytest.approx(ref, abs=TOL)


@pytest.fixture(scope="module")
def bart_gen_plain(bart_gen: Any) -> Any:
    """The same model through transformers' own forward (the path of other seq2seq models)."""
    from ragdesk.core.engine.generators import Seq2SeqGenerator

    gen = Seq2SeqGenerator(bart_gen.model, bart_gen.tokenizer, "tiny-bart-plain",
                           lean_decoder=False)
    assert gen.lean_decoder is None and bart_gen.lean_decoder is not None
    return gen


@pytest.mark.parametrize("num_beams", [1, 3])
def test_transformers_forward_path_matches_the_reference(
        bart_gen_plain: Any, rag_token_ref: Any, rag_sequence_ref: Any, make_cases: Any,
        num_beams: int) -> None:
    case = make_cases(6, equal_length=60)
    ids, mask = case.unpadded()
    ref = rag_token_ref.generate(context_input_ids=ids, context_attention_mask=mask,
                                 doc_scores=case.doc_scores, n_docs=N_DOCS,
                                 num_beams=num_beams, max_length=NEW + 1)
    ans = rag_token_generate(bart_gen_plain, case.question, case.hits, num_beams=num_beams,
                             max_new_tokens=NEW)
    assert ans.token_ids == strip_special(bart_gen_plain, ref[0])
    ref = rag_sequence_ref.generate(context_input_ids=ids, context_attention_mask=mask,
                                    doc_scores=case.doc_scores, n_docs=N_DOCS,
                                    num_beams=num_beams, max_new_tokens=NEW)
    ans = rag_sequence_generate(bart_gen_plain, case.question, case.hits, num_beams=num_beams,
                                max_new_tokens=NEW, decoding="thorough")
    assert ans.token_ids == strip_special(bart_gen_plain, ref[0])
    ref_ll = _reference_nll(rag_sequence_ref, ids, mask, case.doc_scores, ref[:1],
                            exclude_bos_score=True)
    assert ans.logprob == pytest.approx(ref_ll, abs=TOL)


def test_few_rows_kernel_changes_no_tokens(bart_gen: Any, make_cases: Any) -> None:
    """The few-rows product (W @ x.T, the CPU default) against plain F.linear: the same
    tokens; scores differ only by float32 summation order."""
    from ragdesk.core.engine.generators import Seq2SeqGenerator

    unpacked = Seq2SeqGenerator(bart_gen.model, bart_gen.tokenizer, "tiny-bart-unpacked",
                                packed_weights=False)
    assert unpacked.lean_decoder is not None and not unpacked.lean_decoder.packed_weights
    if not bart_gen.lean_decoder.packed_weights:
        pytest.skip("the few-rows kernel is off here")
    case = make_cases(7)
    for beams in (1, 3):
        a = rag_token_generate(bart_gen, case.question, case.hits, num_beams=beams,
                               max_new_tokens=NEW)
        b = rag_token_generate(unpacked, case.question, case.hits, num_beams=beams,
                               max_new_tokens=NEW)
        assert a.token_ids == b.token_ids
        assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
        for ta, tb in zip(a.tokens, b.tokens, strict=True):
            assert ta.posterior == pytest.approx(tb.posterior, abs=1e-5)
