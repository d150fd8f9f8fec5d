"""Loading parts from local folders and from the HF cache, refusing the wrong role or a damaged
folder with a message that names the problem."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from ragdesk.core.encoders import load_encoder
from ragdesk.core.errors import MissingModelError
from ragdesk.core.models import (
    inspect_model,
    load_generator,
    load_generator_parts,
    load_passage_encoder,
    load_question_encoder,
    resolve_ref,
    select_device,
)
from tests.core.models.helpers import fake_hub_snapshot

Q = ["who painted the mona lisa", "how tall is mount everest"]


def test_inspect_classifies_every_tiny_model(tiny_models, tiny_gguf: Path) -> None:  # type: ignore[no-untyped-def]
    kinds = {name: inspect_model(resolve_ref(getattr(tiny_models, name))).kind
             for name in ("question_encoder", "ctx_encoder", "st_encoder", "bart", "causal_lm",
                          "rag_sequence", "rag_token")}
    assert kinds == {"question_encoder": "dpr-question", "ctx_encoder": "dpr-context",
                     "st_encoder": "sentence-transformers", "bart": "seq2seq",
                     "causal_lm": "causal", "rag_sequence": "rag", "rag_token": "rag"}
    info = inspect_model(resolve_ref(tiny_gguf))
    assert (info.kind, info.model_type, info.generator_kind) == ("gguf", "gpt2", "causal")


def test_plain_encoders_match_the_foundation_loader(tiny_models) -> None:  # type: ignore[no-untyped-def]
    for folder, loader, role in ((tiny_models.question_encoder, load_question_encoder, "question"),
                                 (tiny_models.st_encoder, load_question_encoder, "question"),
                                 (tiny_models.ctx_encoder, load_passage_encoder, "passage"),
                                 (tiny_models.st_encoder, load_passage_encoder, "passage")):
        ours = loader(folder)
        ref = load_encoder(folder, role=role)
        np.testing.assert_array_equal(ours.encode(Q), ref.encode(Q))
        assert ours.info.id == str(folder)


@pytest.mark.parametrize("name,kind,cls", [("bart", "seq2seq", "BartForConditionalGeneration"),
                                           ("causal_lm", "causal", "GPT2LMHeadModel")])
def test_generator_folders(tiny_models, name: str, kind: str, cls: str) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    folder = getattr(tiny_models, name)
    parts = load_generator_parts(folder)
    assert parts.kind == kind and type(parts.model).__name__ == cls
    ref_cls = AutoModelForSeq2SeqLM if kind == "seq2seq" else AutoModelForCausalLM
    ref = ref_cls.from_pretrained(str(folder)).eval()
    for (n1, p1), (n2, p2) in zip(parts.model.state_dict().items(), ref.state_dict().items(),
                                  strict=True):
        assert n1 == n2 and torch.equal(p1, p2)


def test_load_generator_wraps_in_the_engine_classes(tiny_models, tiny_gguf: Path) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.engine.generators import CausalLMGenerator, Seq2SeqGenerator

    assert isinstance(load_generator(tiny_models.rag_sequence), Seq2SeqGenerator)
    assert isinstance(load_generator(tiny_models.bart), Seq2SeqGenerator)
    gen = load_generator(tiny_models.causal_lm)
    assert isinstance(gen, CausalLMGenerator) and gen.name == str(tiny_models.causal_lm)


@pytest.mark.parametrize("loader,name,match", [
    (load_question_encoder, "ctx_encoder", "context"),
    (load_question_encoder, "bart", "not a question encoder"),
    (load_passage_encoder, "question_encoder", "not a passage encoder"),
    (load_passage_encoder, "rag_sequence", "not a passage encoder"),
    (load_generator_parts, "question_encoder", "not a generator"),
    (load_generator_parts, "st_encoder", "not a generator"),
])
def test_wrong_role_is_refused(tiny_models, loader, name: str, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MissingModelError, match=match):
        loader(getattr(tiny_models, name))


def test_gguf_is_not_an_encoder(tiny_gguf: Path) -> None:
    with pytest.raises(MissingModelError, match="not a question encoder"):
        load_question_encoder(tiny_gguf)


# ------------------------------------------------------------------ HF cache ----------


def test_hub_id_from_the_cache(tiny_models, hf_cache: Path) -> None:  # type: ignore[no-untyped-def]
    fake_hub_snapshot(hf_cache, "facebook/rag-sequence-nq", tiny_models.rag_sequence,
                      commit="c" * 40)
    enc = load_question_encoder("facebook/rag-sequence-nq")
    assert (enc.info.id, enc.info.revision) == ("facebook/rag-sequence-nq", "c" * 40)
    np.testing.assert_array_equal(enc.encode(Q),
                                  load_question_encoder(tiny_models.rag_sequence).encode(Q))
    parts = load_generator_parts("facebook/rag-sequence-nq")
    assert parts.kind == "seq2seq" and parts.name == "facebook/rag-sequence-nq"


def test_hub_id_not_in_the_cache(hf_cache: Path) -> None:
    with pytest.raises(MissingModelError, match="neither a local folder nor in the Hugging "
                       "Face cache") as err:
        load_question_encoder("facebook/rag-token-nq")
    assert "models download" in err.value.hint and "models import" in err.value.hint
    assert not hf_cache.exists()


def test_cached_safetensors_conversion_is_found(tiny_models, hf_cache: Path) -> None:  # type: ignore[no-untyped-def]
    # main has only a pickle; the hub's conversion PR (what `models download` fetches) has
    # safetensors.
    bin_only = hf_cache.parent / "bin-only"
    shutil.copytree(tiny_models.ctx_encoder, bin_only,
                    ignore=shutil.ignore_patterns("*.safetensors"))
    (bin_only / "pytorch_model.bin").write_bytes(b"never read")
    fake_hub_snapshot(hf_cache, "org/ctx", bin_only, commit="1" * 40)
    fake_hub_snapshot(hf_cache, "org/ctx", tiny_models.ctx_encoder, commit="2" * 40,
                      ref="refs/pr/7")
    resolved = resolve_ref("org/ctx")
    assert resolved.revision == "2" * 40
    assert load_passage_encoder("org/ctx").info.revision == "2" * 40
    # An explicit revision is honoured as given.
    assert resolve_ref("org/ctx@refs/pr/7").revision == "2" * 40


def test_missing_local_path() -> None:
    with pytest.raises(MissingModelError, match="does not exist"):
        load_generator_parts("/no/such/model.gguf")


# ------------------------------------------------------------------ damaged folders ---


def _damaged_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_unreadable_config(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _damaged_copy(tiny_models.bart, tmp_path / "bart")
    (folder / "config.json").write_text("{ not json")
    with pytest.raises(MissingModelError, match=r"config\.json cannot be read as JSON"):
        load_generator_parts(folder)


def test_folder_without_config(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(MissingModelError, match=r"no config\.json"):
        load_generator_parts(tmp_path)


def test_generator_with_missing_tensors(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from safetensors.torch import load_file, save_file

    folder = _damaged_copy(tiny_models.causal_lm, tmp_path / "clm")
    state = load_file(str(folder / "model.safetensors"))
    save_file({k: v for k, v in state.items() if ".h.1." not in k},
              str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(MissingModelError, match="incomplete or damaged"):
        load_generator_parts(folder)


def test_generator_with_truncated_weights(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _damaged_copy(tiny_models.bart, tmp_path / "bart")
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[:1000])
    with pytest.raises(MissingModelError, match="could not be loaded"):
        load_generator_parts(folder)


def test_generator_without_tokenizer(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _damaged_copy(tiny_models.bart, tmp_path / "bart")
    for f in folder.glob("tokenizer*"):
        f.unlink()
    # transformers quietly builds a tokenizer of special tokens only; ragdesk refuses it.
    with pytest.raises(MissingModelError, match="tokenizer files are missing"):
        load_generator_parts(folder)


def test_encoder_without_tokenizer(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _damaged_copy(tiny_models.question_encoder, tmp_path / "q")
    for f in [*folder.glob("tokenizer*"), *folder.glob("vocab*")]:
        f.unlink()
    with pytest.raises(MissingModelError, match="tokenizer files are missing"):
        load_question_encoder(folder)


def test_pickle_only_folder(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _damaged_copy(tiny_models.question_encoder, tmp_path / "q")
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"never read")
    with pytest.raises(MissingModelError, match="pickle"):
        load_question_encoder(folder)


def test_config_of_an_unusable_model(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "vit"}))
    with pytest.raises(MissingModelError, match="cannot use"):
        load_generator_parts(tmp_path)


def test_select_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGDESK_DEVICE", raising=False)
    assert select_device() == "cpu"
    monkeypatch.setenv("RAGDESK_DEVICE", "cuda:1")
    assert select_device() == "cuda:1"
    assert select_device("cpu") == "cpu"
    expected = "cuda" if torch.cuda.is_available() else (
        "mps" if torch.backends.mps.is_available() else "cpu")
    assert select_device("auto") == expected
