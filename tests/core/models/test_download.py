"""Downloads: refused at once and without writing when the hub cannot be reached; otherwise
the right revision and files are fetched, with byte progress and cancellation.

The hub itself is never contacted here: the offline tests stop before any request, and the
flow tests replace huggingface_hub's API calls with fakes that behave like the hub's."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.errors import (
    BadInputError,
    Cancelled,
    DiskFullError,
    MissingModelError,
    OfflineError,
)
from ragdesk.core.models import BUILTIN_PACKS, download
from ragdesk.core.models.download import (
    ALLOW_PATTERNS,
    download_repos,
    download_spec,
    offline_reason,
)
from ragdesk.core.progress import CancelToken, Progress, ProgressUpdate


@pytest.fixture()
def no_hub_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("the hub was contacted")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", boom)
    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files", boom)


def test_hf_hub_offline_fails_at_once(hf_cache: Path, no_hub_calls: None,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineError, match="HF_HUB_OFFLINE is set") as err:
        download_spec(BUILTIN_PACKS["rag-sequence-nq"])
    assert "facebook/rag-sequence-nq" in err.value.message
    assert "ragdesk models import" in err.value.hint
    assert not hf_cache.exists()


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


@pytest.fixture()
def unreachable_hub(monkeypatch: pytest.MonkeyPatch) -> str:
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    for var in download._PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    return endpoint


def test_unreachable_hub_fails_at_once(hf_cache: Path, no_hub_calls: None,
                                       unreachable_hub: str) -> None:
    with pytest.raises(OfflineError, match=r"hub \(127\.0\.0\.1\) cannot be reached"):
        download_repos(["facebook/bart-large"])
    assert not hf_cache.exists()


def test_proxy_leaves_the_decision_to_the_requests(unreachable_hub: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert offline_reason() is not None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert offline_reason() is None


def test_starter_has_nothing_to_download(tmp_path: Path) -> None:
    from ragdesk.core.models.packs import starter_spec
    from ragdesk.core.paths import DataDir

    with pytest.raises(BadInputError, match="nothing to download") as err:
        download_spec(starter_spec(DataDir(tmp_path)))
    assert "setup-starter" in err.value.hint


# ------------------------------------------------------------------ with a fake hub ---


@dataclass
class _Disc:
    num: int


@dataclass
class _Info:
    filename: str
    file_size: int
    will_download: bool


class FakeHub:
    """Answers like the hub for a few repositories, and records what was asked."""

    def __init__(self, repos: dict[tuple[str, str | None], dict[str, int]],
                 prs: dict[str, list[int]] | None = None, cached: set[str] | None = None) -> None:
        self.repos = repos
        self.prs = prs or {}
        self.cached = cached or set()
        self.downloads: list[tuple[str, str | None, list[str]]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import huggingface_hub

        hub = self

        class Api:
            def list_repo_files(self, repo_id: str, revision: str | None = None) -> list[str]:
                return list(hub.repos[(repo_id, revision)])

            def get_repo_discussions(self, repo_id: str, **kw: Any) -> list[_Disc]:
                assert kw["author"] == "SFconvertbot"
                return [_Disc(n) for n in hub.prs.get(repo_id, [])]

        monkeypatch.setattr(huggingface_hub, "HfApi", Api)
        monkeypatch.setattr(huggingface_hub, "snapshot_download", self.snapshot_download)
        monkeypatch.setattr(download, "offline_reason", lambda timeout=5.0: None)

    def _files(self, repo_id: str, revision: str | None, allow: list[str]) -> dict[str, int]:
        import fnmatch

        return {f: n for f, n in self.repos[(repo_id, revision)].items()
                if any(fnmatch.fnmatch(f, p) for p in allow)}

    def snapshot_download(self, repo_id: str, *, revision: str | None = None,
                          allow_patterns: list[str], dry_run: bool = False,
                          tqdm_class: Any = None) -> Any:
        files = self._files(repo_id, revision, allow_patterns)
        if dry_run:
            return [_Info(f, n, f not in self.cached) for f, n in files.items()]
        self.downloads.append((repo_id, revision, sorted(files)))
        # Like huggingface_hub: a files bar, and a bytes bar fed in chunks.
        count_bar = tqdm_class(total=len(files), desc="Fetching")
        byte_bar = tqdm_class(total=0, initial=0, unit="B", unit_scale=True, desc="bytes")
        for f, n in files.items():
            if f in self.cached:
                continue
            for _ in range(4):
                byte_bar.update(n // 4)
            count_bar.update(1)
        return f"/cache/{repo_id}/{revision or 'main'}"


def test_download_flow_with_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    hub = FakeHub({
        ("org/a", None): {"config.json": 400, "model.safetensors": 4000, "pytorch_model.bin": 4000,
                          "README.md": 10},
        ("org/b", None): {"config.json": 200, "tokenizer.json": 800, "model.safetensors": 2000},
    }, cached={"config.json"})
    hub.install(monkeypatch)
    updates: list[ProgressUpdate] = []
    folders = download_repos(["org/a", "org/b"], progress=updates.append)
    assert folders == [Path("/cache/org/a/main"), Path("/cache/org/b/main")]
    assert hub.downloads == [("org/a", None, ["config.json", "model.safetensors"]),
                             ("org/b", None, ["config.json", "model.safetensors",
                                              "tokenizer.json"])]
    # Only bytes still missing count; the bar never runs backwards and ends full.
    assert updates[-1].total == 4000 + 800 + 2000 == updates[-1].done
    dones = [u.done for u in updates]
    assert dones == sorted(dones) and len(set(dones)) > 4


def test_pickle_only_repo_uses_the_conversion_pr(monkeypatch: pytest.MonkeyPatch) -> None:
    hub = FakeHub({
        ("facebook/rag-token-nq", None): {"config.json": 10, "pytorch_model.bin": 900},
        ("facebook/rag-token-nq", "refs/pr/3"): {"config.json": 10, "pytorch_model.bin": 900},
        ("facebook/rag-token-nq", "refs/pr/5"): {"config.json": 10, "model.safetensors": 900},
    }, prs={"facebook/rag-token-nq": [3, 5]})
    hub.install(monkeypatch)
    download_repos(["facebook/rag-token-nq"])
    assert hub.downloads == [("facebook/rag-token-nq", "refs/pr/5",
                              ["config.json", "model.safetensors"])]


def test_pickle_only_repo_without_conversion(monkeypatch: pytest.MonkeyPatch) -> None:
    hub = FakeHub({("org/old", None): {"config.json": 10, "pytorch_model.bin": 900}})
    hub.install(monkeypatch)
    with pytest.raises(MissingModelError, match="only pickle weights"):
        download_repos(["org/old"])
    assert hub.downloads == []


def test_not_enough_disk_space(monkeypatch: pytest.MonkeyPatch, hf_cache: Path) -> None:
    hub = FakeHub({("org/huge", None): {"model.safetensors": 10**15}})
    hub.install(monkeypatch)
    with pytest.raises(DiskFullError, match="needs"):
        download_repos(["org/huge"])
    assert hub.downloads == []


def test_cancel_stops_the_download(monkeypatch: pytest.MonkeyPatch) -> None:
    hub = FakeHub({("org/a", None): {"model.safetensors": 4000}})
    hub.install(monkeypatch)
    token = CancelToken()

    def cancel_midway(u: ProgressUpdate) -> None:
        if u.done >= 2000:
            token.cancel()

    with pytest.raises(Cancelled, match="continue where it stopped"):
        download_repos(["org/a"], progress=cancel_midway, cancel=token)


def test_byte_counter_ignores_file_count_bars() -> None:
    updates: list[ProgressUpdate] = []
    counter = download._ByteCounter(Progress(1000, "dl", updates.append), None)
    bar_cls = counter.tqdm_class()
    files = bar_cls(total=3, desc="Fetching 3 files")
    files.update(1)
    assert updates == []
    transfer = bar_cls(total=0, unit="B")
    written = bar_cls(total=0, unit="B")
    transfer.update(300)
    written.update(250)  # both count the same bytes: the furthest one wins
    assert updates[-1].done == 300
    written.update(200)
    assert updates[-1].done == 450


def test_allow_patterns_never_fetch_pickles() -> None:
    import fnmatch

    for name in ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack", "model.ckpt"):
        assert not any(fnmatch.fnmatch(name, p) for p in ALLOW_PATTERNS)
    for name in ("model.safetensors", "generator_tokenizer/vocab.json", "merges.txt",
                 "model-00001-of-00002.safetensors", "model.safetensors.index.json"):
        assert any(fnmatch.fnmatch(name, p) for p in ALLOW_PATTERNS)
