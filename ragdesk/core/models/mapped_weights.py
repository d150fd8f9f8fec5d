"""A causal LM whose weights are the memory-mapped tensors of its ``model.safetensors``.

``from_pretrained`` maps the file too, but around it resolves the auto classes, checks and
reports every key and builds the model before filling it, which a one-shot ``ask`` pays for
at every start. Here the model is built with its initialisation switched
off (its parameters are untouched allocations, which the file's tensors then replace; its
buffers, such as the rotary frequencies, are computed as usual), and the file's tensors are
assigned in place: pages are read from the file as the weights are used, and a bfloat16 copy
(the lean decoder's fast path) is the one copy made. Tied weights (Gemma 3's output layer is
its embedding, saved once) are tied as ``from_pretrained`` ties them.
tests/core/models/test_mapped_weights.py holds the result equal to ``from_pretrained``'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.core.errors import MissingModelError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

WEIGHTS_FILE = "model.safetensors"


def mapped_tensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a safetensors file, as views of the mapped file (nothing copied)."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as fh:
        # a safe_open handle is not iterable itself
        return {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118


def load_mapped_causal_lm(folder: Path) -> PreTrainedModel:
    """The causal LM in ``folder`` (config.json, one ``model.safetensors``,
    optionally generation_config.json), in eval mode, its weights mapped from the file."""
    from transformers import AutoConfig, GenerationConfig
    from transformers.initialization import no_init_weights
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    config = AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
    try:
        # a lazy mapping, which its stubs type as one of tuples
        cls: Any = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    except KeyError as exc:
        raise MissingModelError(f"{folder} holds a {config.model_type!r} model, not a causal "
                                "language model.") from exc
    with no_init_weights():
        model: PreTrainedModel = cls(config)
    state = mapped_tensors(folder / WEIGHTS_FILE)
    text_config = config.get_text_config()
    if getattr(text_config, "tie_word_embeddings", False):
        for target, source in dict(getattr(model, "_tied_weights_keys", None) or {}).items():
            if source not in state and target in state:
                state[source] = state[target]
            elif target not in state and source in state:
                state[target] = state[source]
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    if missing or unexpected:
        raise MissingModelError(
            f"{folder / WEIGHTS_FILE} does not hold the weights of its config's model "
            f"({len(missing)} missing, {len(unexpected)} unexpected, e.g. "
            f"{(list(missing) + list(unexpected))[0]}).")
    model.tie_weights()
    if (folder / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(str(folder),
                                                                   trust_remote_code=False)
    model.eval()  # in place (transformers leaves its return untyped)
    return model
