"""A model folder's tokenizer without ``transformers``: ``tokenizer.json`` read by the
``tokenizers`` library (Rust), with transformers 5's Python behaviour on top.

``AutoTokenizer`` costs a one-shot ``ragdesk ask`` ~0.7 s of imports. For the classes in
:data:`CLASSES` transformers keeps the file's vocabulary, merges, added tokens,
post-processor, padding and truncation, but builds the normalizer, pre-tokenizer, decoder and
model options in the class's ``__init__``; so does this module, and a folder is read here only
when the file's model has the class's options and nothing in the file or its configs would make
transformers add, rename or re-flag a token (then the Rust tokenizer is the one transformers ends
up with). Every other folder, and every damaged or hostile one (a config of the wrong shape,
nested too deep, too large), gives None and goes through transformers.
tests/core/test_lean_tokenizer.py holds the two together. One instance may serve several
threads (the GUI encodes questions on worker threads): each call sets the backend's truncation
and padding and encodes under one lock.
"""

from __future__ import annotations

import fnmatch
import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenizers import (
    AddedToken,
    Tokenizer,
    processors,
)

from ragdesk.core.chat_template import render_chat
from ragdesk.core.compact_tokenizer import read_tokenizer_file
from ragdesk.core.errors import BadInputError
from ragdesk.core.safe_json import read_bounded, read_model_json
from ragdesk.core.tokenizer_classes import (
    BERT,
    CLASSES,
    TokenizerClass,
    class_pipeline,
    take_class_pipeline,
)

log = logging.getLogger(__name__)

VERY_LARGE_INTEGER = int(1e30)  # transformers' "no limit" model_max_length
LARGE_INTEGER = int(1e20)  # above it transformers treats model_max_length as unset
NAMED = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
         "mask_token")  # transformers' SPECIAL_TOKENS_ATTRIBUTES, in its order
# config.json model types for which AutoTokenizer keeps tokenizer_config's class (checked
# against transformers' tables in the tests); any other model type may reroute the folder
_MODEL_TYPES = {
    "gemma": {"gemma", "gemma2", "gemma3", "gemma3_text"},
    "qwen2": {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"},
    "bert": {"bert", "dpr"},
}
_BACKEND_IDS = ("deepseek-ai/deepseek-r1-distill-llama-*", "deepseek-ai/deepseek-coder-*",
                "allenai/dolma2-tokenizer", "google/umt5-small", "naver-clova-ix/donut-*",
                "salesforce/blip2-opt-*", "salesforce/blip2-flan-t5-*",
                "salesforce/instructblip-flan-t5-*", "stepfun-ai/step-3.7-*")
# a chat template is a page or two of Jinja; a larger file is not one
_TEMPLATE_BYTES = 1 << 20
# configs that send transformers down paths not reproduced here
_REFUSED_KEYS = ("auto_map", "fast_tokenizer_files", "model_specific_special_tokens",
                 "init_inputs")


def json_object(path: Path) -> dict[str, Any] | None:
    """A model folder's JSON file holding an object, or None where it is missing,
    unreadable, not JSON (a byte-order mark included), nested too deep or not an object."""
    data = read_model_json(path)
    return data if isinstance(data, dict) else None


def _content(value: Any) -> str | None:
    """A special token as a config stores it: a string or a serialized AddedToken."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _special_tokens(cls: TokenizerClass, config: dict[str, Any], folder: Path
                    ) -> tuple[dict[str, str | None], list[str]] | None:
    """(named tokens in transformers' attribute order, extra special tokens), or None where
    transformers' merging of the two configs is not reproduced."""
    merged = dict(config)
    if "added_tokens_decoder" not in config:  # transformers only reads the map then
        kept = json_object(folder / "special_tokens_map.json") or {}
        if any(k not in NAMED for k in kept):
            return None
        merged.update(kept)
    extra = merged.get("extra_special_tokens") or merged.get("additional_special_tokens") or []
    model_specific = [k for k, v in merged.items()
                      if k.endswith("_token") and k not in NAMED and isinstance(v, str)]
    if not isinstance(extra, list) or model_specific:
        return None  # a dict of extra tokens, or named model-specific ones
    named: dict[str, str | None] = {}
    for key in NAMED:
        value = merged[key] if key in merged else cls.defaults.get(key)
        if value is not None and _content(value) is None:
            return None
        named[key] = _content(value)
    extras = [_content(t) for t in extra]
    return None if None in extras else (named, [str(t) for t in extras])


def _added_tokens_kept(tok: Tokenizer, config: Mapping[str, Any], specials: list[str]) -> bool:
    """Whether transformers, adding the added tokens again in id order to a tokenizer built
    from the vocabulary, and every special token not yet among them, gets the file's."""
    added = tok.get_added_tokens_decoder()
    saved = config.get("added_tokens_decoder")
    if saved is not None:
        try:
            listed = {int(i): AddedToken(**{k: v for k, v in t.items() if k != "__type"})
                      for i, t in saved.items()}
        except (TypeError, ValueError, AttributeError):
            return False
        if listed != added:
            return False
    ids: dict[str, int] = {}
    base, top = tok.get_vocab_size(with_added_tokens=False), -1
    for index, token in sorted(added.items()):  # the Rust AddedVocabulary's id rule
        known = ids.get(token.content, tok.model.token_to_id(token.content))
        new = known if known is not None else (top + 1 if top >= base else base)
        if new != index or token.content in ids:
            return False
        ids[token.content], top = index, max(top, index)
    by_content = {t.content: t for t in added.values()}
    return all(by_content.get(s) == AddedToken(s, special=True) for s in specials)


def _routed_elsewhere(folder: Path, config: Mapping[str, Any], family: str) -> bool:
    """Whether AutoTokenizer would pick another class than tokenizer_config's for the folder."""
    if any(k in config for k in _REFUSED_KEYS) or (folder / "added_tokens.json").exists():
        return True
    if any(fnmatch.fnmatch(str(folder).lower(), p) for p in _BACKEND_IDS):
        return True
    if (folder / "additional_chat_templates").is_dir():
        return True  # several templates: transformers keeps a dict of them
    if not (folder / "config.json").exists():
        return False
    model = json_object(folder / "config.json")
    kind = None if model is None else model.get("model_type")
    return not isinstance(kind, str) or kind not in _MODEL_TYPES[family]


def chat_template_of(folder: Path, config: Mapping[str, Any]) -> tuple[bool, str | None]:
    """(whether reproduced, the template transformers' tokenizer reads): chat_template.json is
    the processor's, not the tokenizer's; a list of named templates is not reproduced."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        try:
            return True, read_bounded(jinja, _TEMPLATE_BYTES).decode("utf-8")
        except (BadInputError, UnicodeDecodeError):
            return False, None
    template = config.get("chat_template")
    return template is None or isinstance(template, str), template


# settings read here, and the types transformers' own code handles them as
_FLAGS = ("clean_up_tokenization_spaces", "split_special_tokens", "do_lower_case",
          "tokenize_chinese_chars",
          "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output")


def _settings_fit(config: Mapping[str, Any]) -> bool:
    """Whether every setting this module reads has a type it reads as transformers does
    (anything else is transformers' to accept or refuse)."""
    def whole(key: str) -> bool:
        value = config.get(key)
        return value is None or (isinstance(value, int) and not isinstance(value, bool))

    names = config.get("model_input_names")
    return (whole("model_max_length") and whole("max_len")
            and all(isinstance(config.get(k, False), bool) for k in _FLAGS)
            and config.get("strip_accents") in (None, True, False)
            and all(config.get(k) in (None, "left", "right")
                    for k in ("padding_side", "truncation_side"))
            and (names is None or (isinstance(names, list)
                                   and all(isinstance(n, str) for n in names))))


def read_lean_tokenizer(folder: Path, *, own_folder: bool = False) -> LeanTokenizer | None:
    """The tokenizer of ``folder`` as transformers 5 loads it, for the classes in
    :data:`CLASSES`; None for any folder whose tokenizer this does not reproduce exactly,
    including an unreadable or damaged ``tokenizer.json`` or config (never raises for those:
    the caller then loads it with transformers, which reports the damage in its own words).
    ``own_folder``: ragdesk made the folder, and may keep a compact copy of the file there
    (:mod:`ragdesk.core.compact_tokenizer`)."""
    config = json_object(folder / "tokenizer_config.json")
    if config is None or not (folder / "tokenizer.json").is_file():
        return None
    cls = CLASSES.get(str(config.get("tokenizer_class")))
    if cls is None or not _settings_fit(config) or _routed_elsewhere(folder, config, cls.family):
        return None
    specials = _special_tokens(cls, config, folder)
    known_template, template = chat_template_of(folder, config)
    if specials is None or not known_template:
        return None
    if cls is BERT and None in (specials[0]["cls_token"], specials[0]["sep_token"]):
        return None  # BertTokenizer then falls back to ids 2 and 3 in its post-processor
    try:
        tok = read_tokenizer_file(folder / "tokenizer.json", keep_compact=own_folder)
    except Exception as exc:  # the Rust reader raises plain Exceptions for damaged files
        log.info("%s/tokenizer.json is unreadable (%s); using transformers", folder, exc)
        return None
    named, extra = specials
    listed = list(dict.fromkeys([t for t in named.values() if t is not None] + extra))
    if not take_class_pipeline(tok, class_pipeline(cls, config, named)) \
            or not _added_tokens_kept(tok, config, listed):
        log.info("%s differs from what transformers builds; using transformers", folder)
        return None
    return LeanTokenizer(tok, cls, config, named, extra, template, folder)


class LeanTokenizer:
    """What ragdesk uses of transformers' ``TokenizersBackend`` (``PreTrainedTokenizerFast``),
    with its results, over the Rust tokenizer. Like transformers, each call sets the backend's
    truncation and padding; here under a lock, so that threads may share an instance."""

    def __init__(self, tok: Tokenizer, cls: TokenizerClass, config: Mapping[str, Any],
                 named: dict[str, str | None], extra: list[str], chat_template: str | None,
                 folder: Path) -> None:
        self._tok = tok
        self._lock = threading.Lock()
        self._named = named
        self._extra = extra
        self.chat_template = chat_template
        self.name_or_path = str(folder)
        file_padding, file_truncation = tok.padding, tok.truncation
        self.padding_side: str = config.get("padding_side") or (
            file_padding["direction"] if file_padding else cls.padding_side)
        self.truncation_side: str = config.get("truncation_side") or (
            file_truncation["direction"] if file_truncation else "right")
        length = config["model_max_length"] if "model_max_length" in config \
            else config.get("max_len")
        self.model_max_length: int = VERY_LARGE_INTEGER if length is None else int(length)
        self.model_input_names = list(config.get("model_input_names", cls.model_input_names))
        self.clean_up_tokenization_spaces = bool(config.get("clean_up_tokenization_spaces", False))
        self._clean_up_bpe = bool(config.get(
            "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output", False))
        self.split_special_tokens = bool(config.get("split_special_tokens", False))
        tok.encode_special_tokens = self.split_special_tokens
        if cls is BERT:  # BertTokenizer writes its own, whatever the file holds
            cls_, sep = str(named["cls_token"]), str(named["sep_token"])
            tok.post_processor = processors.TemplateProcessing(
                single=f"{cls_}:0 $A:0 {sep}:0", pair=f"{cls_}:0 $A:0 {sep}:0 $B:1 {sep}:1",
                special_tokens=[(cls_, self._id(cls_)), (sep, self._id(sep))])
        elif tok.post_processor is None:  # transformers' update_post_processor, no bos/eos
            tok.post_processor = processors.TemplateProcessing(
                single="$A:0", pair="$A:0 $B:1", special_tokens=[])

    def _id(self, token: str | None) -> int | None:
        if token is None:
            return None
        index = self._tok.token_to_id(token)
        return index if index is not None else self.unk_token_id

    @property
    def backend_tokenizer(self) -> Tokenizer:
        return self._tok

    @property
    def bos_token(self) -> str | None:
        return self._named["bos_token"]

    @property
    def eos_token(self) -> str | None:
        return self._named["eos_token"]

    @property
    def pad_token(self) -> str | None:
        return self._named["pad_token"]

    @property
    def unk_token(self) -> str | None:
        return self._named["unk_token"]

    @property
    def bos_token_id(self) -> int | None:
        return self._id(self.bos_token)

    @property
    def eos_token_id(self) -> int | None:
        return self._id(self.eos_token)

    @property
    def pad_token_id(self) -> int | None:
        return self._id(self.pad_token)

    @property
    def unk_token_id(self) -> int | None:
        unk = self.unk_token
        return None if unk is None else self._tok.token_to_id(unk)

    @property
    def special_tokens_map(self) -> dict[str, str]:
        return {k: v for k, v in self._named.items() if v is not None}

    @property
    def all_special_tokens(self) -> list[str]:
        return list(dict.fromkeys([*self.special_tokens_map.values(), *self._extra]))

    @property
    def all_special_ids(self) -> list[int | None]:
        return [self._id(t) for t in self.all_special_tokens]

    @property
    def added_tokens_decoder(self) -> dict[int, AddedToken]:
        return self._tok.get_added_tokens_decoder()

    def get_vocab(self) -> dict[str, int]:
        return self._tok.get_vocab(with_added_tokens=True)

    def __len__(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def convert_ids_to_tokens(self, ids: int | Sequence[int], skip_special_tokens: bool = False
                              ) -> str | list[str | None] | None:
        if isinstance(ids, int):
            return self._tok.id_to_token(ids)
        skip = set(self.all_special_ids) if skip_special_tokens else set()
        return [self._tok.id_to_token(int(i)) for i in ids if int(i) not in skip]

    def __call__(self, text: str | list[str], text_pair: str | list[str] | None = None, *,
                 add_special_tokens: bool = True, padding: bool | str = False,
                 truncation: bool | str | None = None, max_length: int | None = None
                 ) -> dict[str, Any]:
        """transformers' ``__call__`` for text (no tensors, offsets or overflow)."""
        pad, trunc, max_length = self._strategies(padding, truncation, max_length)
        batched = isinstance(text, (list, tuple))
        if batched:
            if isinstance(text_pair, str) or (text_pair is not None
                                              and len(text) != len(text_pair)):
                raise ValueError("text_pair must be a list as long as text")
            inputs: list[Any] = list(zip(text, text_pair, strict=True)) if text_pair is not None \
                else list(text)
        else:  # transformers' `if text_pair`: an empty second text is no pair at all
            inputs = [(text, text_pair)] if text_pair else [text]
        with self._lock:  # the backend's settings are the call's until it has encoded
            self._set_truncation_and_padding(pad, trunc, max_length)
            encodings = self._tok.encode_batch(inputs, add_special_tokens=add_special_tokens)
        out: dict[str, Any] = {"input_ids": [e.ids for e in encodings]}
        if "token_type_ids" in self.model_input_names:
            out["token_type_ids"] = [e.type_ids for e in encodings]
        if "attention_mask" in self.model_input_names:
            out["attention_mask"] = [e.attention_mask for e in encodings]
        return out if batched else {k: v[0] for k, v in out.items()}

    def _strategies(self, padding: bool | str, truncation: bool | str | None,
                    max_length: int | None) -> tuple[str, str, int | None]:
        """transformers' ``_get_padding_truncation_strategies`` as strategy names."""
        if max_length is not None and padding is False and truncation is None:
            truncation = "longest_first"  # max_length alone truncates
        pad = "longest" if padding is True else "do_not_pad" if padding is False else padding
        trunc = ("longest_first" if truncation is True else
                 "do_not_truncate" if truncation in (False, None) else str(truncation))
        if pad not in ("longest", "max_length", "do_not_pad") or trunc not in (
                "longest_first", "only_first", "only_second", "do_not_truncate"):
            raise ValueError(f"unknown padding {padding!r} or truncation {truncation!r}")
        if max_length is None:
            unlimited = self.model_max_length > LARGE_INTEGER
            if pad == "max_length":
                max_length = None if unlimited else self.model_max_length
                pad = "do_not_pad" if unlimited else pad
            if trunc != "do_not_truncate":
                trunc, max_length = ("do_not_truncate", max_length) if unlimited \
                    else (trunc, self.model_max_length)
        if pad != "do_not_pad" and (self.pad_token is None or (self.pad_token_id or 0) < 0):
            raise ValueError("Asking to pad but the tokenizer does not have a padding token.")
        return pad, trunc, max_length

    def _set_truncation_and_padding(self, pad: str, trunc: str, max_length: int | None) -> None:
        tok = self._tok
        if trunc == "do_not_truncate":
            if tok.truncation is not None:
                tok.no_truncation()
        else:
            target: dict[str, Any] = {"max_length": max_length, "stride": 0,
                                      "strategy": trunc, "direction": self.truncation_side}
            current = tok.truncation
            if current is None or {k: current.get(k) for k in target} != target:
                tok.enable_truncation(**target)
        if pad == "do_not_pad":
            if tok.padding is not None:
                tok.no_padding()
        else:
            wanted = {"length": max_length if pad == "max_length" else None,
                      "direction": self.padding_side, "pad_id": self.pad_token_id,
                      "pad_token": self.pad_token, "pad_type_id": 0, "pad_to_multiple_of": None}
            if tok.padding != wanted:
                tok.enable_padding(**wanted)

    def decode(self, token_ids: int | Sequence[int] | Sequence[Sequence[int]],
               skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool | None = None) -> str | list[str]:
        ids: Any = token_ids.tolist() if hasattr(token_ids, "tolist") else token_ids
        if isinstance(ids, (list, tuple)) and ids and isinstance(ids[0], (list, tuple)):
            return [self._decode(s, skip_special_tokens, clean_up_tokenization_spaces)
                    for s in ids]
        return self._decode([ids] if isinstance(ids, int) else ids, skip_special_tokens,
                            clean_up_tokenization_spaces)

    def batch_decode(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = False,
                     clean_up_tokenization_spaces: bool | None = None) -> list[str]:
        seqs: Any = sequences.tolist() if hasattr(sequences, "tolist") else sequences
        if len(seqs) == 0:
            return []
        out = self.decode(seqs, skip_special_tokens, clean_up_tokenization_spaces)
        return [out] if isinstance(out, str) else out

    def _decode(self, ids: Sequence[int], skip_special_tokens: bool,
                clean_up: bool | None) -> str:
        text: str = self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)
        clean_up = self.clean_up_tokenization_spaces if clean_up is None else clean_up
        # transformers 5 skips the clean-up, which was written for WordPiece, for BPE models
        if clean_up and (type(self._tok.model).__name__ != "BPE" or self._clean_up_bpe):
            for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                         (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"),
                         (" 're", "'re")):
                text = text.replace(a, b)
        return text

    def apply_chat_template(self, conversation: Sequence[Any], *, tokenize: bool = False,
                            add_generation_prompt: bool = False,
                            tools: list[dict[str, Any]] | None = None,
                            documents: list[dict[str, Any]] | None = None,
                            chat_template: str | None = None, return_dict: bool = True,
                            **kwargs: Any) -> Any:
        """transformers' rendering (utils/chat_template_utils.py); not its function-to-schema
        tools, continue_final_message, assistant masks or control-token sanitizing."""
        for unsupported in ("continue_final_message", "sanitize_control_tokens",
                            "return_assistant_tokens_mask"):
            if kwargs.pop(unsupported, False):
                raise NotImplementedError(f"{unsupported} needs transformers")
        template = chat_template if chat_template is not None else self.chat_template
        if template is None:
            raise ValueError("Cannot use chat template functions because tokenizer.chat_template "
                             "is not set and no template argument was passed!")
        if len(conversation) == 0:
            raise ValueError("Cannot apply chat template to an empty conversation.")
        encode = {k: kwargs.pop(k) for k in ("padding", "truncation", "max_length") if k in kwargs}
        batched = isinstance(conversation[0], (list, tuple))
        chats = list(conversation) if batched else [conversation]
        rendered = [render_chat(template, chat, tools, documents, add_generation_prompt,
                            {**self.special_tokens_map, **kwargs}) for chat in chats]
        text: str | list[str] = rendered if batched else rendered[0]
        if not tokenize:
            return text
        out = self(text, add_special_tokens=False, **encode)
        return out if return_dict else out["input_ids"]
