"""The question encoder and the BART generator taken out of a RAG checkpoint.

``RagSequenceForGeneration`` / ``RagTokenForGeneration`` save one folder: a ``config.json``
with ``question_encoder`` and ``generator`` sub-configs, safetensors weights under the
prefixes ``rag.question_encoder.`` and ``rag.generator.`` (``question_encoder.`` /
``generator.`` for a bare ``RagModel``), and the tokenizers in ``question_encoder_tokenizer/``
and ``generator_tokenizer/``. ragdesk runs its own retrieval and decoding, so it loads the two
parts as plain ``DPRQuestionEncoder`` and ``BartForConditionalGeneration`` models, reading
only the tensors each part needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.core.errors import MissingModelError
from ragdesk.core.models.refs import safetensors_files

if TYPE_CHECKING:
    import torch

QUESTION_ENCODER = "question_encoder"
GENERATOR = "generator"
_PREFIXES = {
    QUESTION_ENCODER: ("rag.question_encoder.", "question_encoder."),
    GENERATOR: ("rag.generator.", "generator."),
}
TOKENIZER_DIRS = {QUESTION_ENCODER: "question_encoder_tokenizer", GENERATOR: "generator_tokenizer"}


def read_part_state_dict(folder: Path, part: str) -> dict[str, torch.Tensor]:
    """The tensors of one part with the part's prefix stripped, read from safetensors only."""
    from safetensors import safe_open

    prefixes = _PREFIXES[part]
    state: dict[str, torch.Tensor] = {}
    for file in safetensors_files(folder):
        try:
            with safe_open(str(file), framework="pt") as f:
                for key in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                    for prefix in prefixes:
                        if key.startswith(prefix):
                            state[key[len(prefix):]] = f.get_tensor(key)
                            break
        except MissingModelError:
            raise
        except Exception as exc:
            raise MissingModelError(
                f"The weights file {file} is damaged or not a safetensors file ({exc}).",
                "Download or copy the model again.") from exc
    if not state:
        raise MissingModelError(
            f"{folder} is a RAG checkpoint without {part.replace('_', ' ')} weights "
            f"(no tensors under {prefixes[0]!r}).")
    return state


def _from_state_dict(cls: Any, config: Any, state: dict[str, torch.Tensor], folder: Path,
                     part: str, dtype: torch.dtype | None) -> Any:
    try:
        model, info = cls.from_pretrained(None, config=config, state_dict=state, dtype=dtype,
                                          output_loading_info=True, trust_remote_code=False)
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise MissingModelError(
            f"The {part.replace('_', ' ')} in {folder} could not be loaded: {exc}") from exc
    problems = sorted(info.get("missing_keys") or []) + sorted(info.get("mismatched_keys") or [])
    if problems:
        shown = ", ".join(str(p) for p in problems[:3])
        raise MissingModelError(
            f"The {part.replace('_', ' ')} in {folder} is incomplete or damaged: "
            f"{len(problems)} weights are missing or have the wrong shape ({shown}...).",
            "Download or copy the model again.")
    return model.eval()


def load_rag_part(folder: Path, part: str, *, dtype: torch.dtype | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) of the question encoder or of the generator of a RAG checkpoint."""
    import torch
    from transformers import (
        AutoTokenizer,
        BartForConditionalGeneration,
        DPRQuestionEncoder,
        RagConfig,
    )

    try:
        config = RagConfig.from_pretrained(str(folder), trust_remote_code=False)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MissingModelError(f"{folder} has an unreadable RAG config: {exc}") from exc
    sub = getattr(config, part)
    if part == QUESTION_ENCODER:
        if sub.model_type != "dpr":
            raise MissingModelError(
                f"{folder}: ragdesk loads RAG checkpoints with a DPR question encoder, not "
                f"{sub.model_type!r}.")
        cls: Any = DPRQuestionEncoder
    else:
        if sub.model_type != "bart":
            raise MissingModelError(
                f"{folder}: ragdesk loads RAG checkpoints with a BART generator, not "
                f"{sub.model_type!r}.")
        cls = BartForConditionalGeneration
    tok_dir = folder / TOKENIZER_DIRS[part]
    if not tok_dir.is_dir():
        raise MissingModelError(f"{folder} is a RAG checkpoint without {tok_dir.name}/.")
    try:
        # False, never the default None: with None, a folder whose config has an auto_map
        # makes transformers ask on stdin whether to run its .py files (tests/test_remote_code.py).
        tokenizer = AutoTokenizer.from_pretrained(str(tok_dir), trust_remote_code=False)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MissingModelError(f"The tokenizer in {tok_dir} could not be loaded: {exc}") from exc
    state = read_part_state_dict(folder, part)
    model = _from_state_dict(cls, sub, state, folder, part, dtype or torch.float32)
    return model, tokenizer
