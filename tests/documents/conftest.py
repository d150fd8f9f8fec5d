"""A folder with one PDF, one DOCX, one Markdown and one HTML file, each on its own topic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.documents.makers import words, write_docx, write_pdf

PDF_FACT = "The quokka festival on Rottnest Island is held every October near the lighthouse."
QUESTION = "when is the quokka festival on rottnest island held"


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models run much faster with one thread on a busy 2-core machine."""
    import faiss
    import torch

    t, f = torch.get_num_threads(), faiss.omp_get_max_threads()
    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    yield
    torch.set_num_threads(t)
    faiss.omp_set_num_threads(f)


def make_folder(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_pdf(root / "report.pdf", [
        ["Annual wildlife report", words("intro", 40)],
        ["Events", PDF_FACT, words("events", 30)],
        ["Appendix", words("appendix", 50)],
    ], title="Wildlife Report 2026")
    write_docx(root / "notes.docx", "Team Notes", [
        ("Meetings", ["The budget meeting moved to Thursday afternoon.", words("meet", 120)]),
        ("Hiring", ["Two engineers join the platform team in spring."]),
    ])
    (root / "guide.md").write_text(
        "# Setup Guide\n\n## Install\n\nRun the installer and restart the computer.\n\n"
        f"{words('install', 80)}\n\n## Configure\n\nOpen the settings and choose a theme.\n",
        encoding="utf-8")
    (root / "page.html").write_text(
        "<html><head><title>Recipes</title></head><body><h1 id='bread'>Bread</h1>"
        "<p>Knead the dough for ten minutes, then let it rise for an hour.</p>"
        "<script>ignored()</script><h2 id='soup'>Soup</h2><p>Simmer the lentils gently.</p>"
        "</body></html>", encoding="utf-8")
    (root / "image.png").write_bytes(b"\x89PNG not read")
    return root


@pytest.fixture()
def docs_folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path / "docs")
