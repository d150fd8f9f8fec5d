"""`ragdesk --self-test`: check that this installation works, in a few seconds, offline.

Each check exercises one layer the app depends on (SQLite catalog, FAISS, torch +
transformers, the starter pack files, the Qt platform) inside a temporary data directory,
and compares against an independent reference where there is one (numpy exact search,
a hand-computed loss). It is meant for the PyInstaller bundle above all: a missing shared
library, data file or package metadata shows up here as one FAIL line instead of as a crash
in the middle of the GUI. Nothing is written outside the temporary folder.

Lives outside ``ragdesk.core`` because it starts Qt.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

from ragdesk._version import __version__

Check = Callable[[Path], str]

# Small enough to run in well under a second each on a laptop CPU.
_VOCAB = 512
_SEQ = 12
_BATCH = 3


def check_catalog(tmp: Path) -> str:
    from ragdesk.core.catalog import Catalog, SnapshotState
    from ragdesk.core.catalog.migrations import SCHEMA_VERSION
    from ragdesk.core.paths import DataDir

    data = DataDir(tmp / "data").ensure()
    catalog = Catalog(data.catalog_path)
    try:
        catalog.add_snapshot("self-test", str(data.snapshot_dir("self-test")), passages=3,
                             state=SnapshotState.READY)
        catalog.set_active("self-test")
        catalog.set_state("self-test-key", "value")
        names = [s.name for s in catalog.list_snapshots()]
        active = catalog.active_snapshot()
        value = catalog.get_state("self-test-key")
        version = catalog.schema_version()
    finally:
        catalog.close()
    # Reopening runs the migrations against an existing file, as every later start does.
    reopened = Catalog(data.catalog_path)
    try:
        again = [s.name for s in reopened.list_snapshots()]
    finally:
        reopened.close()
    if names != ["self-test"] or again != names:
        raise AssertionError(f"snapshots read back as {names} / {again}")
    if active != "self-test":
        raise AssertionError(f"active snapshot read back as {active!r}")
    if value != "value":
        raise AssertionError(f"state read back as {value!r}")
    if version != SCHEMA_VERSION:
        raise AssertionError(f"schema version {version}, expected {SCHEMA_VERSION}")
    return f"SQLite {_sqlite_version()}, schema v{version}"


def _sqlite_version() -> str:
    import sqlite3

    return sqlite3.sqlite_version


def check_faiss(tmp: Path) -> str:
    import faiss
    import numpy as np

    rng = np.random.default_rng(0)
    dim, n, nq, k = 32, 500, 8, 10
    xb = rng.standard_normal((n, dim)).astype(np.float32)
    xq = rng.standard_normal((nq, dim)).astype(np.float32)
    index = faiss.IndexFlatIP(dim)
    index.add(xb)
    # Through a file, as snapshots store their indexes.
    path = tmp / "self-test.faiss"
    faiss.write_index(index, str(path))
    loaded = faiss.read_index(str(path))
    scores, ids = loaded.search(xq, k)

    exact = xq @ xb.T
    ref_ids = np.argsort(-exact, axis=1, kind="stable")[:, :k]
    ref_scores = np.take_along_axis(exact, ref_ids, axis=1)
    if not np.allclose(scores, ref_scores, rtol=1e-4, atol=1e-4):
        raise AssertionError("FAISS scores differ from the exact numpy inner products")
    if not np.array_equal(ids, ref_ids):
        raise AssertionError("FAISS ranking differs from the exact numpy ranking")
    return f"faiss {faiss.__version__}, exact inner-product top-{k} matches numpy"


def check_bart(tmp: Path) -> str:
    import torch
    import transformers
    from transformers import BartConfig, BartForConditionalGeneration

    cfg = BartConfig(
        vocab_size=_VOCAB, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, decoder_start_token_id=2,
    )
    torch.manual_seed(0)
    model = BartForConditionalGeneration(cfg).eval()
    gen = torch.Generator().manual_seed(1)
    input_ids = torch.randint(4, _VOCAB, (_BATCH, _SEQ), generator=gen)
    labels = torch.randint(4, _VOCAB, (_BATCH, _SEQ // 2), generator=gen)
    with torch.no_grad():
        out = model(input_ids=input_ids, labels=labels)
    if tuple(out.logits.shape) != (_BATCH, _SEQ // 2, _VOCAB):
        raise AssertionError(f"logits shape {tuple(out.logits.shape)}")
    # The model's own loss must be the mean token cross-entropy of its logits.
    logp = torch.log_softmax(out.logits.double(), dim=-1)
    ref = -logp.gather(-1, labels.unsqueeze(-1)).mean()
    if not torch.isfinite(out.loss) or abs(float(out.loss) - float(ref)) > 1e-4:
        raise AssertionError(f"loss {float(out.loss)} differs from cross-entropy {float(ref)}")
    return f"torch {torch.__version__}, transformers {transformers.__version__}"


def check_dpr(tmp: Path) -> str:
    import torch
    from transformers import DPRQuestionEncoder
    from transformers.utils import logging as hf_logging

    from ragdesk.core.testing.tiny_models import _dpr_config

    torch.manual_seed(0)
    model = DPRQuestionEncoder(_dpr_config(_VOCAB)).eval()
    # Saved and reloaded as safetensors, the way real checkpoints are read; without
    # transformers' progress bars, which would bury the report.
    folder = tmp / "dpr-question"
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(folder)
        reloaded = DPRQuestionEncoder.from_pretrained(folder, trust_remote_code=False).eval()
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    if not (folder / "model.safetensors").is_file():
        raise AssertionError("save_pretrained wrote no model.safetensors")

    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(4, _VOCAB, (_BATCH, _SEQ), generator=gen)
    mask = torch.ones_like(ids)
    mask[0, _SEQ // 2:] = 0  # the first question is padded
    ids[0, _SEQ // 2:] = 0
    with torch.no_grad():
        batch = model(input_ids=ids, attention_mask=mask).pooler_output
        again = reloaded(input_ids=ids, attention_mask=mask).pooler_output
        alone = model(input_ids=ids[:1, :_SEQ // 2]).pooler_output
    if tuple(batch.shape) != (_BATCH, model.config.hidden_size):
        raise AssertionError(f"embedding shape {tuple(batch.shape)}")
    if not torch.allclose(batch, again, atol=1e-6):
        raise AssertionError("the reloaded encoder gives different embeddings")
    # Padding must not change a question's vector: the attention mask is honoured.
    if not torch.allclose(batch[:1], alone, atol=1e-5):
        raise AssertionError("a padded question encodes differently from the unpadded one")
    return f"{model.config.hidden_size}-d, safetensors round trip"


def check_starter(tmp: Path) -> str:
    """The offline starter pack's files are where the app looks for them (nothing is read).

    The generator's weights may be absent on purpose (the Linux installers ship them as an
    add-on); that is reported, not failed.
    """
    from ragdesk.core.models.starter import encoder_path, gguf_chunks_present
    from ragdesk.core.snapshots.starter import vital_articles_path

    problems = []
    enc = encoder_path()
    if not (enc / "model.safetensors").is_file():
        problems.append(f"retriever weights missing ({enc})")
    try:
        articles = vital_articles_path()
    except Exception as exc:  # a RagdeskError with the install hint
        problems.append(str(exc))
    else:
        if articles.stat().st_size < 1_000_000:
            problems.append(f"{articles} is truncated")
    if problems:
        raise AssertionError("; ".join(problems))
    if gguf_chunks_present():
        return "retriever, generator chunks and Vital Articles found"
    return ("retriever and Vital Articles found; the generator (Gemma GGUF chunks) is not "
            "installed, so the starter pack cannot answer")


def _platform_plugin_found(names: list[str]) -> tuple[bool, list[str]]:
    """Whether one of ``names`` has a platform plugin on Qt's library path.

    Qt aborts the whole process when it cannot load the requested platform plugin, so look
    first: a FAIL line is more useful than a core dump.
    """
    from PySide6.QtCore import QCoreApplication, QLibraryInfo

    dirs = {Path(p) for p in QCoreApplication.libraryPaths()}
    dirs.add(Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)))
    available: set[str] = set()
    for d in dirs:
        platforms = d / "platforms"
        if not platforms.is_dir():
            continue
        for f in platforms.iterdir():
            stem = f.name.split(".")[0]
            stem = stem[3:] if stem.startswith("lib") else stem
            if stem.startswith("q"):
                available.add(stem[1:])
    return any(n in available for n in names), sorted(available)


_keep: list[object] = []  # the application object lives as long as the process


def check_qt(tmp: Path) -> str:
    """The platform plugin the app itself would use: the display of this session, not
    offscreen (``QT_QPA_PLATFORM=offscreen ragdesk --self-test`` checks a headless build).

    Everything that would make Qt abort the process (no display, a missing system library,
    an X server that does not answer) is found before Qt starts, by the same check the app
    runs at start.
    """
    from ragdesk.platform_check import check_gui, platform_candidates

    requested = os.environ.get("QT_QPA_PLATFORM", "")
    names = platform_candidates(os.environ)
    import PySide6
    from PySide6.QtCore import QPoint, Qt
    from PySide6.QtGui import QColor, QFont, QGuiApplication, QImage, QPainter

    found, available = _platform_plugin_found(names)
    if not found:
        raise AssertionError(
            f"no Qt platform plugin {requested or ';'.join(names)!r}; available: "
            f"{', '.join(available) or 'none'}")
    gui = check_gui(os.environ)
    if gui.platform is None:
        also = (" To check the rest without a display: QT_QPA_PLATFORM=offscreen ragdesk "
                "--self-test." if gui.reason == "no-display" else "")
        raise AssertionError(f"{gui.problem} {gui.hint}{also}")
    if QGuiApplication.instance() is None:
        _keep.append(QGuiApplication([sys.argv[0] or "ragdesk"]))
    image = QImage(96, 48, QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    try:
        painter.fillRect(0, 0, 16, 16, QColor("#3366cc"))
        font = QFont()
        font.setPixelSize(20)
        painter.setFont(font)
        painter.setPen(QColor("black"))
        painter.drawText(image.rect().adjusted(20, 0, 0, 0),
                         Qt.AlignmentFlag.AlignVCenter, "Rag")
    finally:
        painter.end()
    if image.pixelColor(QPoint(4, 4)) != QColor("#3366cc"):
        raise AssertionError("a filled rectangle did not render")
    text_pixels = sum(
        1 for x in range(20, 96) for y in range(48)
        if image.pixelColor(QPoint(x, y)).lightness() < 128
    )
    if text_pixels == 0:
        raise AssertionError("text rendered no pixels: no usable fonts were found")
    return (f"PySide6 {PySide6.__version__}, platform {QGuiApplication.platformName()}, "
            f"{len(QGuiApplication.screens())} screen(s), text rendered")


CHECKS: list[tuple[str, Check]] = [
    ("catalog", check_catalog),
    ("faiss", check_faiss),
    ("bart", check_bart),
    ("dpr", check_dpr),
    ("starter", check_starter),
    ("qt", check_qt),
]


def _header() -> str:
    frozen = "PyInstaller bundle" if getattr(sys, "frozen", False) else "Python environment"
    return (f"ragdesk {__version__} self-test: Python {platform.python_version()} on "
            f"{platform.system()} {platform.machine()}, {frozen}")


def run_self_test() -> int:
    """Run every check in a temporary folder; print one line each and a verdict."""
    print(_header(), flush=True)
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ragdesk-self-test-") as tmp:
        for name, check in CHECKS:
            try:
                detail = check(Path(tmp))
            except Exception as exc:
                failed.append(name)
                message = str(exc).strip().splitlines()
                print(f"FAIL {name}: {type(exc).__name__}: {message[0] if message else ''}",
                      flush=True)
                traceback.print_exc(file=sys.stderr)
            else:
                print(f"ok   {name}: {detail}", flush=True)
    if failed:
        print(f"self-test FAILED: {len(failed)} of {len(CHECKS)} checks failed "
              f"({', '.join(failed)})", flush=True)
        return 1
    print(f"self-test passed: all {len(CHECKS)} checks ok", flush=True)
    return 0
