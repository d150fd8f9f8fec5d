"""Shared fixtures: tiny random models (built once, cached by builder source), data dirs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
# Imports encode with the exact transformers forward, so that the equality tests compare
# against the reference; the fused bf16 kernel has its own tests (tests/core/test_fused_encoder.py).
os.environ.setdefault("RAGDESK_ENCODE_PRECISION", "float32")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Tiny DPR / BART / causal-LM / RAG checkpoints saved like real ones (a few seconds);
    ``RAGDESK_TINY_MODELS``: a folder where they were built before (on a machine without
    the starter pack they are built from, such as a GPU machine the tests are carried to)."""
    from ragdesk.core.testing.tiny_models import build_tiny_models, open_tiny_models

    built = os.environ.get("RAGDESK_TINY_MODELS")
    if built:
        return open_tiny_models(Path(built).resolve())
    return build_tiny_models(tmp_path_factory.mktemp("tiny-models"))


@pytest.fixture(scope="session")
def bf16_kernel_here(tiny_models) -> bool:  # type: ignore[no-untyped-def]
    """Whether the fused bfloat16 BERT kernel runs on this CPU (oneDNN's packed bfloat16
    products need AVX-512 BW/VL/DQ or AVX-NE-CONVERT); elsewhere bfloat16 falls back to
    float32, which the precision tests check instead."""
    import torch

    from ragdesk.core.encoders import FusedBertKernel, load_encoder

    enc = load_encoder(tiny_models.st_encoder, role="passage")
    return FusedBertKernel.build(enc.model, enc.info, torch.bfloat16) is not None


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    return d


@pytest.fixture()
def cli(data_dir: Path, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run the CLI in-process against a temp data dir; returns (exit code, stdout, stderr)."""
    from ragdesk.cli.main import main

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(["--data-dir", str(data_dir), *argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.fixture()
def nq_dev_path() -> Path:
    p = SHARED_DATA / "nq-open-dev.jsonl"
    if not p.exists():
        pytest.skip(f"{p} is not present")
    return p


def run_cli_subprocess(*argv: str, env: dict[str, str] | None = None,
                       timeout: float = 300) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "ragdesk", *argv], capture_output=True,
                          text=True, env=e, timeout=timeout)


@pytest.fixture()
def run_cli() -> Iterator[object]:
    yield run_cli_subprocess
