"""What a SIGKILL at the worst moment left behind, and who cleans it up.

Each test kills a real process at one exact point (the point is patched to SIGKILL its own
process, so the kill cannot miss), then runs what a user runs next:

- quantize killed just before renaming its index left ``.index.*.faiss.tmp-PID`` forever;
- an import killed between the catalog's "ready" and its index-variant rows left a snapshot
  "ready" with no variant rows, which verify passed and nothing repaired;
- an import killed before its job was marked done left the job "running" forever;
- rows of embeddings.npy that no batch ever wrote (all zeros) passed verify.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.snapshots import (
    import_snapshot,
    quantize_snapshot,
    read_manifest,
    recover,
    verify_snapshot,
)
from ragdesk.core.snapshots.manifest import EMBEDDINGS_FILE, sha256_file, write_manifest
from tests.conftest import REPO
from tests.core.snapshots.util import open_data, synthetic_snapshot_files, write_jsonl

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

# Runs in a child: replace `target` (module:attribute path) by a wrapper that SIGKILLs the
# process when `when(args, kwargs)` holds, then run `body`.
_CHILD = r"""
import importlib, os, signal, sys
module_name, attr, when = sys.argv[1], sys.argv[2], sys.argv[3]
owner = importlib.import_module(module_name)
*parents, leaf = attr.split(".")
for p in parents:
    owner = getattr(owner, p)
real = getattr(owner, leaf)
def dying(*args, **kwargs):
    if eval(when):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
setattr(owner, leaf, dying)
exec(sys.argv[4])
"""


def _die_at(target: str, when: str, body: str) -> None:
    module, attr = target.split(":")
    proc = subprocess.run([sys.executable, "-c", _CHILD, module, attr, when, body],
                          capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]


def _temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name)


@pytest.fixture()
def synthetic(tmp_path: Path, tiny_models: Any) -> Path:
    """A ready snapshot "syn" of 3,000 clustered 32-d vectors (no encoding)."""
    src, npy, _ = synthetic_snapshot_files(tmp_path / "src", 3000, 32)
    data, catalog = open_data(tmp_path / "data")
    import_snapshot(data, catalog, src, name="syn", encoder=str(tiny_models.ctx_encoder),
                    embeddings=npy)
    return tmp_path / "data"


def test_quantize_killed_before_its_rename_leaves_no_temporary_file(synthetic: Path) -> None:
    _die_at("os:replace", "str(args[1]).endswith('.faiss')", f"""
from pathlib import Path
from ragdesk.core.snapshots import quantize_snapshot
from tests.core.snapshots.util import open_data
quantize_snapshot(*open_data(Path({str(synthetic)!r})), "syn", "hnsw-sq8", queries=50)
""")
    data, catalog = open_data(synthetic)
    folder = data.snapshot_dir("syn")
    assert _temp_files(folder)  # what the kill left: the index written, never renamed
    quantize_snapshot(data, catalog, "syn", "hnsw-sq8", queries=50)  # the user's next run
    assert _temp_files(folder) == []
    assert verify_snapshot(data, catalog, "syn").ok


def _import_body(root: Path, src: Path, encoder: Path) -> str:
    return f"""
from pathlib import Path
from ragdesk.core.snapshots import import_snapshot
from tests.core.snapshots.util import open_data
import_snapshot(*open_data(Path({str(root)!r})), {str(src)!r}, name="s", encoder={str(encoder)!r},
                batch_size=8)
"""


def _assert_whole(root: Path) -> None:
    data, catalog = open_data(root)
    recover(data, catalog)  # what every `index list` and import runs first
    rec = catalog.get_snapshot("s")
    assert rec.state == "ready"
    listed = set(read_manifest(data.snapshot_dir(rec.slug)).variants)
    assert {v.variant for v in rec.variants} == listed != set()
    assert [j.state for j in catalog.list_jobs() if j.state == "running"] == []
    assert verify_snapshot(data, catalog, "s").ok


@pytest.mark.parametrize(("target", "when"), [
    # between the snapshot's "ready" and its variant rows
    ("ragdesk.core.catalog:Catalog.upsert_variant", "True"),
    # after the catalog rows, before the job is marked done
    ("ragdesk.core.catalog:Catalog.update_job", "kwargs.get('state') == 'done'"),
])
def test_an_import_killed_in_its_last_catalog_writes_ends_whole(
        tmp_path: Path, tiny_models: Any, target: str, when: str) -> None:
    src = write_jsonl(tmp_path / "corpus.jsonl", list(tiny_models.corpus[:30]))
    root = tmp_path / "data"
    _die_at(target, when, _import_body(root, src, tiny_models.ctx_encoder))
    _assert_whole(root)


def test_verify_restores_the_variant_rows_of_a_ready_snapshot(synthetic: Path) -> None:
    """A catalog left "ready" without variant rows by an older ragdesk: verify repairs it
    from the manifest (which it has just checked) and says so."""
    data, catalog = open_data(synthetic)
    for v in catalog.get_snapshot("syn").variants:
        catalog.remove_variant("syn", v.variant)
    assert catalog.get_snapshot("syn").variants == ()
    report = verify_snapshot(data, catalog, "syn")
    assert report.ok
    assert any("restored" in c and "flat" in c for c in report.checked), report.checked
    assert {v.variant for v in catalog.get_snapshot("syn").variants} == {"flat"}


def test_verify_reports_rows_no_batch_wrote(synthetic: Path) -> None:
    """Rows left zero (as a resume with another batch size left them) are found even when
    the manifest's checksum was taken over the zeros."""
    data, catalog = open_data(synthetic)
    folder = data.snapshot_dir("syn")
    emb = np.load(folder / EMBEDDINGS_FILE, mmap_mode="r+")
    emb[[5, 17, 2999]] = 0
    emb.flush()
    del emb
    manifest = read_manifest(folder)
    path = folder / EMBEDDINGS_FILE
    manifest.files[EMBEDDINGS_FILE] = {"size": path.stat().st_size,
                                       "sha256": sha256_file(path)}
    write_manifest(folder, manifest)
    report = verify_snapshot(data, catalog, "syn", raise_on_error=False)
    assert not report.ok
    assert any("3 passages" in p and "never written" in p for p in report.problems), (
        json.dumps(report.problems))


def test_a_catalog_backup_killed_mid_copy_leaves_no_temporary_file(tmp_path: Path) -> None:
    """Found by the quantize kill loop: `.catalog.sqlite.backup.tmp-*` and its journal."""
    from ragdesk.core.catalog import Catalog

    root = tmp_path / "data"
    root.mkdir()
    _die_at("os:replace", "str(args[1]).endswith('.backup')", f"""
from pathlib import Path
from ragdesk.core.catalog import Catalog
Catalog(Path({str(root)!r}) / "catalog.sqlite")
""")
    assert _temp_files(root)  # the copy the kill left
    catalog = Catalog(root / "catalog.sqlite")
    catalog.set_state("k", "v")  # a change: closing writes the backup again
    catalog.close()
    assert _temp_files(root) == []
    assert (root / "catalog.sqlite.backup").is_file()
