"""Causal LMs from ``.gguf`` files, through transformers' GGUF loader.

transformers reads a GGUF by parsing its whole metadata (for Gemma 3, 262,144 vocabulary
strings) and dequantizing every tensor into float32. For the starter pack's 253 MB Gemma 3
270M file that took minutes of CPU time here, mostly building the tokenizer. So the first load
also writes what it built, in ordinary Hugging Face layout (``config.json``, float32
``model.safetensors``, ``tokenizer.json``), to a folder next to the file named
``<file>.hf/``; later loads read that folder in about a second. The folder records the size
and modification time of the GGUF it came from and is rebuilt when they change. If the folder
cannot be written the model still loads, just slowly every time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from ragdesk.core.errors import MissingModelError, RagdeskError
from ragdesk.core.file_stamps import file_stamp
from ragdesk.core.models.fast_tokenizers import load_tokenizer
from ragdesk.core.models.mapped_weights import load_mapped_causal_lm
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    LoadedLM: TypeAlias = tuple[PreTrainedModel, PreTrainedTokenizerBase]

log = logging.getLogger(__name__)

SOURCE_FILE = "ragdesk-gguf-source.json"


def cache_dir_for(gguf_path: Path) -> Path:
    return gguf_path.with_name(gguf_path.name + ".hf")


def _source_stamp(gguf_path: Path) -> dict[str, object]:
    size, mtime_ns = file_stamp(gguf_path)
    return {"file": gguf_path.name, "size": size, "mtime_ns": mtime_ns}


def cache_is_valid(gguf_path: Path) -> bool:
    cache = cache_dir_for(gguf_path)
    try:
        recorded = json.loads((cache / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(recorded == _source_stamp(gguf_path) and (cache / "model.safetensors").is_file()
                and (cache / "config.json").is_file())


class _PlainNumpy:
    """numpy, except that ``memmap`` hands back a plain ``ndarray`` view of the map.

    gguf's reader slices its memmap a few million times while parsing Gemma 3's 262,144
    vocabulary strings, and every slice of a ``np.memmap`` runs the subclass's Python
    ``__getitem__``/``__array_finalize__``: that was half of the parse. The view reads the
    same mapped bytes (read-only), so nothing else changes.
    """

    def __init__(self, np_module: ModuleType) -> None:
        self._np = np_module

    def __getattr__(self, name: str) -> object:
        return getattr(self._np, name)

    def memmap(self, *args: object, **kwargs: object) -> object:
        return self._np.memmap(*args, **kwargs).view(self._np.ndarray)


_reader_lock = threading.Lock()


@contextlib.contextmanager
def _one_gguf_parse() -> Iterator[None]:
    """Parse the GGUF once for the tokenizer, the config and the weights.

    transformers builds a new ``GGUFReader`` (whole metadata, vocabulary included) for each
    of the three, and decodes every metadata value again each time; the reader only reads,
    so one instance per file serves all of them, and the metadata-only result (asked for by
    the tokenizer and the config) is decoded once and copied. Patched for the duration of
    one conversion, under a lock (a process converts one GGUF at a time anyway).
    """
    import copy
    import importlib

    # Untyped modules whose attributes are replaced for the duration: Any at this boundary.
    gguf: Any = importlib.import_module("gguf")
    reader_mod: Any = importlib.import_module("gguf.gguf_reader")
    hf_gguf: Any = importlib.import_module("transformers.modeling_gguf_pytorch_utils")

    original_cls = gguf.GGUFReader
    original_np = reader_mod.np
    original_load = hf_gguf.load_gguf_checkpoint
    readers: dict[str, object] = {}
    metadata: dict[str, object] = {}

    def cached_reader(path: str | os.PathLike[str], mode: str = "r") -> object:
        key = f"{os.fspath(path)}|{mode}"
        if key not in readers:
            readers[key] = original_cls(path, mode)
        return readers[key]

    def cached_load(path: str | os.PathLike[str], return_tensors: bool = False,
                    *args: object, **kwargs: object) -> object:
        if return_tensors or args or kwargs:
            return original_load(path, return_tensors, *args, **kwargs)
        key = os.fspath(path)
        if key not in metadata:
            metadata[key] = original_load(path, False)
        return copy.deepcopy(metadata[key])  # callers may change what they get

    with _reader_lock:
        gguf.GGUFReader = cached_reader
        reader_mod.np = _PlainNumpy(original_np)
        hf_gguf.load_gguf_checkpoint = cached_load
        try:
            yield
        finally:
            gguf.GGUFReader = original_cls
            reader_mod.np = original_np
            hf_gguf.load_gguf_checkpoint = original_load
            readers.clear()
            metadata.clear()


def _load_from_gguf(gguf_path: Path, dtype: torch.dtype, prog: Progress,
                    cancel: CancelToken | None) -> LoadedLM:
    with _one_gguf_parse():
        return _load_from_gguf_once(gguf_path, dtype, prog, cancel)


def _load_from_gguf_once(gguf_path: Path, dtype: torch.dtype, prog: Progress,
                         cancel: CancelToken | None) -> LoadedLM:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    try:
        prog.set(0, "reading the GGUF tokenizer (slow the first time)")
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name,
                                                  trust_remote_code=False)
        if cancel is not None:
            cancel.raise_if_cancelled()
        prog.set(1, "dequantizing the GGUF weights")
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype,
                                                     trust_remote_code=False)
    except RagdeskError:
        raise
    except Exception as exc:  # a damaged file can fail anywhere in the parser
        raise MissingModelError(
            f"The GGUF file {gguf_path} could not be loaded as a causal language model: {exc}",
            "ragdesk loads decoder-only GGUF models that transformers supports (Llama, Gemma, "
            "Qwen, Mistral, GPT-2, ...); check that the file is complete.") from exc
    if getattr(model.config, "is_encoder_decoder", False):
        raise MissingModelError(f"{gguf_path} holds an encoder-decoder model; ragdesk loads "
                                "GGUF files only as decoder-only generators.")
    return model.eval(), tokenizer


def _write_cache(gguf_path: Path, model: PreTrainedModel,
                 tokenizer: PreTrainedTokenizerBase) -> None:
    """Save the converted model next to the GGUF, atomically (staging folder + rename)."""
    from safetensors.torch import save_model

    cache = cache_dir_for(gguf_path)
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{cache.name}.", dir=gguf_path.parent))
    except OSError as exc:
        log.warning("Not caching the converted GGUF (%s cannot be written: %s); it will be "
                    "converted again next time.", gguf_path.parent, exc)
        return
    try:
        config = model.config.to_dict()
        # The weights are dequantized float32 now; the GGUF quantizer must not come back.
        config.pop("quantization_config", None)
        (staging / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        model.generation_config.save_pretrained(str(staging))
        save_model(model, str(staging / "model.safetensors"), metadata={"format": "pt"})
        tokenizer.save_pretrained(str(staging))
        (staging / SOURCE_FILE).write_text(json.dumps(_source_stamp(gguf_path)),
                                           encoding="utf-8")
        if cache.exists():
            shutil.rmtree(cache)
        os.replace(staging, cache)
    except OSError as exc:
        log.warning("Could not cache the converted GGUF in %s: %s", cache, exc)
        shutil.rmtree(staging, ignore_errors=True)


# A conversion whose result the caller asked to keep (``keep=True``: the starter setup, whose
# first question follows at once), handed to the next load of the same file and dtype in this
# process instead of reading the converted copy back (seconds for Gemma's 262k-word
# tokenizer and 1 GB of float32 weights). Taken by that load, so it is never kept twice.
# (stamp, model, tokenizer) by (file, dtype)
_kept: dict[tuple[str, str],
            tuple[dict[str, object], PreTrainedModel, PreTrainedTokenizerBase]] = {}
_kept_lock = threading.Lock()


def _kept_key(gguf_path: Path, dtype: torch.dtype) -> tuple[str, str]:
    return str(gguf_path.resolve()), str(dtype)


def _read_converted(cache: Path, answering: bool) -> PreTrainedModel:
    if answering:
        from ragdesk.core.models.lean_causal_lm import load_lean_causal_lm

        lean = load_lean_causal_lm(cache)
        if lean is not None:  # typed as the model it stands for (the engine reads it as one)
            return cast("PreTrainedModel", lean)
    return load_mapped_causal_lm(cache)


def load_gguf_causal_lm(
    gguf_path: Path,
    *,
    dtype: torch.dtype | None = None,
    use_cache: bool = True,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    keep: bool = False,
    on_loaded: Callable[[], None] | None = None,
    answering: bool = False,
) -> LoadedLM:
    """(model, tokenizer) of the causal LM in ``gguf_path``; see the module doc for the cache.

    ``keep``: also keep the result for the next load of this file in this process.
    ``on_loaded``: called once the model is in memory, before the converted copy is written
    (with ``keep``, the next load can start right then: it does not need the copy).
    ``answering``: the converted copy is read as a lean tree where the lean decoders
    reproduce its model (:mod:`.lean_causal_lm`: no transformers modeling import, no forward
    of its own)."""
    import torch

    dtype = dtype or torch.float32
    prog = Progress(3, f"loading {gguf_path.name}", progress)
    with _kept_lock:
        kept = _kept.pop(_kept_key(gguf_path, dtype), None)
    if kept is not None and kept[0] == _source_stamp(gguf_path):  # the same file, unchanged
        if keep:
            with _kept_lock:
                _kept[_kept_key(gguf_path, dtype)] = kept
        prog.set(3, f"loaded {gguf_path.name}")
        return kept[1], kept[2]
    if use_cache and cache_is_valid(gguf_path):
        cache = cache_dir_for(gguf_path)
        try:
            model = _read_converted(cache, answering)  # float32, as converted
            # the lean tree's companion: the tokenizer read without transformers
            lean = getattr(model, "lean_architecture", None) is not None
            tokenizer = load_tokenizer(cache, answering=lean, own_folder=True)
            prog.set(3, f"loaded {gguf_path.name}")
            if dtype == torch.float32:
                return model, tokenizer
            # transformers wraps ``to`` with functools.wraps, which its stubs cannot bind
            to: Callable[..., PreTrainedModel] = model.to
            return to(dtype), tokenizer
        except (OSError, ValueError, KeyError, TypeError, MissingModelError) as exc:
            log.warning("The converted copy %s is unusable (%s); converting the GGUF again.",
                        cache, exc)
    model, tokenizer = _load_from_gguf(gguf_path, dtype, prog, cancel)
    if keep:
        with _kept_lock:
            _kept[_kept_key(gguf_path, dtype)] = (_source_stamp(gguf_path), model, tokenizer)
    if on_loaded is not None:
        on_loaded()
    if use_cache:
        prog.set(2, "saving a converted copy for faster starts")
        _write_cache(gguf_path, model, tokenizer)
    prog.set(3, f"loaded {gguf_path.name}")
    return model, tokenizer
