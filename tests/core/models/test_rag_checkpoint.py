"""The question encoder and generator taken out of a saved RAG checkpoint must be the very
models inside ``RagSequenceForGeneration`` / ``RagTokenForGeneration`` (the independent
reference: transformers loads the whole checkpoint its own way)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from ragdesk.core.errors import MissingModelError
from ragdesk.core.models import load_generator_parts, load_question_encoder

QUESTIONS = ["who wrote hamlet", "what is the capital of france",
             "when did the second world war end in europe and asia"]


def _reference(folder: Path, token: bool = False):  # type: ignore[no-untyped-def]
    from transformers import RagSequenceForGeneration, RagTokenForGeneration

    cls = RagTokenForGeneration if token else RagSequenceForGeneration
    return cls.from_pretrained(str(folder), use_safetensors=True).eval()


@pytest.mark.parametrize("which", ["rag_sequence", "rag_token"])
def test_question_encoder_matches_rag_model(tiny_models, which: str) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer

    folder = getattr(tiny_models, which)
    enc = load_question_encoder(folder)
    assert (enc.info.family, enc.info.pooling, enc.info.normalize, enc.dim) == (
        "dpr", "cls-pooler", False, 32)
    got = enc.encode(QUESTIONS, batch_size=2)
    ref = _reference(folder, token=which == "rag_token")
    tok = AutoTokenizer.from_pretrained(str(folder / "question_encoder_tokenizer"))
    for i, q in enumerate(QUESTIONS):  # one at a time: no padding in the reference
        ids = tok(q, return_tensors="pt")["input_ids"]
        with torch.inference_mode():
            expected = ref.rag.question_encoder(ids)[0][0].numpy()
        np.testing.assert_allclose(got[i], expected, atol=1e-5)


def test_generator_matches_rag_model(tiny_models) -> None:  # type: ignore[no-untyped-def]
    parts = load_generator_parts(tiny_models.rag_sequence)
    assert parts.kind == "seq2seq"
    assert type(parts.model).__name__ == "BartForConditionalGeneration"
    ref = _reference(tiny_models.rag_sequence)
    title, text = tiny_models.corpus[0]
    enc = parts.tokenizer(f"{title} / {' '.join(text.split()[:40])} // who is this",
                          return_tensors="pt")
    dec = torch.tensor([[2, 0, 100, 200, 300]])
    with torch.inference_mode():
        got = parts.model(input_ids=enc["input_ids"], decoder_input_ids=dec).logits
        expected = ref.rag.generator(input_ids=enc["input_ids"], decoder_input_ids=dec).logits
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
        a = parts.model.generate(**enc, max_new_tokens=8, num_beams=1, do_sample=False)
        b = ref.rag.generator.generate(**enc, max_new_tokens=8, num_beams=1, do_sample=False)
    assert a.tolist() == b.tolist()
    # The tied embeddings are one tensor again, as in the reference.
    assert parts.model.lm_head.weight.data_ptr() == parts.model.model.shared.weight.data_ptr()


def test_generator_tokenizer_is_the_generator_one(tiny_models) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer

    parts = load_generator_parts(tiny_models.rag_token)
    bart_tok = AutoTokenizer.from_pretrained(str(tiny_models.bart))
    text = "The Eiffel Tower is in Paris."
    assert parts.tokenizer(text)["input_ids"] == bart_tok(text)["input_ids"]
    assert len(parts.tokenizer) == len(bart_tok) == 2000


def test_sharded_checkpoint_loads_the_same(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from transformers import RagSequenceForGeneration

    model = RagSequenceForGeneration.from_pretrained(str(tiny_models.rag_sequence))
    out = tmp_path / "sharded"
    model.save_pretrained(out, max_shard_size="1MB")
    for sub in ("question_encoder_tokenizer", "generator_tokenizer"):
        shutil.copytree(tiny_models.rag_sequence / sub, out / sub)
    assert (out / "model.safetensors.index.json").exists()
    a = load_question_encoder(out).encode(QUESTIONS)
    b = load_question_encoder(tiny_models.rag_sequence).encode(QUESTIONS)
    np.testing.assert_array_equal(a, b)
    g1 = load_generator_parts(out).model
    g2 = load_generator_parts(tiny_models.rag_sequence).model
    for (n1, p1), (n2, p2) in zip(g1.state_dict().items(), g2.state_dict().items(), strict=True):
        assert n1 == n2 and torch.equal(p1, p2)


def _copy_without_weights(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.safetensors"))
    return dst


def test_pickle_only_checkpoint_is_refused(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _copy_without_weights(tiny_models.rag_sequence, tmp_path / "rag-bin")
    (folder / "pytorch_model.bin").write_bytes(b"not loaded anyway")
    with pytest.raises(MissingModelError, match="pickle"):
        load_question_encoder(folder)
    with pytest.raises(MissingModelError, match="pickle"):
        load_generator_parts(folder)


def test_checkpoint_with_missing_generator_tensors(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from safetensors.torch import load_file, save_file

    folder = _copy_without_weights(tiny_models.rag_sequence, tmp_path / "rag-cut")
    state = load_file(str(tiny_models.rag_sequence / "model.safetensors"))
    dropped = [k for k in state if "decoder.layers.1." in k]
    assert dropped
    save_file({k: v for k, v in state.items() if k not in dropped},
              str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(MissingModelError, match="incomplete or damaged"):
        load_generator_parts(folder)
    # The question encoder's tensors are all there, so it still loads.
    assert load_question_encoder(folder).dim == 32


def test_truncated_weights_file(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _copy_without_weights(tiny_models.rag_sequence, tmp_path / "rag-trunc")
    data = (tiny_models.rag_sequence / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(MissingModelError, match="damaged"):
        load_question_encoder(folder)


def test_rag_config_without_parts(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "rag"}))
    with pytest.raises(MissingModelError, match="question_encoder/generator"):
        load_question_encoder(tmp_path)
