"""Model configurations read from ``config.json`` without
importing transformers (its import alone costs a one-shot ``ragdesk ask`` ~0.7 s).

``read_lean_config`` rebuilds what transformers 5.24's ``AutoConfig.from_pretrained`` gives
for the model types the lean models run (``gemma3_text``, ``qwen2``, ``bert``): the class
defaults, the file's values, then what the class and ``PreTrainedConfig`` compute. Anything it
does not reproduce exactly gives None, and the caller loads transformers' config instead.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

from ragdesk.core.safe_json import read_model_json


def words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# name -> (class default, strict type); "" = unchecked (PreTrainedConfig's own fields carry
# string annotations, which huggingface_hub's @strict does not check)
_Spec = dict[str, tuple[Any, str]]
_BASE: _Spec = {
    "transformers_version": (None, ""), "architectures": (None, ""),
    "output_hidden_states": (False, ""), "return_dict": (True, ""), "dtype": (None, ""),
    "chunk_size_feed_forward": (0, ""), "is_encoder_decoder": (False, ""),
    "id2label": (None, ""), "label2id": (None, ""), "problem_type": (None, "")}
_FIELDS: dict[str, _Spec] = {
    "gemma3_text": {
        "vocab_size": (262_208, "int"), "hidden_size": (2304, "int"),
        "intermediate_size": (9216, "int"), "num_hidden_layers": (26, "int"),
        "num_attention_heads": (8, "int"), "num_key_value_heads": (4, "int"),
        "head_dim": (256, "int"), "hidden_activation": ("gelu_pytorch_tanh", "str"),
        "max_position_embeddings": (131_072, "int"), "initializer_range": (0.02, "float"),
        "rms_norm_eps": (1e-6, "float"), "use_cache": (True, "bool"),
        "pad_token_id": (0, "int?"), "eos_token_id": (1, "ids?"), "bos_token_id": (2, "int?"),
        "tie_word_embeddings": (True, "bool"), "rope_parameters": (None, "dict?"),
        "attention_bias": (False, "bool"), "attention_dropout": (0.0, "num?"),
        "query_pre_attn_scalar": (256, "int"), "sliding_window": (4096, "int?"),
        "layer_types": (None, "strs?"), "final_logit_softcapping": (None, "float?"),
        "attn_logit_softcapping": (None, "float?"),
        "use_bidirectional_attention": (False, "bool?")},
    "qwen2": {
        "vocab_size": (151_936, "int"), "hidden_size": (4096, "int"),
        "intermediate_size": (22_016, "int"), "num_hidden_layers": (32, "int"),
        "num_attention_heads": (32, "int"), "num_key_value_heads": (32, "int?"),
        "hidden_act": ("silu", "str"), "max_position_embeddings": (32_768, "int"),
        "initializer_range": (0.02, "float"), "rms_norm_eps": (1e-6, "float"),
        "use_cache": (True, "bool"), "tie_word_embeddings": (False, "bool"),
        "rope_parameters": (None, "dict?"), "use_sliding_window": (False, "bool"),
        "sliding_window": (4096, "int?"), "max_window_layers": (28, "int"),
        "layer_types": (None, "strs?"), "attention_dropout": (0.0, "num"),
        "pad_token_id": (None, "int?"), "bos_token_id": (None, "int?"),
        "eos_token_id": (None, "ids?")},
    "bert": {
        "vocab_size": (30_522, "int"), "hidden_size": (768, "int"),
        "num_hidden_layers": (12, "int"), "num_attention_heads": (12, "int"),
        "intermediate_size": (3072, "int"), "hidden_act": ("gelu", "str"),
        "hidden_dropout_prob": (0.1, "num"), "attention_probs_dropout_prob": (0.1, "num"),
        "max_position_embeddings": (512, "int"), "type_vocab_size": (2, "int"),
        "initializer_range": (0.02, "float"), "layer_norm_eps": (1e-12, "float"),
        "pad_token_id": (0, "int?"), "use_cache": (True, "bool"),
        "classifier_dropout": (None, "num?"), "is_decoder": (False, "bool"),
        "add_cross_attention": (False, "bool"), "bos_token_id": (None, "int?"),
        "eos_token_id": (None, "ids?"), "tie_word_embeddings": (True, "bool")},
}
# Extra keys that would hit a method, property or class attribute of PreTrainedConfig, or that
# it (or the model) gives a meaning this module does not reproduce: the file is left to it.
_RESERVED = frozenset(words("""
allow_global_per_layer_attribute_access attribute_map auto_map base_config_key
base_model_ep_plan base_model_fsdp_plan base_model_pp_plan base_model_tp_plan
configuration_files convert_rope_params_to_dict decoder default_config_fields
default_rope_type default_theta dict_dtype_to_str distributed_config embed_dim
experts_implementation attn_implementation extra_config_files extra_files from_dict
from_json_file from_pretrained generator get_config_dict get_mtp_config get_text_config
ignore_keys_at_rope_validation is_custom_code is_heterogeneous is_remote_code
mlp_layer_types mtp_layer_types nested_rope_parameter_keys num_heads partial_rotary_factor
per_layer_attributes per_layer_config push_to_hub quantization_config register_for_auto_class
save_pretrained serialize_explicit_per_layer_config standardize_rope_params sub_configs
sub_configs_defaults text_config text_encoder to_diff_dict to_dict to_json_file
to_json_string update update_from_string use_return_dict validate validate_architecture
validate_layer_type validate_output_attentions validate_rope validate_token_ids
_attn_implementation _experts_implementation _auto_class _heterogeneity_spec _is_quantized
_check_received_keys _decode_special_floats _dict_from_json_file _encode_special_floats
_get_config_dict _get_files_timestamps _get_generation_parameters _remove_keys_not_serialized
_getattr_without_heterogeneous_validation _hasattr_without_heterogeneous_validation
_iter_config_keys_with_heterogeneous_adjustment _update_heterogeneous_to_dict_output
_upload_modified_files _validate_axial_rope_parameters _validate_default_rope_parameters
_validate_dynamic_rope_parameters _validate_linear_rope_parameters
_validate_llama3_rope_parameters _validate_longrope_rope_parameters
_validate_proportional_rope_parameters _validate_yarn_rope_parameters
"""))
# PreTrainedConfig drops these (GenerationConfig's defaults) unless the class declares them
_GENERATION_PARAMS = frozenset(words("""
assistant_confidence_threshold assistant_lookbehind bad_words_ids begin_suppress_tokens
diversity_penalty do_sample early_stopping encoder_no_repeat_ngram_size
encoder_repetition_penalty epsilon_cutoff eta_cutoff exponential_decay_length_penalty
forced_bos_token_id forced_eos_token_id length_penalty max_length min_length
no_repeat_ngram_size num_assistant_tokens num_assistant_tokens_schedule num_beam_groups
num_beams num_return_sequences output_scores remove_invalid_values repetition_penalty
return_dict_in_generate suppress_tokens target_lookbehind temperature top_k top_p typical_p
use_cache"""))
_LAYER_TYPES = frozenset({"full_attention", "sliding_attention"})
_ROPE_TYPES = frozenset({"default", "linear"})
_UNSERIALIZED = ("_is_quantized", "_auto_class", "_commit_hash", "_attn_implementation_internal",
                 "_experts_implementation_internal", "_post_init_done",
                 "ignore_keys_at_rope_validation", "base_model_tp_plan", "base_model_pp_plan",
                 "base_model_fsdp_plan", "distributed_config")
# the torch dtypes a checkpoint names (getattr(torch, name)), by the name to_dict() gives
_DTYPES = {"float32": "float32", "float": "float32", "float16": "float16", "half": "float16",
           "bfloat16": "bfloat16", "float64": "float64", "double": "float64"}
_FLOATS = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


# far above any real model's; a config.json beyond it is not one this module reads
_MAX_LAYERS = 10_000


class _Unsupported(Exception):
    """The file holds something this module does not reproduce."""


class LeanConfig:
    """The attributes transformers' config object has after loading, and its ``to_dict()``
    (without ``transformers_version``, which records only the running version)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:
        # reached only for names the config lacks, so getattr(cfg, name, default) works
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    @property
    def num_labels(self) -> int | None:
        return None if self.id2label is None else len(self.id2label)

    @property
    def name_or_path(self) -> str:
        return str(self._name_or_path)

    @property
    def output_attentions(self) -> bool:
        return bool(self._output_attentions)

    @property
    def dtype(self) -> Any:
        name = self.__dict__["dtype"]
        if name is None:
            return None
        import torch  # only here: reading a config needs no torch

        return getattr(torch, name)

    @property
    def use_return_dict(self) -> Any:
        return self.return_dict

    @property
    def torch_dtype(self) -> Any:
        return self.dtype

    @property
    def rope_scaling(self) -> Any:
        return self.rope_parameters

    @property
    def _attn_implementation(self) -> Any:
        return self._attn_implementation_internal

    @property
    def per_layer_config(self) -> _LayerTypeView:
        return _LayerTypeView(self)

    def get_text_config(self, decoder: bool | None = None,
                        encoder: bool | None = None) -> LeanConfig:
        return self  # none of these is composite or encoder-decoder

    def standardize_rope_params(self) -> None:
        """Already standardized on reading (transformers' rope init functions call this)."""

    def to_dict(self) -> dict[str, Any]:
        out = copy.deepcopy(self.__dict__)
        out.pop("transformers_version", None)
        if self.model_type == "gemma3_text" and out.get("use_bidirectional_attention"):
            out["sliding_window"] = (out["sliding_window"] - 1) * 2  # the value before halving
        _serialized(out)
        return out


class _LayerTypeView:
    """``config.per_layer_config[layer_type]`` of a homogeneous config: the config itself."""

    def __init__(self, config: LeanConfig) -> None:
        self._config = config

    def __getitem__(self, layer_type: str) -> LeanConfig:
        if layer_type not in (getattr(self._config, "layer_types", None) or ()):
            raise ValueError(f"Layer type {layer_type!r} not found in config.layer_types")
        return self._config


def read_lean_config(folder: Path) -> LeanConfig | None:
    """The config of the model in ``folder`` as transformers would load it, or None where this
    module does not reproduce it (other model types, remote code, unusual keys, damage)."""
    raw = read_json(folder / "config.json")
    kind = raw.get("model_type") if isinstance(raw, dict) else None
    if not isinstance(kind, str) or kind not in _FIELDS:
        return None
    layers = raw.get("num_hidden_layers")
    if isinstance(layers, int) and not 0 <= layers <= _MAX_LAYERS:
        return None  # the per-layer lists would be built before any check could refuse it
    try:
        return LeanConfig(_build(raw, kind, folder))
    except (_Unsupported, TypeError, ValueError, ArithmeticError):
        return None  # a value of a shape this module does not read: transformers' to judge


def read_config(folder: Path) -> Any:
    """The folder's configuration as transformers reads it: :func:`read_lean_config` where
    it reproduces it (no transformers import), else ``AutoConfig``'s."""
    config = read_lean_config(folder)
    if config is not None:
        return config
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(str(folder), trust_remote_code=False)


def _build(raw: dict[str, Any], model_type: str, folder: Path) -> dict[str, Any]:
    spec = {**_BASE, **_FIELDS[model_type]}
    kwargs = {k: v for k, v in raw.items() if k not in spec}
    _need(not _RESERVED & kwargs.keys())
    v: dict[str, Any] = {}
    for name, (default, kind) in spec.items():
        v[name] = raw.get(name, default)
        _need(fits(v[name], kind))
    _class_post_init(v, kwargs, model_type)
    _base_post_init(v, kwargs, model_type)
    for name in _GENERATION_PARAMS - spec.keys():
        kwargs.pop(name, None)
    for name in ("name_or_path", "_commit_hash", "_attn_implementation_internal",
                 "_experts_implementation_internal"):
        kwargs.pop(name, None)
    v["_output_attentions"] = kwargs.pop("output_attentions", False)
    v["_attn_implementation_internal"] = v["_experts_implementation_internal"] = None
    for key, value in kwargs.items():
        if key == "num_labels":  # the property's setter
            _set_num_labels(v, value)
        else:
            v[key] = value
    v["_post_init_done"] = True
    v["model_type"] = model_type
    v["_name_or_path"] = str(folder)  # AutoConfig sets it last, over the file's value
    _validate(v, model_type)
    return v


def _class_post_init(v: dict[str, Any], kwargs: dict[str, Any], model_type: str) -> None:
    """The __post_init__ of Gemma3TextConfig / Qwen2Config (BertConfig has none)."""
    if model_type == "gemma3_text":
        if v["use_bidirectional_attention"]:
            _need(v["sliding_window"] is not None)
            v["sliding_window"] = v["sliding_window"] // 2 + 1
        pattern = v["_sliding_window_pattern"] = kwargs.get("sliding_window_pattern", 6)
        if v["layer_types"] is None:
            _need(fits(pattern, "int") and pattern > 0)
            v["layer_types"] = ["sliding_attention" if (i + 1) % pattern else "full_attention"
                                for i in range(v["num_hidden_layers"])]
    elif model_type == "qwen2":
        v["sliding_window"] = v["sliding_window"] if v["use_sliding_window"] else None
        if v["num_key_value_heads"] is None:
            v["num_key_value_heads"] = v["num_attention_heads"]
        if v["layer_types"] is None:
            v["layer_types"] = [
                "sliding_attention" if v["sliding_window"] is not None
                and i >= v["max_window_layers"] else "full_attention"
                for i in range(v["num_hidden_layers"])]


def _base_post_init(v: dict[str, Any], kwargs: dict[str, Any], model_type: str) -> None:
    """PreTrainedConfig.__post_init__ up to the extra keys: dtype, labels, rotary."""
    torch_dtype = kwargs.pop("torch_dtype", None)
    if torch_dtype is not None and v["dtype"] is None:
        v["dtype"] = torch_dtype
    if v["dtype"] is not None:  # kept as its name: torch is imported when .dtype is read
        _need(isinstance(v["dtype"], str) and v["dtype"] in _DTYPES)
        v["dtype"] = _DTYPES[v["dtype"]]
    if v["id2label"] is None:
        _set_num_labels(v, kwargs.get("num_labels", 2))
    else:
        _need(isinstance(v["id2label"], dict))
        try:
            v["id2label"] = {int(k): label for k, label in v["id2label"].items()}
        except ValueError:
            raise _Unsupported from None
    _need(v["problem_type"] != "single_label_classification" or len(v["id2label"]) != 1)
    if model_type == "gemma3_text":
        _gemma_rope(v, kwargs)
    elif model_type == "qwen2":
        _qwen_rope(v, kwargs)
    else:
        _need(not {"rope_scaling", "rope_theta", "rope_parameters", "layer_types"} & kwargs.keys())


def _validate(v: dict[str, Any], model_type: str) -> None:
    """The class validators (@strict runs them after __init__) that raise."""
    _need(v["num_attention_heads"] > 0 and v["num_hidden_layers"] > 0)
    if model_type == "gemma3_text":
        _need(v["hidden_size"] % v["num_attention_heads"] == 0)
    if model_type != "bert":
        _need(set(v["layer_types"]) <= _LAYER_TYPES
              and len(v["layer_types"]) == v["num_hidden_layers"])
        head_dim = v.get("head_dim")
        _need(head_dim is None or (fits(head_dim, "int") and (head_dim <= 4 or head_dim % 2 == 0)))


def _gemma_rope(v: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Gemma3TextConfig.convert_rope_params_to_dict: one set per layer type, the legacy
    rope_theta (full) and rope_local_base_freq (sliding) as their thetas."""
    params = v["rope_parameters"]
    if params is None:
        params = {"sliding_attention": {"rope_type": "default"},
                  "full_attention": {"rope_type": "default"}}
    _need(params.keys() <= _LAYER_TYPES)
    scaling = kwargs.pop("rope_scaling", None)
    if scaling is not None:
        _need(isinstance(scaling, dict) and isinstance(params.get("full_attention"), dict))
        params["full_attention"].update(scaling)
    for layer_type, legacy, theta in (("full_attention", "rope_theta", 1_000_000.0),
                                      ("sliding_attention", "rope_local_base_freq", 10_000.0)):
        if params.get(layer_type) is None:
            params[layer_type] = {"rope_type": "default"}
        _need(isinstance(params[layer_type], dict))
        params[layer_type].setdefault("rope_theta", kwargs.pop(legacy, theta))
    # standardize_rope_params and validate_rope touch only the types the layers use
    for layer_type in set(v["layer_types"]) & params.keys():
        _standard_rope(params[layer_type])
    v["rope_parameters"] = params


def _qwen_rope(v: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """RotaryEmbeddingConfigMixin.convert_rope_params_to_dict for one global set."""
    params = kwargs.pop("rope_scaling", None) or v["rope_parameters"]
    params = {} if params is None else params
    _need(isinstance(params, dict) and not params.keys() & _LAYER_TYPES)
    params.setdefault("rope_theta", kwargs.pop("rope_theta", 10_000.0))
    _standard_rope(params)
    v["rope_parameters"] = params


def _standard_rope(params: dict[str, Any]) -> None:
    params.setdefault("rope_type", params.get("type", "default"))
    _need(params["rope_type"] in _ROPE_TYPES and fits(params["rope_theta"], "num"))
    _need(params["rope_type"] != "linear" or "factor" in params)


def _set_num_labels(v: dict[str, Any], n: Any) -> None:
    _need(fits(n, "int") and n >= 0)
    if v["id2label"] is None or len(v["id2label"]) != n:
        v["id2label"] = {i: f"LABEL_{i}" for i in range(n)}
        v["label2id"] = {label: i for i, label in v["id2label"].items()}


def fits(value: Any, kind: str) -> bool:
    """huggingface_hub's @strict type check of a field (bool is no int, int no float)."""
    if kind.endswith("?"):
        return value is None or fits(value, kind[:-1])
    is_int = isinstance(value, int) and not isinstance(value, bool)
    checks: dict[str, Any] = {
        "": True, "int": is_int, "float": isinstance(value, float),
        "num": is_int or isinstance(value, float), "bool": isinstance(value, bool),
        "str": isinstance(value, str), "dict": isinstance(value, dict),
        "ids": is_int or (isinstance(value, list) and all(fits(x, "int") for x in value)),
        "strs": isinstance(value, list) and all(isinstance(x, str) for x in value)}
    return bool(checks[kind])


def _need(condition: bool) -> None:
    if not condition:
        raise _Unsupported


def _serialized(d: dict[str, Any]) -> None:
    """PreTrainedConfig's _remove_keys_not_serialized and dict_dtype_to_str, nested dicts
    included (torch.float32 -> "float32")."""
    for key in _UNSERIALIZED:
        d.pop(key, None)
    if "_output_attentions" in d:
        d["output_attentions"] = d.pop("_output_attentions")
    if isinstance(d.get("dtype"), dict):
        d["dtype"] = {k: str(x).split(".")[-1] for k, x in d["dtype"].items()}
    elif d.get("dtype") is not None and not isinstance(d["dtype"], (str, int)):
        d["dtype"] = str(d["dtype"]).split(".")[1]
    for value in d.values():
        if isinstance(value, dict):
            _serialized(value)


def read_json(path: Path) -> Any:
    """The file's JSON with transformers' tagged floats decoded; None where transformers would
    not read it (see :func:`read_model_json`)."""
    data = read_model_json(path)
    return None if data is None else _decode_floats(data)


def _decode_floats(obj: Any) -> Any:
    if isinstance(obj, dict):
        if obj.keys() == {"__float__"} and isinstance(obj["__float__"], str):
            return _FLOATS.get(obj["__float__"], obj)
        return {k: _decode_floats(x) for k, x in obj.items()}
    if isinstance(obj, list):
        return [_decode_floats(x) for x in obj]
    return obj
