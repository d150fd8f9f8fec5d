"""Tokenizers read straight from ``tokenizer.json`` by the ``tokenizers`` library (Rust).

``AutoTokenizer`` builds some tokenizers again in Python from the file's vocabulary and merges:
for Gemma 3's 262,144 tokens and 514,906 merges that is a 33 MB ``json.load`` and a new BPE
model, a large share of a one-shot ``ragdesk ask``, where ``tokenizers`` reads the same file
directly (docs/benchmarks.md has the times). AutoTokenizer keeps the file's vocabulary, merges,
added tokens, post-processor, padding and truncation, and takes the normalizer, pre-tokenizer,
decoder and model options from the class's ``__init__``. So for the classes listed here, where
the file holds those same parts (checked on every load against what the class builds), the file
is wrapped as it is in transformers' ``PreTrainedTokenizerFast``, with the folder's
``tokenizer_config.json`` settings, its chat template and the class's own defaults (Gemma pads
on the left); every other tokenizer goes through ``AutoTokenizer``.
tests/core/models/test_fast_tokenizers.py holds the two to the same ids, padding, special
tokens, decoding and chat template.
"""

from __future__ import annotations

import importlib
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ragdesk.core.lean_tokenizer import chat_template_of, json_object, read_lean_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)

# tokenizer_config.json's tokenizer_class -> the module that defines it (its class defaults)
DIRECT_CLASSES = {
    "GemmaTokenizer": "transformers.models.gemma.tokenization_gemma",
    "GemmaTokenizerFast": "transformers.models.gemma.tokenization_gemma",
}
# keys of tokenizer_config.json that describe the file, not the tokenizer
_NOT_SETTINGS = frozenset({"tokenizer_class", "backend", "auto_map", "is_local",
                           "local_files_only", "name_or_path", "tokenizer_file",
                           "processor_class", "added_tokens_decoder"})
# settings a class fixes as class attributes, which a plain PreTrainedTokenizerFast lacks
_CLASS_DEFAULTS = ("padding_side", "truncation_side", "model_input_names")


def load_tokenizer(folder: Path, *, answering: bool = False, own_folder: bool = False
                   ) -> PreTrainedTokenizerBase:
    """The tokenizer of a model folder: read directly where its class allows it, else
    ``AutoTokenizer`` (never with ``trust_remote_code``). ``answering``: the tokenizer only
    tokenizes, decodes and renders chat prompts (never saved, never trained), so where
    :mod:`ragdesk.core.lean_tokenizer` reproduces transformers' it is that one, and
    transformers is not imported for it (its package import alone is most of a second of a
    one-shot ``ragdesk ask``). ``own_folder``: ragdesk made ``folder`` (see
    :func:`read_lean_tokenizer`)."""
    if answering:
        lean = read_lean_tokenizer(folder, own_folder=own_folder)
        if lean is not None:  # duck-typed: the methods the engine calls, as transformers'
            return cast("PreTrainedTokenizerBase", lean)
    direct = read_tokenizer_json(folder)
    if direct is not None:
        return direct
    from transformers import AutoTokenizer

    tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(
        str(folder), trust_remote_code=False)
    return tokenizer


def read_tokenizer_json(folder: Path) -> PreTrainedTokenizerBase | None:
    """``PreTrainedTokenizerFast`` over ``folder/tokenizer.json`` for the classes in
    :data:`DIRECT_CLASSES`; None for any other folder (``AutoTokenizer`` then loads it)."""
    config = json_object(folder / "tokenizer_config.json")
    tokenizer_json = folder / "tokenizer.json"
    if config is None or not tokenizer_json.is_file():
        return None
    module = DIRECT_CLASSES.get(str(config.get("tokenizer_class")))
    if module is None:
        return None
    from transformers import PreTrainedTokenizerFast

    cls = getattr(importlib.import_module(module), str(config["tokenizer_class"]))
    settings = {k: v for k, v in config.items() if k not in _NOT_SETTINGS}
    for key, value in (json_object(folder / "special_tokens_map.json") or {}).items():
        settings.setdefault(key, value)
    for key in _CLASS_DEFAULTS:
        settings.setdefault(key, getattr(cls, key))
    known, template = chat_template_of(folder, config)
    if not known:  # several named templates, or a template file that cannot be read
        return None
    if template is not None:
        settings["chat_template"] = template
    try:
        tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_json),
                                            name_or_path=str(folder), **settings)
    except Exception as exc:  # a damaged file: AutoTokenizer reports it in its words
        log.info("reading %s directly failed (%s); using AutoTokenizer", tokenizer_json, exc)
        return None
    if not _same_pipeline(tokenizer.backend_tokenizer, _class_pipeline(cls, settings)):
        log.info("%s holds another pipeline than %s builds; using AutoTokenizer",
                 tokenizer_json, cls.__name__)
        return None
    return tokenizer


_SPECIALS = ("unk_token", "bos_token", "eos_token", "pad_token", "mask_token")
_MODEL_FLAGS = ("byte_fallback", "fuse_unk", "unk_token", "dropout",
                "continuing_subword_prefix", "end_of_word_suffix", "ignore_merges")


def _class_pipeline(cls: Any, settings: dict[str, object]) -> Any:
    """What the class's ``__init__`` builds around a vocabulary (AutoTokenizer keeps only
    the vocabulary, merges, post-processor, padding and truncation of the file): an instance
    over its default few tokens, with the folder's special tokens."""
    specials = {k: (v.get("content") if isinstance(v, dict) else v)
                for k, v in settings.items() if k in _SPECIALS}
    return cls(**specials).backend_tokenizer


def _same_pipeline(got: Any, built: Any) -> bool:
    def state(part: Any) -> Any:
        return None if part is None else json.loads(part.__getstate__())

    if any(state(getattr(got, k)) != state(getattr(built, k))
           for k in ("normalizer", "pre_tokenizer", "decoder")):
        return False
    if type(got.model) is not type(built.model):
        return False
    return all(getattr(got.model, f, None) == getattr(built.model, f, None)
               for f in _MODEL_FLAGS)
