"""A tokenizer read straight from tokenizer.json against transformers' AutoTokenizer on the
same folder: a tiny Gemma tokenizer trained here (byte fallback, the starter's pipeline,
a chat template), no download."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.models.fast_tokenizers import load_tokenizer, read_tokenizer_json

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"]
BYTES = [f"<0x{i:02X}>" for i in range(256)]
TEMPLATE = ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n"
            "{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
            "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
TEXTS = ["Who wrote On the Origin of Species?", "  two  spaces\n\nand a\ttab ",
         "ünïcödé, 🦙 and ∑ fall back to bytes", "<bos>already special<eos>", "", " lead",
         "Answer: Charles Darwin", "<start_of_turn>user\nhi<end_of_turn>"]


@pytest.fixture(scope="module")
def gemma_folder(tiny_models: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers.models.gemma.tokenization_gemma import GemmaTokenizer

    bpe = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    bpe.normalizer = normalizers.Replace(" ", "▁")
    bpe.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    bpe.train_from_iterator([x for _, x in tiny_models.corpus[:400]], trainers.BpeTrainer(
        vocab_size=1200, special_tokens=SPECIALS + BYTES, show_progress=False))
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    # transformers annotates merges as list[str]; it hands them to tokenizers' BPE, which
    # takes (left, right) pairs
    tok = GemmaTokenizer(vocab=model["vocab"], merges=merges,  # type: ignore[arg-type]
                         additional_special_tokens=SPECIALS[5:])
    tok.chat_template = TEMPLATE
    folder = tmp_path_factory.mktemp("gemma-tok")
    tok.save_pretrained(str(folder))
    return folder


def _both(folder: Path) -> tuple[Any, Any]:
    from transformers import AutoTokenizer

    ref = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    got = read_tokenizer_json(folder)
    assert got is not None and type(got) is not type(ref)  # really the direct path
    return ref, got


def test_ids_and_decoding_equal_autotokenizers(gemma_folder: Path) -> None:
    ref, got = _both(gemma_folder)
    assert len(got) == len(ref) > 1000
    for text in TEXTS + [x for x in TEXTS[:3] for _ in range(2)]:
        for special in (True, False):
            want = ref(text, add_special_tokens=special)
            have = got(text, add_special_tokens=special)
            assert have["input_ids"] == want["input_ids"], (text, special)
            assert have["attention_mask"] == want["attention_mask"]
        ids = ref(text)["input_ids"]
        assert got.convert_ids_to_tokens(ids) == ref.convert_ids_to_tokens(ids)
        for skip in (True, False):
            assert got.decode(ids, skip_special_tokens=skip) == ref.decode(
                ids, skip_special_tokens=skip)
    assert any(t.startswith("<0x") for t in ref.convert_ids_to_tokens(ref(TEXTS[2])["input_ids"]))


def test_special_tokens_padding_and_chat_template(gemma_folder: Path) -> None:
    ref, got = _both(gemma_folder)
    for attr in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id",
                 "all_special_ids", "all_special_tokens", "padding_side", "truncation_side",
                 "model_input_names", "model_max_length", "chat_template"):
        assert getattr(got, attr) == getattr(ref, attr), attr
    assert got.padding_side == "left"  # Gemma's class default, not the plain class's "right"
    batch_ref = ref(TEXTS[:3], padding=True)
    batch_got = got(TEXTS[:3], padding=True)
    assert batch_got["input_ids"] == batch_ref["input_ids"]
    assert batch_got["attention_mask"] == batch_ref["attention_mask"]
    shortest = min(range(3), key=lambda i: sum(batch_ref["attention_mask"][i]))
    assert batch_ref["input_ids"][shortest][0] == ref.pad_token_id  # left padding is used
    msgs = [{"role": "user", "content": "Who wrote Hamlet? "}]
    for tokenize in (False, True):
        assert got.apply_chat_template(msgs, tokenize=tokenize, add_generation_prompt=True) \
            == ref.apply_chat_template(msgs, tokenize=tokenize, add_generation_prompt=True)


def test_other_classes_and_other_pipelines_go_through_autotokenizer(
        gemma_folder: Path, tiny_models: Any, tmp_path: Path) -> None:
    from tokenizers import Tokenizer, normalizers

    assert read_tokenizer_json(Path(tiny_models.gemma3)) is None  # a GPT-2 tokenizer
    assert type(load_tokenizer(Path(tiny_models.gemma3))).__name__ == "GPT2Tokenizer"
    # a Gemma tokenizer.json whose normalizer is not the class's: AutoTokenizer would
    # replace it, so reading the file as it is would tokenize differently
    odd = tmp_path / "odd"
    odd.mkdir()
    for f in gemma_folder.iterdir():
        (odd / f.name).write_bytes(f.read_bytes())
    tok = Tokenizer.from_file(str(odd / "tokenizer.json"))
    tok.normalizer = normalizers.Sequence([normalizers.Lowercase(),
                                           normalizers.Replace(" ", "▁")])
    tok.save(str(odd / "tokenizer.json"))
    assert read_tokenizer_json(odd) is None


def test_the_chat_template_is_the_one_transformers_reads(gemma_folder: Path,
                                                         tmp_path: Path) -> None:
    """chat_template.json is a processor's file: transformers' tokenizer does not read it,
    and neither does the direct reading (one definition: lean_tokenizer.chat_template_of)."""
    import shutil

    from transformers import AutoTokenizer

    folder = tmp_path / "with-json"
    shutil.copytree(gemma_folder, folder)
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    ref = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    got = read_tokenizer_json(folder)
    assert got is not None and ref.chat_template is None
    assert got.chat_template == ref.chat_template
