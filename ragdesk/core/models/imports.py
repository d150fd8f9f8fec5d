"""``ragdesk models import``: register local models as a custom pack, after checking them.

How one PATH maps to the pack's parts (options fill in or override the rest):

=============================================  =========================================
PATH holds                                     it becomes
=============================================  =========================================
a RAG checkpoint (``model_type: rag``)         question encoder and generator
a DPR question encoder                         question encoder
a DPR context encoder                          passage encoder
a sentence-transformers / BERT-like encoder    question encoder and passage encoder
a seq2seq LM (BART, T5, ...) or a causal LM    generator
a ``.gguf`` file                               generator (decoder-only)
=============================================  =========================================

A pack needs a question encoder and a generator. The passage encoder is only needed to build
snapshots for the pack and may be left out for DPR packs (their snapshots name their own
passage encoder). Every part is validated by loading it exactly as ``ask`` will and running it
once on a short input; nothing is registered unless all parts pass. With ``copy=True`` the
local parts are copied under ``<data dir>/models/<name>/`` first (and deleted again by
``models remove``); otherwise they are used where they are.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.core.atomic import fsync_dir
from ragdesk.core.encoders import EncoderInfo, TextEncoder, passage_inputs
from ragdesk.core.errors import (
    AlreadyExistsError,
    BadInputError,
    DiskFullError,
    EncoderMismatchError,
    MissingModelError,
    RagdeskError,
    is_disk_full,
)
from ragdesk.core.models import loading, pack_copies
from ragdesk.core.models.packs import (
    KIND_CUSTOM,
    PackSpec,
    check_pack_name,
    register_pack,
)
from ragdesk.core.models.refs import (
    KIND_CAUSAL,
    KIND_DPR_CONTEXT,
    KIND_DPR_QUESTION,
    KIND_GGUF,
    KIND_RAG,
    KIND_SEQ2SEQ,
    KIND_ST,
    ModelInfo,
    inspect_model,
    resolve_ref,
)
from ragdesk.core.options import check_mode
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.safe_paths import link_problem

if TYPE_CHECKING:
    from ragdesk.core.catalog import Catalog
    from ragdesk.core.paths import DataDir

log = logging.getLogger(__name__)

PROBE_QUESTION = "who wrote the play hamlet?"
PROBE_PASSAGE = ("Hamlet", "Hamlet is a tragedy written by William Shakespeare.")


def roles_of(info: ModelInfo) -> list[str]:
    """Which pack parts a model of this kind provides."""
    return {
        KIND_RAG: ["question_encoder", "generator"],
        KIND_DPR_QUESTION: ["question_encoder"],
        KIND_DPR_CONTEXT: ["passage_encoder"],
        KIND_ST: ["question_encoder", "passage_encoder"],
        KIND_SEQ2SEQ: ["generator"],
        KIND_CAUSAL: ["generator"],
        KIND_GGUF: ["generator"],
    }[info.kind]


def _check_vectors(vectors: Any, dim: int, what: str) -> None:
    import numpy as np

    if vectors.shape[-1] != dim or not np.isfinite(vectors).all():
        raise MissingModelError(f"The {what} produced unusable vectors (shape {vectors.shape}, "
                                "non-finite values or a wrong size).")


def _check_complete_encoder(ref: str, info: ModelInfo) -> None:
    """Load the encoder's weights once more, asking transformers which ones were missing:
    a model with missing tensors would otherwise load with random ones and only warn."""
    if info.kind == KIND_RAG:
        return  # the RAG loader checks this itself
    from transformers import AutoModel, DPRContextEncoder, DPRQuestionEncoder

    cls: Any = {KIND_DPR_QUESTION: DPRQuestionEncoder,
                KIND_DPR_CONTEXT: DPRContextEncoder}.get(info.kind, AutoModel)
    resolved = resolve_ref(ref)
    try:
        _, loading = cls.from_pretrained(str(resolved.path), use_safetensors=True,
                                         trust_remote_code=False, output_loading_info=True)
    except Exception as exc:
        raise MissingModelError(f"The encoder {ref!r} could not be loaded: {exc}") from exc
    missing = sorted(str(k) for k in (loading.get("missing_keys") or []))
    missing += sorted(str(k) for k in (loading.get("mismatched_keys") or []))
    if missing:
        raise MissingModelError(
            f"The encoder {ref!r} is incomplete or damaged: {len(missing)} weights are missing "
            f"or have the wrong shape ({', '.join(missing[:3])}...).",
            "Download or copy the model again.")


def validate_question_encoder(ref: str) -> TextEncoder:
    info = inspect_model(resolve_ref(ref))
    encoder = loading.load_question_encoder(ref)
    _check_complete_encoder(ref, info)
    _check_vectors(encoder.encode([PROBE_QUESTION]), encoder.dim, f"question encoder {ref!r}")
    return encoder


def validate_passage_encoder(ref: str) -> TextEncoder:
    info = inspect_model(resolve_ref(ref))
    encoder = loading.load_passage_encoder(ref)
    _check_complete_encoder(ref, info)
    vectors = encoder.encode(passage_inputs(encoder, [PROBE_PASSAGE]))
    _check_vectors(vectors, encoder.dim, f"passage encoder {ref!r}")
    return encoder


def validate_generator(ref: str, progress: ProgressCallback | None = None,
                       cancel: CancelToken | None = None) -> str:
    """Load the generator and run one forward pass; returns its kind (seq2seq / causal)."""
    import torch

    parts = loading.load_generator_parts(ref, progress=progress, cancel=cancel)
    model, tok = parts.model, parts.tokenizer
    text = f"{PROBE_PASSAGE[0]} / {PROBE_PASSAGE[1]} // {PROBE_QUESTION}"
    ids = tok(text, return_tensors="pt")["input_ids"]
    vocab = int(model.get_output_embeddings().weight.shape[0])
    if ids.numel() == 0 or int(ids.max()) >= vocab:
        raise MissingModelError(
            f"The generator {ref!r} has a tokenizer that does not fit its model (token ids up "
            f"to {int(ids.max()) if ids.numel() else 'none'}, model vocabulary {vocab}).")
    try:
        with torch.inference_mode():
            if parts.kind == "seq2seq":
                start = getattr(model.config, "decoder_start_token_id", None)
                start = int(start if start is not None else (tok.eos_token_id or 0))
                logits = model(input_ids=ids,
                               decoder_input_ids=torch.tensor([[start]])).logits
            else:
                logits = model(input_ids=ids).logits
    except Exception as exc:
        raise MissingModelError(f"The generator {ref!r} fails on a test input: {exc}") from exc
    if not bool(torch.isfinite(logits).all()):
        raise MissingModelError(f"The generator {ref!r} produces non-finite scores.")
    return parts.kind


def _link_error(link: Path, problem: str) -> BadInputError:
    return BadInputError(
        f"{link} is a symbolic link {problem}.",
        hint="--copy copies only what is inside the model folder: copy the file itself into "
             "the folder (or remove the link), or import without --copy to use the folder "
             "where it is.")


def check_links(src: Path) -> None:
    """Refuse a folder that ``--copy`` cannot copy faithfully and safely.

    A symbolic link is copied as the file or folder it points to, but only when that target
    is inside the model folder, or, for a snapshot folder of a Hugging Face cache
    (``models--org--name/snapshots/<rev>``), inside that model's cache folder, where the hub
    keeps the files its links point to. A link leading anywhere else (a copy would take
    ``/etc/shadow`` along), a dangling link and a link loop are refused by name.
    """
    if not src.is_dir():
        return  # a single file: its path was resolved already, the target is what is copied
    root = src.resolve()
    allowed = [root]
    if root.parent.name == "snapshots" and root.parent.parent.name.startswith("models--"):
        allowed.append(root.parent.parent)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for entry in (*dirnames, *filenames):
            link = Path(dirpath) / entry
            if link.is_symlink():
                problem = link_problem(link, allowed, "model folder")
                if problem is not None:
                    raise _link_error(link, problem)


class _PackCopy:
    """``--copy`` as one transaction: the parts are copied into a staging folder beside
    ``models/<name>``, which replaces it only once every part is copied; the old folder is
    kept aside until the new pack is registered, and put back if registering fails.

    A lock file per pack name is held throughout, so leftovers of a killed run (a staging
    folder, or the old folder set aside) can be cleaned up or put back at the next start
    without racing a live import of the same name; :mod:`.pack_copies` says which copy a
    registration uses at every point (the ``copy_token`` registered with the new one).
    """

    def __init__(self, data: DataDir, catalog: Catalog, name: str, replace: bool) -> None:
        from filelock import FileLock

        self.data, self.catalog = data, catalog
        self.models_dir = data.models_dir
        self.dest = data.models_dir / name
        self.name = name
        self.replace = replace
        self.models_dir.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(str(pack_copies.pack_lock_path(data, name)))
        self.staging: Path | None = None
        self.old: Path | None = None
        self.token: str | None = None

    def __enter__(self) -> _PackCopy:
        self._lock.acquire()
        try:
            pack_copies.settle(self.data, self.catalog, self.name)
        except BaseException:
            self._lock.release()
            raise
        return self

    def copy(self, parts: dict[str, str], local: set[str]) -> dict[str, str]:
        """Copy the local parts into staging; returns the parts as they will be after
        :meth:`swap`."""
        self.staging = Path(tempfile.mkdtemp(prefix=f".{self.name}.{pack_copies.STAGING}-",
                                             dir=self.models_dir))
        copies: dict[str, str] = {}
        out = dict(parts)
        for role, ref in parts.items():
            if ref not in local:
                continue  # a hub id stays in the HF cache
            if ref not in copies:
                src = Path(ref)
                rel = src.name
                if any(Path(c).name == rel for c in copies.values()):
                    rel = f"{role}-{src.name}"
                target = self.staging / rel
                try:
                    if src.is_dir():
                        shutil.copytree(src, target, symlinks=False)
                    else:
                        shutil.copy2(src, target)
                except (OSError, shutil.Error) as exc:
                    raise self._copy_error(src, exc) from exc
                copies[ref] = str(self.dest / rel)
            out[role] = copies[ref]
        return out

    def _copy_error(self, src: Path, exc: OSError | shutil.Error) -> RagdeskError:
        errors = exc.args[0] if isinstance(exc, shutil.Error) and exc.args else []
        full = is_disk_full(exc) or any("No space left" in str(e) for e in errors)
        if full:
            return DiskFullError(f"The disk filled up while copying {src} into {self.dest}; "
                                 "nothing was changed.")
        return BadInputError(f"{src} could not be copied: {exc}", hint="Nothing was changed; "
                             "check the folder's files and permissions and try again.")

    def swap(self) -> None:
        assert self.staging is not None
        fsync_dir(self.staging)
        if self.dest.exists():
            self.old = Path(tempfile.mkdtemp(prefix=f".{self.name}.{pack_copies.OLD}-",
                                             dir=self.models_dir))
            fsync_dir(self.models_dir)  # the token's folder exists before it is registered
            self.token = pack_copies.token_of(self.old, self.name)
            os.replace(self.dest, self.old)
        os.rename(self.staging, self.dest)
        self.staging = None
        fsync_dir(self.models_dir)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if self.staging is not None:
                shutil.rmtree(self.staging, ignore_errors=True)
            if exc_type is not None and self.old is not None:
                # Registering the new pack failed: the old registration needs its files back.
                pack_copies.put_back(self.models_dir, self.name, self.old)
                for d in pack_copies.leftovers(self.models_dir, self.name,
                                               pack_copies.STAGING):
                    shutil.rmtree(d, ignore_errors=True)
            elif self.old is not None:
                shutil.rmtree(self.old, ignore_errors=True)
        finally:
            self._lock.release()


def _check_copy_sources(data: DataDir, name: str, parts: dict[str, str], local: set[str],
                        registered: bool, replace: bool) -> None:
    """Everything that would make ``--copy`` fail or destroy data, checked before any model
    loads."""
    dest = (data.models_dir / name).resolve()
    if dest.exists() and registered and not replace:
        raise AlreadyExistsError(f"{dest} already exists.", "Remove it, or pass --replace.")
    for ref in sorted(local & set(parts.values())):
        src = Path(ref)
        if src.is_relative_to(dest):
            raise BadInputError(
                f"{src} is inside {dest}, the folder that --copy --replace would replace: the "
                "copy would delete its own source.",
                hint=f"The pack {name!r} already uses a copy in the data directory; import it "
                     "without --copy, or copy the folder somewhere else first.")
        check_links(src)


def _collect_parts(path: str | os.PathLike[str] | None, question_encoder: str | None,
                   passage_encoder: str | None, generator: str | None
                   ) -> tuple[dict[str, str], set[str]]:
    """The pack's part references by role, and which of them are paths on this machine (the
    rest are hub ids); PATH gives the roles its model plays, the options override them."""
    parts: dict[str, str] = {}
    local: set[str] = set()
    source_info: ModelInfo | None = None
    if path is not None:
        src = Path(path).expanduser()
        if not src.exists():
            raise MissingModelError(f"{src} does not exist.")
        source_info = inspect_model(resolve_ref(src))
        for role in roles_of(source_info):
            parts[role] = str(src.resolve())
            local.add(parts[role])
    for role, ref in (("question_encoder", question_encoder),
                      ("passage_encoder", passage_encoder), ("generator", generator)):
        if ref:
            p = Path(ref).expanduser()
            parts[role] = str(p.resolve()) if p.exists() else ref
            if p.exists():
                local.add(parts[role])
    if "question_encoder" not in parts or "generator" not in parts:
        missing = [r.replace("_", " ") for r in ("question_encoder", "generator")
                   if r not in parts]
        what = f"{path} holds a {source_info.kind} model; " if source_info else ""
        raise BadInputError(
            f"{what}a model pack also needs a {' and a '.join(missing)}.",
            hint="Name the missing parts with --question-encoder REF / --generator REF "
                 "(a folder, a .gguf file or a hub id in the HF cache), or import a RAG "
                 "checkpoint, which holds both.")
    return parts, local


def _check_encoders(parts: dict[str, str], prog: Progress,
                    cancel: CancelToken | None) -> EncoderInfo:
    """Load the encoders once to prove they work and share a vector space; a pack whose
    question encoder is not DPR's encodes passages with it too. Returns the question
    encoder's info."""
    prog.set(0, "checking the question encoder")
    q_info = validate_question_encoder(parts["question_encoder"]).info
    if cancel is not None:
        cancel.raise_if_cancelled()
    prog.set(1, "checking the passage encoder")
    if parts.get("passage_encoder"):
        p_info = validate_passage_encoder(parts["passage_encoder"]).info
        if (p_info.family, p_info.dim) != (q_info.family, q_info.dim):
            raise EncoderMismatchError(
                f"The passage encoder {parts['passage_encoder']} ({p_info.family}, "
                f"{p_info.dim}-d) and the question encoder {parts['question_encoder']} "
                f"({q_info.family}, {q_info.dim}-d) do not share a vector space.",
                "Give encoders of the same family and size (e.g. the DPR question and context "
                "encoders trained together).")
    elif q_info.family != "dpr":
        parts["passage_encoder"] = parts["question_encoder"]
    if cancel is not None:
        cancel.raise_if_cancelled()
    return q_info


def import_pack(
    data: DataDir,
    catalog: Catalog,
    path: str | os.PathLike[str] | None,
    name: str,
    *,
    question_encoder: str | None = None,
    passage_encoder: str | None = None,
    generator: str | None = None,
    copy: bool = False,
    replace: bool = False,
    mode: str | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> PackSpec:
    """Validate and register a custom pack (see the module doc for how PATH maps to parts).
    ``mode``: how the pack reads when no mode is chosen (None: as the settings say)."""
    check_pack_name(name)
    if mode is not None:
        check_mode(mode)
    registered = any(r.name == name for r in catalog.list_model_packs())
    if not replace and registered:
        raise AlreadyExistsError(f"A model pack named {name!r} already exists.",
                                 "Pick another name, or pass --replace.")
    parts, local = _collect_parts(path, question_encoder, passage_encoder, generator)
    if copy:
        _check_copy_sources(data, name, parts, local, registered, replace)
    steps = 3 + (1 if copy else 0)
    prog = Progress(steps, f"checking the parts of {name}", progress)
    q_info = _check_encoders(parts, prog, cancel)
    prog.set(2, "checking the generator")
    generator_kind = validate_generator(parts["generator"], cancel=cancel)
    if mode == "together" and generator_kind != "causal":
        raise BadInputError(
            f"The generator of {name!r} reads one passage at a time: it cannot read the "
            "passages together.", hint="Import it with --mode token or --mode sequence.")
    if cancel is not None:
        cancel.raise_if_cancelled()
    if not copy:
        spec = _register(catalog, name, path, parts, q_info, generator_kind, [], replace,
                         mode=mode)
    else:
        prog.set(3, "copying the models into the data directory")
        with _PackCopy(data, catalog, name, replace) as pack_copy:
            parts = pack_copy.copy(parts, local)
            pack_copy.swap()
            spec = _register(catalog, name, path, parts, q_info, generator_kind,
                             [str(pack_copy.dest)], replace, pack_copy.token, mode=mode)
    prog.set(steps, f"registered {name}")
    log.info("registered model pack %s: %s", name, spec.to_json())
    return spec


def _register(catalog: Catalog, name: str, path: str | os.PathLike[str] | None,
              parts: dict[str, str], q_info: EncoderInfo, generator_kind: str,
              copied: list[str], replace: bool, copy_token: str | None = None, *,
              mode: str | None = None) -> PackSpec:
    details: dict[str, object] = {
        "source": str(Path(path).expanduser().resolve()) if path is not None else None,
        "copied": copied,
        "question_encoder_info": q_info.to_json(),
    }
    if copy_token is not None:
        details["copy_token"] = copy_token  # which copy this registration uses
    spec = PackSpec(
        name=name, kind=KIND_CUSTOM, question_encoder=parts["question_encoder"],
        passage_encoder=parts.get("passage_encoder"), generator=parts["generator"],
        generator_kind=generator_kind, default_mode=mode,
        description=f"Imported from {path}" if path is not None else "Imported",
        encoder_family=q_info.family, encoder_dim=int(q_info.dim), details=details)
    return register_pack(catalog, spec, replace=replace)
