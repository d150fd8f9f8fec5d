"""Download a pack's hub models into the standard Hugging Face cache.

Everything that can be checked before writing a byte is checked first: ``HF_HUB_OFFLINE``,
whether the hub's host answers at all, which files each repository has, whether they fit on
the disk. Only then does ``huggingface_hub.snapshot_download`` run, with a progress bar fed
from its byte counters and a cancel check in every update. An interrupted download keeps its
partial files in the cache and the next run continues from them.

Only what ragdesk loads is fetched: configs, tokenizers and ``*.safetensors`` weights, never
pickles. For a repository whose main branch has pickles only, the hub's safetensors
conversion (an open pull request by the conversion bot, ``refs/pr/N``) is used when it exists;
:func:`ragdesk.core.models.refs.resolve_ref` finds it in the cache later.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import socket
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.core.errors import (
    BadInputError,
    Cancelled,
    DiskFullError,
    MissingModelError,
    OfflineError,
    RagdeskError,
    is_disk_full,
)
from ragdesk.core.models.packs import PackSpec, get_pack
from ragdesk.core.models.refs import hf_cache_dir, split_revision
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.units import human_bytes

if TYPE_CHECKING:
    from ragdesk.core.catalog import Catalog
    from ragdesk.core.paths import DataDir

log = logging.getLogger(__name__)

ALLOW_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.jinja"]
CONVERSION_BOT = "SFconvertbot"
PROBE_TIMEOUT_S = 5.0
_TRUE = {"1", "ON", "YES", "TRUE"}
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")

OFFLINE_HINT = (
    "To use this pack without a network, download the model folders on a machine that has one "
    "(`ragdesk models download PACK` there, or `hf download REPO --local-dir DIR`), copy them "
    "here and register them with `ragdesk models import DIR --name NAME`. The starter pack "
    "works offline: `ragdesk models setup-starter`.")


def offline_reason(timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the hub cannot be reached, or None when it looks reachable.

    A plain TCP connection to the endpoint's host decides, unless a proxy is configured
    (then only the real requests can tell).
    """
    if os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in _TRUE:
        return "HF_HUB_OFFLINE is set, so ragdesk does not contact the Hugging Face hub"
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set, so ragdesk does not contact the Hugging Face hub"
    if any(os.environ.get(v) for v in _PROXY_VARS):
        return None
    url = urllib.parse.urlsplit(constants.ENDPOINT)
    host = url.hostname or "huggingface.co"
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        return f"the Hugging Face hub ({host}) cannot be reached: {exc.strerror or exc}"
    return None


@dataclass(frozen=True)
class RepoPlan:
    repo_id: str
    revision: str | None  # None = main
    files: tuple[str, ...]
    bytes_to_fetch: int


def _hub_error(repo_id: str, exc: BaseException) -> RagdeskError:
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, RagdeskError):
        return exc
    if isinstance(exc, GatedRepoError):
        return MissingModelError(f"The model {repo_id} is gated on the hub.",
                                 "Accept its license on huggingface.co and log in with `hf "
                                 "auth login`, then run the download again.")
    if isinstance(exc, (RepositoryNotFoundError, RevisionNotFoundError)):
        return MissingModelError(f"The hub has no model {repo_id!r}.")
    if is_disk_full(exc):
        return DiskFullError(f"The disk filled up while downloading {repo_id}.")
    if isinstance(exc, (OfflineModeIsEnabled, LocalEntryNotFoundError, ConnectionError,
                        TimeoutError, OSError)) or "Connect" in type(exc).__name__ \
            or "Timeout" in type(exc).__name__:
        return OfflineError(f"Downloading {repo_id} failed: {exc}", OFFLINE_HINT)
    return MissingModelError(f"Downloading {repo_id} failed: {type(exc).__name__}: {exc}")


def _choose_revision(api: Any, repo_id: str, revision: str | None) -> tuple[str | None, list[str]]:
    """The revision to fetch and its files: main when it has safetensors, else the hub's
    safetensors conversion PR."""
    files = list(api.list_repo_files(repo_id, revision=revision))
    if revision is not None or any(f.endswith(".safetensors") for f in files):
        return revision, files
    for disc in api.get_repo_discussions(repo_id, author=CONVERSION_BOT,
                                         discussion_type="pull_request",
                                         discussion_status="open"):
        ref = f"refs/pr/{disc.num}"
        pr_files = list(api.list_repo_files(repo_id, revision=ref))
        if any(f.endswith(".safetensors") for f in pr_files):
            log.info("%s has pickles only on main; using its safetensors conversion %s",
                     repo_id, ref)
            return ref, pr_files
    raise MissingModelError(
        f"The hub model {repo_id} has only pickle weights (pytorch_model.bin), which ragdesk "
        "never loads because unpickling can run code.",
        "Convert it to safetensors on a trusted machine (save_pretrained with "
        "safe_serialization=True) and import the folder with `ragdesk models import`.")


def plan_downloads(repos: list[str]) -> list[RepoPlan]:
    """Ask the hub which files each repository needs and how many bytes are still missing."""
    from huggingface_hub import HfApi, snapshot_download

    api = HfApi()
    plans = []
    for ref in repos:
        repo_id, revision = split_revision(ref)
        try:
            revision, _ = _choose_revision(api, repo_id, revision)
            infos = snapshot_download(repo_id, revision=revision, allow_patterns=ALLOW_PATTERNS,
                                      dry_run=True)
        except Exception as exc:
            raise _hub_error(repo_id, exc) from exc
        files = tuple(i.filename for i in infos)
        missing = sum(int(i.file_size or 0) for i in infos if i.will_download)
        plans.append(RepoPlan(repo_id, revision, files, missing))
    return plans


class _ByteCounter:
    """Turns the byte counters of huggingface_hub's progress bars into our progress updates."""

    def __init__(self, prog: Progress, cancel: CancelToken | None) -> None:
        self.prog = prog
        self.cancel = cancel
        self.base = 0
        self._bars: dict[int, float] = {}
        self._lock = threading.Lock()

    def start_repo(self, done_before: int) -> None:
        with self._lock:
            self.base = done_before
            self._bars.clear()

    def report(self, bar: Any) -> None:
        if self.cancel is not None and self.cancel.cancelled:
            raise Cancelled("Download cancelled; run it again to continue where it stopped.")
        with self._lock:
            self._bars[id(bar)] = float(getattr(bar, "n", 0) or 0)
            # Transfer and reconstruction bars count the same bytes; take the furthest one.
            done = self.base + int(max(self._bars.values()))
        self.prog.set(min(done, self.prog.total or done))

    def tqdm_class(self) -> type:
        from tqdm.std import tqdm

        counter = self

        class _Bar(tqdm):  # type: ignore[misc]
            def __init__(self, *args: object, **kwargs: object) -> None:
                kwargs.pop("name", None)
                kwargs["file"] = io.StringIO()  # quiet: ragdesk draws its own bar
                kwargs["disable"] = False
                super().__init__(*args, **kwargs)
                self._counts_bytes = kwargs.get("unit") == "B"

            def update(self, n: float | None = 1) -> bool | None:
                out: bool | None = super().update(n)
                if self._counts_bytes:
                    counter.report(self)
                return out

        return _Bar


def download_repos(repos: list[str], *, progress: ProgressCallback | None = None,
                   cancel: CancelToken | None = None) -> list[Path]:
    """Download hub repositories (``org/name`` or ``org/name@rev``) into the HF cache."""
    reason = offline_reason()
    if reason is not None:
        raise OfflineError(f"Cannot download {', '.join(repos)}: {reason}.", OFFLINE_HINT)
    plans = plan_downloads(repos)
    total = sum(p.bytes_to_fetch for p in plans)
    cache = hf_cache_dir()
    probe = cache if cache.exists() else next((p for p in cache.parents if p.exists()), Path("/"))
    free = shutil.disk_usage(probe).free
    if total > free:
        raise DiskFullError(
            f"The download needs {human_bytes(total)} but {probe} has {human_bytes(free)} free.",
            "Free some space, or point HF_HOME at a larger disk.")
    from huggingface_hub import snapshot_download

    prog = Progress(total, "downloading", progress, unit="bytes")
    counter = _ByteCounter(prog, cancel)
    done = 0
    folders = []
    for plan in plans:
        if cancel is not None:
            cancel.raise_if_cancelled()
        counter.start_repo(done)
        prog.set(done, f"downloading {plan.repo_id}")
        try:
            folder = snapshot_download(plan.repo_id, revision=plan.revision,
                                       allow_patterns=ALLOW_PATTERNS,
                                       tqdm_class=counter.tqdm_class())
        except Cancelled:
            raise
        except Exception as exc:
            raise _hub_error(plan.repo_id, exc) from exc
        done += plan.bytes_to_fetch
        folders.append(Path(folder))
    prog.set(total, "downloaded")
    return folders


def download_pack(catalog: Catalog, name: str, *, progress: ProgressCallback | None = None,
                  cancel: CancelToken | None = None, data: DataDir | None = None) -> list[Path]:
    """Download every hub model of the pack ``name``; see :func:`download_repos`."""
    return download_spec(get_pack(catalog, name, data), progress=progress, cancel=cancel)


def download_spec(spec: PackSpec, *, progress: ProgressCallback | None = None,
                  cancel: CancelToken | None = None) -> list[Path]:
    repos = spec.hub_repos()
    if not repos:
        raise BadInputError(
            f"The model pack {spec.name!r} has nothing to download: its parts are local "
            "files.",
            hint="The starter pack comes with ragdesk's PyPI packages; build its snapshot with "
                 "`ragdesk models setup-starter`." if spec.kind == "starter" else "")
    return download_repos(repos, progress=progress, cancel=cancel)
