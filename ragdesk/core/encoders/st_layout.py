"""What a sentence-transformers folder applies around its transformer: prompts, pooling,
Dense layers and normalization, read from ``modules.json`` and its module folders."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.core.encoders.folders import read_json
from ragdesk.core.errors import BadInputError, MissingModelError
from ragdesk.core.safe_json import as_int, load_file_bounded

if TYPE_CHECKING:
    import torch

# sentence-transformers pooling modes ragdesk computes (Pooling's ``pooling_mode``)
POOLINGS = ("mean", "cls", "max", "lasttoken")
_LEGACY_POOLING_KEYS = {  # the boolean keys of older Pooling configs, in their order
    "pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken",
}
# Dense activations by the name sentence-transformers saves (the class's import path)
_ACTIVATIONS = {"Identity": "identity", "Tanh": "tanh", "ReLU": "relu", "GELU": "gelu",
                "Sigmoid": "sigmoid"}


@dataclass(frozen=True)
class Prompts:
    """Text put in front of questions and passages (``config_sentence_transformers.json``:
    retrieval models such as e5 were trained with "query: " / "passage: ")."""

    query: str = ""
    passage: str = ""

    def for_role(self, role: str) -> str:
        return self.query if role == "question" else self.passage


@dataclass
class SentenceHead:
    """What a sentence-transformers model applies after pooling: Dense layers (LaBSE and
    distiluse project 768 → 512 with one), then the encoder's normalization."""

    dense: list[Any] = field(default_factory=list)  # torch.nn.Sequential(Linear, activation)
    prompts: Prompts = Prompts()

    def apply(self, pooled: torch.Tensor) -> torch.Tensor:
        for layer in self.dense:
            layer.to(pooled.device)  # a no-op once there; the model may have moved
            pooled = layer(pooled)
        return pooled

    def save(self, folder: Path, first_idx: int) -> list[dict[str, object]]:
        """Write the Dense layers as sentence-transformers does; their ``modules.json`` rows."""
        from safetensors.torch import save_file

        rows = []
        for i, layer in enumerate(self.dense, first_idx):
            linear, act = layer[0], layer[1]
            sub = folder / f"{i}_Dense"
            sub.mkdir(exist_ok=True)
            (sub / "config.json").write_text(json.dumps({
                "in_features": linear.in_features, "out_features": linear.out_features,
                "bias": linear.bias is not None,
                "activation_function": f"torch.nn.{type(act).__name__}"}, indent=2))
            save_file({f"linear.{k}": v.detach().cpu().contiguous()
                       for k, v in linear.state_dict().items()},
                      str(sub / "model.safetensors"))
            rows.append({"idx": i, "name": str(i), "path": sub.name,
                         "type": "sentence_transformers.models.Dense"})
        return rows


@dataclass
class StLayout:
    pooling: str = "mean"
    normalize: bool = False
    dim: int | None = None  # the last Dense layer's width, when there is one
    head: SentenceHead = field(default_factory=SentenceHead)


def _unsupported(folder: Path, what: str) -> MissingModelError:
    return MissingModelError(
        f"{folder.name} is a sentence-transformers model with {what}, which ragdesk cannot "
        "compute; its vectors would differ from the model's own.",
        "ragdesk reads Transformer, Pooling (mean, cls, max, lasttoken), Dense and Normalize "
        "modules and the query/passage prompts.")


def read_st_layout(folder: Path) -> StLayout:
    """The modules after the transformer, read from ``modules.json`` (mean pooling when a
    folder has none, as sentence-transformers does); a module ragdesk cannot compute is
    refused by name rather than skipped."""
    layout = StLayout(head=SentenceHead(prompts=_read_prompts(folder)))
    modules_path = folder / "modules.json"
    if not modules_path.exists():
        return layout
    for i, (kind, rel) in enumerate(_read_modules(modules_path)):
        sub = folder / rel
        if kind == "Transformer" and i == 0:
            continue
        if layout.normalize or kind not in ("Pooling", "Dense", "Normalize"):
            raise _unsupported(folder, f"a {kind} module{' after Normalize' * layout.normalize}")
        if kind == "Pooling":
            layout.pooling = _read_pooling(folder, sub / "config.json")
        elif kind == "Dense":
            layout.head.dense.append(_read_dense(folder, sub))
            layout.dim = int(layout.head.dense[-1][0].out_features)
        else:
            layout.normalize = True
    return layout


def _read_modules(path: Path) -> list[tuple[str, str]]:
    """(class name, folder) of each module that ``modules.json`` lists."""
    hint = ('modules.json lists the modules in order, e.g. [{"idx": 0, "name": "0", "path": '
            '"", "type": "sentence_transformers.models.Transformer"}, ...].')
    modules = load_file_bounded(path, hint=hint)
    if not isinstance(modules, list) or not all(
            isinstance(m, dict) and isinstance(m.get("type", ""), str)
            and isinstance(m.get("path", ""), str) for m in modules):
        raise BadInputError("is not a sentence-transformers module list (a JSON list of "
                            'objects with a "type" and a "path" string).', path=path,
                            hint=hint)
    return [(m.get("type", "").rsplit(".", 1)[-1], m.get("path", "")) for m in modules]


def _read_pooling(folder: Path, path: Path) -> str:
    cfg = read_json(path) if path.exists() else {}
    mode = cfg.get("pooling_mode")
    if mode is None:
        modes = [m for key, m in _LEGACY_POOLING_KEYS.items() if cfg.get(key)]
        mode = modes if len(modes) > 1 else (modes or ["mean"])[0]
    if not isinstance(mode, str) or mode not in POOLINGS:
        raise _unsupported(folder, f"pooling {mode!r}")
    if cfg.get("include_prompt") is False:
        raise _unsupported(folder, "pooling that leaves out the prompt's tokens")
    return mode


def _read_dense(folder: Path, sub: Path) -> torch.nn.Sequential:
    import torch
    from safetensors.torch import load_file

    cfg = read_json(sub / "config.json")
    act = str(cfg.get("activation_function") or "Identity").rsplit(".", 1)[-1]
    if act not in _ACTIVATIONS or cfg.get("use_residual"):
        raise _unsupported(folder, f"a Dense layer with {act}"
                           f"{' and a residual' * bool(cfg.get('use_residual'))}")
    if not (sub / "model.safetensors").is_file():  # pytorch_model.bin is a pickle
        raise _unsupported(folder, "a Dense layer whose weights are not in safetensors")
    linear = torch.nn.Linear(as_int(cfg["in_features"]), as_int(cfg["out_features"]),
                             bias=bool(cfg.get("bias", True)))
    try:
        linear.load_state_dict({k.removeprefix("linear."): v
                                for k, v in load_file(str(sub / "model.safetensors")).items()})
    except (RuntimeError, OSError) as exc:
        raise MissingModelError(f"{sub} holds no usable Dense weights: {exc}") from exc
    return torch.nn.Sequential(linear, getattr(torch.nn, act)()).eval()


def _read_prompts(folder: Path) -> Prompts:
    """The query and passage prompts: "query", then the first non-empty of "document",
    "passage", "corpus" (as ``encode_query`` / ``encode_document`` choose), else the
    default prompt, which sentence-transformers' plain ``encode`` applies to everything."""
    path = folder / "config_sentence_transformers.json"
    cfg = read_json(path) if path.exists() else {}
    prompts = cfg.get("prompts") or {}
    if not isinstance(prompts, dict):
        raise MissingModelError(f"{path}: its prompts are not a JSON object.")
    default = str(prompts.get(cfg.get("default_prompt_name") or "", "") or "")
    passage = next((str(prompts[k]) for k in ("document", "passage", "corpus")
                    if prompts.get(k)), default)
    return Prompts(query=str(prompts.get("query") or default), passage=passage)
