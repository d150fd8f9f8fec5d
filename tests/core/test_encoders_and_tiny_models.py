from __future__ import annotations

import json
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest
import torch

from ragdesk.core.encoders import (
    DPR_FAMILY,
    ST_FAMILY,
    TextEncoder,
    load_encoder,
    passage_input,
    passage_inputs,
)
from ragdesk.core.errors import MissingModelError


def test_tiny_tokenizers_have_real_vocabularies(tiny_models) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer

    bart_tok = AutoTokenizer.from_pretrained(str(tiny_models.bart))
    assert len(bart_tok) == 2000
    ids = bart_tok("The capital of France is Paris.")["input_ids"]
    assert len(ids) > 4  # a 5-token tokenizer would give just [bos, eos]
    bert_tok = AutoTokenizer.from_pretrained(str(tiny_models.question_encoder))
    assert len(bert_tok) > 30000


def test_tiny_bart_output_depends_on_passage(tiny_models) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer, BartForConditionalGeneration

    tok = AutoTokenizer.from_pretrained(str(tiny_models.bart))
    model = BartForConditionalGeneration.from_pretrained(str(tiny_models.bart)).eval()
    outs = set()
    for title, text in tiny_models.corpus[:6]:
        passage = " ".join(text.split()[:30])
        enc = tok(f"{title} / {passage} // what is this?", return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(**enc, max_new_tokens=8, num_beams=1, do_sample=False)
        outs.add(tuple(out[0].tolist()))
    assert len(outs) >= 3


def test_dpr_encoder_matches_plain_transformers(tiny_models) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer, DPRContextEncoder

    enc = load_encoder(tiny_models.ctx_encoder, role="passage")
    assert enc.info.family == "dpr" and enc.info.pooling == "cls-pooler" and enc.dim == 32
    # a DPR encoder (asserted above) takes (title, text) pairs
    pairs = [cast(tuple[str, str], passage_input(enc, t, x[:200]))
             for t, x in tiny_models.corpus[:7]]
    got = enc.encode(pairs, batch_size=3)
    tok = AutoTokenizer.from_pretrained(str(tiny_models.ctx_encoder))
    ref_model = DPRContextEncoder.from_pretrained(str(tiny_models.ctx_encoder)).eval()
    for i, (title, text) in enumerate(pairs):
        e = tok(title, text, return_tensors="pt", truncation=True, max_length=512)
        with torch.inference_mode():
            ref = ref_model(**e).pooler_output[0].numpy()
        np.testing.assert_allclose(got[i], ref, atol=1e-4)


def test_sentence_transformers_encoder_mean_pools_and_normalizes(tiny_models) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer, BertModel

    enc = load_encoder(tiny_models.st_encoder, role="question")
    assert (enc.info.family, enc.info.pooling, enc.info.normalize) == (
        "sentence-transformers", "mean", True)
    texts = ["who wrote hamlet", "a much longer question about the capital of france"]
    got = enc.encode(texts, batch_size=2)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    tok = AutoTokenizer.from_pretrained(str(tiny_models.st_encoder))
    model = BertModel.from_pretrained(str(tiny_models.st_encoder)).eval()
    for i, t in enumerate(texts):  # naive: one text at a time, no padding
        e = tok(t, return_tensors="pt")
        with torch.inference_mode():
            h = model(**e).last_hidden_state[0].mean(0)
        ref = (h / h.norm()).numpy()
        np.testing.assert_allclose(got[i], ref, atol=1e-5)


def test_not_a_model_folder(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MissingModelError, match=r"no config\.json"):
        load_encoder(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bart"}))
    with pytest.raises(MissingModelError, match="not a DPR"):
        load_encoder(tmp_path)
    with pytest.raises(MissingModelError, match="neither a local folder"):
        load_encoder("no-such-org/no-such-model")


PAIRS = [("Radium", "Radium is a chemical element."), ("", "No title here.")]


@pytest.mark.parametrize(("family", "want"), [
    (DPR_FAMILY, PAIRS),  # DPR: sentence pairs
    (ST_FAMILY, ["Radium. Radium is a chemical element.", "No title here."]),
])
def test_passage_inputs_are_each_passages_input(family: str, want: list[object]) -> None:
    enc = cast(TextEncoder, SimpleNamespace(info=SimpleNamespace(family=family)))
    assert passage_inputs(enc, iter(PAIRS)) == want
    assert [passage_input(enc, t, x) for t, x in PAIRS] == want
