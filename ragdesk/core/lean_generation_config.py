"""Generation settings read from ``generation_config.json`` (or a model's configuration)
without importing transformers, for the configurations :mod:`ragdesk.core.lean_config` reads:
what ``GenerationConfig`` gives, or None and transformers' own class."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ragdesk.core.lean_config import LeanConfig, fits, read_json, words

# GenerationConfig.__init__'s attributes (all None by default), in its order
_GENERATION_ATTRS = words("""
max_length max_new_tokens min_length min_new_tokens early_stopping max_time stop_strings
do_sample num_beams use_mtp use_cache cache_implementation cache_config max_cache_len
temperature top_k top_p min_p top_h typical_p epsilon_cutoff eta_cutoff repetition_penalty
encoder_repetition_penalty length_penalty no_repeat_ngram_size bad_words_ids
renormalize_logits forced_bos_token_id forced_eos_token_id remove_invalid_values
exponential_decay_length_penalty suppress_tokens begin_suppress_tokens sequence_bias
token_healing guidance_scale watermarking_config num_return_sequences output_attentions
output_hidden_states output_scores output_logits return_dict_in_generate pad_token_id
bos_token_id eos_token_id encoder_no_repeat_ngram_size decoder_start_token_id is_assistant
num_assistant_tokens num_assistant_tokens_schedule assistant_confidence_threshold
prompt_lookup_num_tokens max_matching_ngram_size assistant_early_exit assistant_lookbehind
target_lookbehind assistant_ensemble_weight speculation_type compile_config disable_compile
continuous_batching_config low_memory penalty_alpha dola_layers diversity_penalty
num_beam_groups constraints force_words_ids prefill_chunk_size""")
# values GenerationConfig turns into objects, or that its validate() may refuse
_GENERATION_OBJECTS = ("watermarking_config", "compile_config", "continuous_batching_config",
                       "assistant_ensemble_weight", "suppress_tokens", "cache_config")
_CACHES = frozenset({None, "static", "dynamic", "hybrid", "sliding_window"})
_OUTPUT_FLAGS = ("output_attentions", "output_hidden_states", "output_scores", "output_logits")


class LeanGenerationConfig:
    """The attributes of transformers' ``GenerationConfig`` and its ``to_dict()`` (without
    ``transformers_version``)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def to_dict(self) -> dict[str, Any]:
        out = copy.deepcopy(self.__dict__)
        out.pop("transformers_version", None)
        return out


def read_generation_config(folder: Path, config: Any) -> Any:
    """What ``GenerationConfig.from_pretrained(folder)`` gives when the folder has a
    generation_config.json, else ``GenerationConfig.from_model_config(config)``. Files this
    module does not reproduce (or damaged ones), and model configurations that are not a
    :class:`LeanConfig`, go to transformers, which is then imported."""
    path = folder / "generation_config.json"
    from_file = path.is_file()
    values: dict[str, Any] | None = None
    if from_file:
        raw = read_json(path)
        values = _generation(raw) if isinstance(raw, dict) else None
    elif isinstance(config, LeanConfig):
        model = {k: x for k, x in config.to_dict().items() if x is not None}
        values = _generation({**model, "_from_model_config": True})
        if values is not None and not values["return_dict_in_generate"] and any(
                values[flag] for flag in _OUTPUT_FLAGS):
            values["return_dict_in_generate"] = True
    if values is not None:
        return LeanGenerationConfig(values)
    from transformers import AutoConfig, GenerationConfig

    if from_file:
        return GenerationConfig.from_pretrained(str(folder), trust_remote_code=False)
    return GenerationConfig.from_model_config(
        config if not isinstance(config, LeanConfig)
        else AutoConfig.from_pretrained(str(folder), trust_remote_code=False))


def _generation(raw: dict[str, Any]) -> dict[str, Any] | None:
    """GenerationConfig(**raw) as a dict of attributes, or None where validate() could raise
    or a value becomes an object."""
    kwargs = dict(raw)
    v = {name: kwargs.pop(name, None) for name in _GENERATION_ATTRS}
    kwargs.pop("_commit_hash", None)
    v["_from_model_config"] = kwargs.pop("_from_model_config", None)
    v["transformers_version"] = kwargs.pop("transformers_version", None)
    if not v["_from_model_config"]:
        if kwargs:  # extra keys become attributes, some of which validate() refuses
            return None
    elif kwargs.get("force_bos_token_to_be_generated", False):
        v["forced_bos_token_id"] = v["bos_token_id"]
    new_tokens, returned = v["max_new_tokens"], v["num_return_sequences"]
    ok = (all(v[name] is None for name in _GENERATION_OBJECTS)
          and (v["early_stopping"] is None or isinstance(v["early_stopping"], bool)
               or v["early_stopping"] == "never")
          and (new_tokens is None or (fits(new_tokens, "int") and new_tokens > 0))
          and (returned is None or (fits(returned, "int") and returned <= 1))
          and fits(v["pad_token_id"], "int?") and v["cache_implementation"] in _CACHES)
    return v if ok else None
