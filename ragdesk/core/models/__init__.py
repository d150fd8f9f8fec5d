"""Model packs and model loading: paper checkpoints from the hub, local folders, GGUF files and
the offline starter pack. Importing this package loads no ML library; loading a model does."""

from __future__ import annotations

from ragdesk.core.devices import select_device
from ragdesk.core.models.download import download_pack, download_repos, offline_reason
from ragdesk.core.models.imports import import_pack
from ragdesk.core.models.loading import (
    GeneratorParts,
    load_generator,
    load_generator_parts,
    load_passage_encoder,
    load_question_encoder,
)
from ragdesk.core.models.packs import (
    BUILTIN_PACKS,
    PackSpec,
    PackStatus,
    PartStatus,
    check_pack_matches_snapshot,
    choose_pack,
    get_pack,
    list_packs,
    pack_status,
    packs_matching,
    register_pack,
    remove_pack,
)
from ragdesk.core.models.refs import ModelInfo, ResolvedRef, inspect_model, resolve_ref
from ragdesk.core.models.starter import ensure_starter_snapshot
from ragdesk.core.pack_choice import chosen_pack

__all__ = [
    "BUILTIN_PACKS",
    "GeneratorParts",
    "ModelInfo",
    "PackSpec",
    "PackStatus",
    "PartStatus",
    "ResolvedRef",
    "check_pack_matches_snapshot",
    "choose_pack",
    "chosen_pack",
    "download_pack",
    "download_repos",
    "ensure_starter_snapshot",
    "get_pack",
    "import_pack",
    "inspect_model",
    "list_packs",
    "load_generator",
    "load_generator_parts",
    "load_passage_encoder",
    "load_question_encoder",
    "offline_reason",
    "pack_status",
    "packs_matching",
    "register_pack",
    "remove_pack",
    "resolve_ref",
    "select_device",
]
