"""Pictures of the conversations sidebar, the whole-article view and the settings dialog, each
rendered on its own (offscreen Qt, the app's Fusion style and light theme) for README.

    .venv/bin/python scripts/widget_screenshots.py [--out docs/screenshots] [--work DIR]

The article view shows a real Vital Articles lead section from a small snapshot imported
with the starter pack's retriever (the first 400 passages, a few seconds). The sidebar shows
sample conversations this script writes into the store (question and answer texts typed
here, not generated: no model runs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SAMPLES = (  # (conversation name or "", [(question, answer)])
    ("", [("Who discovered radium?", "Marie Curie"),
          ("Where was Marie Curie born?", "Warsaw")]),
    ("Art history", [("Who painted the Mona Lisa?", "Leonardo da Vinci"),
                     ("Where is the Mona Lisa?", "the Louvre, Paris")]),
    ("", [("What is the highest mountain on Earth?", "Mount Everest")]),
    ("", [("Which planet is the largest?", "Jupiter")]),
)


def inline(fn: Any, on_done: Any, *, on_error: Any = None, write: bool = False) -> None:
    """A Background that runs at once: fine for a picture, never for the app."""
    on_done(fn())


def sample_answer(question: str, text: str) -> Any:
    from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc

    docs = [RetrievedDoc(0, "Sample", "A passage.", 1.0, 1.0, "Vital Articles")]
    return Answer(question, text, [1], [AnswerToken(1, text, [1.0])], docs, -1.0, "token",
                  snapshot="Vital Articles")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(REPO / "docs" / "screenshots"))
    ap.add_argument("--work", default="/tmp/ragdesk-widget-screenshots")
    args = ap.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    out = Path(args.out)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)

    from PySide6.QtWidgets import QApplication

    from ragdesk.core.catalog import Catalog
    from ragdesk.core.conversations import ConversationStore
    from ragdesk.core.paths import DataDir
    from ragdesk.core.settings import Settings
    from ragdesk.core.snapshots import VITAL_ARTICLES, import_snapshot, open_snapshot
    from ragdesk.core.snapshots.articles import article_around
    from ragdesk.ui.article_view import ArticleView
    from ragdesk.ui.conversations_sidebar import ConversationsSidebar
    from ragdesk.ui.settings_dialog import SettingsDialog
    from ragdesk.ui.theme import install_theme

    app = QApplication.instance() or QApplication(sys.argv)
    QApplication.setStyle("Fusion")  # static: the style of the application
    install_theme("light")

    data = DataDir(work / "data").ensure()
    catalog = Catalog(data.catalog_path)
    import_snapshot(data, catalog, VITAL_ARTICLES, name="Vital Articles", encoder=None,
                    limit=400)
    index = open_snapshot(data, catalog, "Vital Articles")

    store = ConversationStore(catalog)
    for name, turns in SAMPLES:
        conv = store.create(name)
        for q, a in turns:
            store.add_answer(conv.id, sample_answer(q, a))
    bar = ConversationsSidebar(store, inline)
    bar.resize(300, 330)
    bar.refresh()
    bar.show()
    bar.search("curie")
    app.processEvents()
    out.mkdir(parents=True, exist_ok=True)
    bar.grab().save(str(out / "conversations-search.png"))

    # A lead section several passages long, cited in its middle.
    first: dict[str, list[int]] = {}
    for p in index.get_passages(list(range(index.size))):
        first.setdefault(p.title, []).append(p.id)
    title, ids = max(first.items(), key=lambda kv: len(kv[1]))
    cited = ids[len(ids) // 2]
    view = ArticleView(inline, open_links=False)
    view.resize(520, 460)
    passage = index.get_passages([cited])[0]
    from ragdesk.core.types import RetrievedDoc

    view.show_passage(RetrievedDoc(passage.id, passage.title, passage.text, 0.61, 0.42,
                                   "Vital Articles"), lambda: article_around(index, cited),
                      rank=1)
    view.show()
    for _ in range(5):
        app.processEvents()
    view.grab().save(str(out / "article-view.png"))

    settings = Settings(data.settings_path)
    dlg = SettingsDialog(settings, data.root, inline, overrides={})
    dlg.show()
    app.processEvents()
    dlg.grab().save(str(out / "settings-dialog.png"))
    print(f"wrote 3 pictures to {out} (article: {title!r}, {len(ids)} passages)")
    index.close()
    catalog.close()


if __name__ == "__main__":
    main()
