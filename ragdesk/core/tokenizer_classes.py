"""What transformers 5's tokenizer classes build around a ``tokenizer.json``, for the classes
the lean tokenizer reads (Gemma, Qwen2, BERT): their special-token defaults, padding side and
input names, and the normalizer, pre-tokenizer, decoder and model options their ``__init__``
makes (transformers/models/*/tokenization_*.py). tests/core/test_lean_tokenizer.py checks
them against transformers' classes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers

QWEN2_PRETOKENIZE_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                           r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


@dataclasses.dataclass(frozen=True)
class TokenizerClass:
    """One transformers tokenizer class, as far as the lean tokenizer needs it."""

    family: str
    defaults: dict[str, str | None]  # the class __init__'s special-token defaults
    padding_side: str
    model_input_names: tuple[str, ...]


GEMMA = TokenizerClass(
    "gemma", {"unk_token": "<unk>", "bos_token": "<bos>", "eos_token": "<eos>",
              "pad_token": "<pad>", "mask_token": "<mask>"},
    "left", ("input_ids", "attention_mask"))
QWEN2 = TokenizerClass(
    "qwen2", {"unk_token": "<|endoftext|>", "bos_token": None, "eos_token": "<|endoftext|>",
              "pad_token": "<|endoftext|>"},
    "right", ("input_ids", "attention_mask"))
BERT = TokenizerClass(
    "bert", {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
             "cls_token": "[CLS]", "mask_token": "[MASK]"},
    "right", ("input_ids", "token_type_ids", "attention_mask"))
CLASSES = {"GemmaTokenizer": GEMMA, "GemmaTokenizerFast": GEMMA,
           "Qwen2Tokenizer": QWEN2, "Qwen2TokenizerFast": QWEN2,
           "BertTokenizer": BERT, "BertTokenizerFast": BERT}


def class_pipeline(cls: TokenizerClass, config: Mapping[str, Any],
                   specials: Mapping[str, str | None]) -> tuple[Any, Any, Any, dict[str, Any]]:
    """(normalizer, pre-tokenizer, decoder, model options) as the class's ``__init__`` builds
    them (transformers/models/*/tokenization_*.py)."""
    if cls is GEMMA:
        return (normalizers.Replace(" ", "▁"),
                pre_tokenizers.Split(" ", "merged_with_previous", invert=False),
                decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                   decoders.Fuse()]),
                {"type": "BPE", "dropout": None, "unk_token": str(specials.get("unk_token")),
                 "continuing_subword_prefix": None, "end_of_word_suffix": None,
                 "fuse_unk": True, "byte_fallback": True, "ignore_merges": False})
    if cls is QWEN2:
        prefix = config.get("add_prefix_space")
        return (normalizers.NFC(),
                pre_tokenizers.Sequence([
                    pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), "isolated", invert=False),
                    pre_tokenizers.ByteLevel(add_prefix_space=bool(prefix), use_regex=False)]),
                decoders.ByteLevel(),
                {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                 "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                 "ignore_merges": False})
    return (normalizers.BertNormalizer(
                clean_text=True, handle_chinese_chars=config.get("tokenize_chinese_chars", True),
                strip_accents=config.get("strip_accents"),
                lowercase=config.get("do_lower_case", True)),
            pre_tokenizers.BertPreTokenizer(), decoders.WordPiece(prefix="##"),
            {"type": "WordPiece", "unk_token": str(specials.get("unk_token")),
             "continuing_subword_prefix": "##", "max_input_chars_per_word": 100})


def take_class_pipeline(tok: Tokenizer, want: tuple[Any, Any, Any, dict[str, Any]]) -> bool:
    """Give ``tok`` the normalizer, pre-tokenizer and decoder the class builds, whatever the
    file holds (transformers does the same: a converted GGUF's Qwen2 file has no NFC
    normalizer, which Qwen2Tokenizer adds); False where the file's model (type or options)
    is not the one the class builds, which transformers would build anew."""
    normalizer, pre_tokenizer, decoder, model = want
    if type(tok.model).__name__ != model["type"]:
        return False
    if not all(getattr(tok.model, k, None) == v for k, v in model.items() if k != "type"):
        return False
    tok.normalizer, tok.pre_tokenizer, tok.decoder = normalizer, pre_tokenizer, decoder
    return True
