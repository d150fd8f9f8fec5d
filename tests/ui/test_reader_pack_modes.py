"""The GUI says how an answer was read. An answer read together (all passages in one prompt,
the reader pack's default) has no per-passage rows: its tokens carry the retrieval prior,
and their sources are the passages their spans are quoted from. The card, the token tooltip,
the heat map and the step-through say so and show the quoted-from passage instead."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette

from ragdesk.core.options import AnswerOptions
from ragdesk.core.types import Answer, AnswerToken
from ragdesk.ui.chat.card import AnswerCard
from ragdesk.ui.chat.token_text import distribution_html
from ragdesk.ui.explore.step_through import AnswerSteps
from ragdesk.ui.heatmap import CELL_H
from ragdesk.ui.heatmap_panel import HeatMapPanel
from ragdesk.ui.theme import passage_tint
from tests.ui.fakes import make_answer

# Word by word: where each word's span is quoted from (None: no retrieved passage holds it).
QUOTES = [1, 1, None, 3, None]


def together_answer() -> Answer:
    """Five words read together: each token carries the retrieval prior p(z|x), and the
    words quoted from a passage name it."""
    base = make_answer(n_tokens=len(QUOTES), mode="together")
    prior = [d.prob for d in base.docs]
    tokens = [AnswerToken(t.id, t.text, list(prior), quoted_from=q)
              for t, q in zip(base.tokens, QUOTES, strict=True)]
    return dataclasses.replace(base, tokens=tokens, decoding=None)


def heat_panel(qtbot: Any, answer: Answer) -> HeatMapPanel:
    panel = HeatMapPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 320)
    panel.show()
    qtbot.waitExposed(panel)
    panel.set_mode(answer.mode, answer.question)
    panel.map.set_data(answer.tokens, answer.docs)
    return panel


def test_the_heat_map_of_an_answer_read_together_shows_the_quoted_passage_per_word(
        qtbot: Any) -> None:
    answer = together_answer()
    panel = heat_panel(qtbot, answer)
    hm = panel.map
    # One row, not one per passage: the per-passage numbers would all be the prior.
    assert hm.grid_rect().height() == CELL_H
    assert "read together" in panel.caption.text().lower()
    assert not panel.colour_bar.isVisibleTo(panel)  # no probabilities, so no scale
    assert [hm.quoted_cell_text(i) for i in range(len(QUOTES))] == [
        f"[{q + 1}]" if q is not None else "–" for q in QUOTES]
    # Painted in the quoted passage's tint, not in a heat colour.
    image = hm.grab().toImage()
    for i, q in enumerate(QUOTES):
        r = hm.cell_rect(i, 0)
        c = image.pixelColor(int(r.x()) + 3, int(r.y()) + 3)
        want = (passage_tint(q, hm.palette()) if q is not None
                else hm.palette().color(QPalette.ColorRole.Base))
        assert abs(c.red() - want.red()) + abs(c.green() - want.green()) \
            + abs(c.blue() - want.blue()) < 12, (i, c.name(), want.name())
    # A click shows the passage the word is quoted from; a word none holds shows nothing.
    with qtbot.waitSignal(hm.cellClicked) as clicked:
        qtbot.mouseClick(hm, Qt.MouseButton.LeftButton, pos=hm.cell_rect(3, 0).center().toPoint())
    assert clicked.args == [3, 3]
    with qtbot.assertNotEmitted(hm.cellClicked):
        qtbot.mouseClick(hm, Qt.MouseButton.LeftButton, pos=hm.cell_rect(2, 0).center().toPoint())
    assert "quoted from [2]" in hm.tooltip_text(0, 0)
    assert "posterior" not in hm.tooltip_text(0, 0)


def test_the_heat_map_keeps_its_rows_for_the_papers_modes(qtbot: Any) -> None:
    answer = make_answer(n_tokens=5, mode="token")
    panel = heat_panel(qtbot, answer)
    assert panel.map.grid_rect().height() == CELL_H * len(answer.docs)
    assert panel.colour_bar.isVisibleTo(panel)
    assert "read together" not in panel.caption.text().lower()


def test_the_token_tooltip_of_an_answer_read_together_names_its_quote(qtbot: Any) -> None:
    answer = together_answer()
    quoted = distribution_html(answer.tokens[0], answer.docs, "together")
    plain = re.sub(r"<[^>]+>", "", quoted).replace("&nbsp;", " ")
    assert f"quoted from ■ [2] {answer.docs[1].title}" in plain
    assert "%" not in plain and "p(z" not in plain  # no distribution pretended
    alone = re.sub(r"<[^>]+>", "", distribution_html(answer.tokens[2], answer.docs,
                                                      "together"))
    assert "none of the retrieved passages" in alone
    # The paper's modes keep their distribution.
    assert "%" in distribution_html(answer.tokens[0], answer.docs, "token")


def test_the_card_says_the_mode_the_answer_was_read_in(qtbot: Any) -> None:
    answer = together_answer()
    # Asked in RAG-Token (the panel's mode before the reader pack's own took over): the
    # card says how the answer was really read.
    card = AnswerCard(1, answer.question, AnswerOptions(n_docs=len(answer.docs), mode="token"),
                      answer.snapshot)
    qtbot.addWidget(card)
    card.show()
    for tok in answer.tokens:
        card.append_token(tok)
    card.finish(answer)
    meta = card.meta_label.text().replace("\xa0", " ").replace("\u2060", "")
    assert meta.startswith("Read together") and "RAG-Token" not in meta


def test_the_step_through_of_an_answer_read_together_says_nothing_moves(qtbot: Any) -> None:
    answer = together_answer()
    steps = AnswerSteps(answer)
    qtbot.addWidget(steps)
    steps.show()
    assert "Read together" in steps.heading.text()
    prior = [d.prob for d in answer.docs]
    for step, q in enumerate(QUOTES, start=1):
        steps.set_step(step)
        assert "read together" in steps.caption.text().lower()
        assert "prior" in steps.caption.text()
        text = re.sub(r"<[^>]+>", "", steps.token_label.text())
        assert (f"quoted from [{q + 1}]" in text) if q is not None \
            else "held by none of the passages" in text
        assert "mostly from" not in text
        assert steps.bars.values() == prior  # the stored floats: the retrieval prior
    # Only the words quoted from a passage wear a passage's colour in the answer so far.
    assert steps.text_label.text().count("background-color") == sum(
        q is not None for q in QUOTES)


def test_a_pack_answers_in_its_own_mode_until_a_mode_is_picked_for_it(qtbot: Any) -> None:
    """`ragdesk models use` / `setup-reader` choose a pack without a reading mode: the window
    then answers in the pack's own, as `ragdesk ask` does, whatever mode the settings keep
    from other packs; a mode picked in the controls is remembered for that pack alone."""
    from ragdesk.ui.controls import ControlsPanel
    from ragdesk.ui.infos import PackInfo

    packs = [PackInfo("starter", "causal", True, default_mode="token"),
             PackInfo("reader-1.5b", "causal", True, default_mode="together"),
             PackInfo("custom", "causal", True)]
    # the settings' mode is the one the window last showed (the starter's RAG-Token)
    panel = ControlsPanel(AnswerOptions(mode="sequence"), "reader-1.5b")
    qtbot.addWidget(panel)
    written: list[AnswerOptions] = []
    picked: list[tuple[str, str]] = []
    panel.paramsChanged.connect(written.append)
    panel.modeChosen.connect(lambda pack, mode: picked.append((pack, mode)))
    panel.set_packs(packs, "reader-1.5b")
    assert panel.params().mode == "together" and "Read together" in panel.note.text()
    assert written == [] and picked == []  # shown, not the user's choice
    # a pack with no mode of its own reads in the settings' one
    panel.pack.setCurrentIndex(panel.pack.findData("custom"))
    assert panel.params().mode == "sequence" and picked == []
    panel.pack.setCurrentIndex(panel.pack.findData("reader-1.5b"))
    panel.mode.setCurrentIndex(panel.mode.findData("token"))  # the user picks
    assert picked == [("reader-1.5b", "token")] and written[-1].mode == "token"
    panel.pack.setCurrentIndex(panel.pack.findData("starter"))
    assert panel.params().mode == "token"
    panel.mode.setCurrentIndex(panel.mode.findData("sequence"))
    assert picked[-1] == ("starter", "sequence")
    panel.pack.setCurrentIndex(panel.pack.findData("reader-1.5b"))
    assert panel.params().mode == "token"  # its own pick, not the starter's
    panel.set_packs(packs, "reader-1.5b")  # a later listing keeps the pick
    assert panel.params().mode == "token"
    assert len(picked) == 2

    # the picks kept in the settings, at the next start
    again = ControlsPanel(AnswerOptions(mode="sequence"), "reader-1.5b",
                          pack_modes={"reader-1.5b": "token"})
    qtbot.addWidget(again)
    assert again.params().mode == "token"  # before the packs are listed
    again.set_packs(packs, "reader-1.5b")
    assert again.params().mode == "token"
    again.pack.setCurrentIndex(again.pack.findData("starter"))
    assert again.params().mode == "token"


def test_the_window_remembers_a_picked_mode_for_its_pack_only(tmp_path: Path,
                                                              qtbot: Any) -> None:
    from ragdesk.core.options import PACK_MODES_KEY, pack_mode_choices
    from ragdesk.core.settings import Settings
    from ragdesk.ui.ops import OpRunner
    from ragdesk.ui.window_settings import SettingsWriter

    settings = Settings(tmp_path / "settings.json")
    settings.update({PACK_MODES_KEY: {"starter": "sequence", "broken": 7}, "mode": "token"})
    runner = OpRunner()
    writer = SettingsWriter(settings, runner)
    writer.choose_pack_mode("reader-1.5b", "token")
    qtbot.waitUntil(lambda: "reader-1.5b" in pack_mode_choices(settings.get(PACK_MODES_KEY)))
    fresh = Settings(tmp_path / "settings.json")
    assert fresh.get(PACK_MODES_KEY) == {"starter": "sequence", "reader-1.5b": "token"}
    assert fresh.get("mode") == "token"
    runner.shutdown()


def test_the_starter_chosen_after_the_reader_reads_in_rag_token_again(qtbot: Any) -> None:
    """The starter's confidence model judges RAG-Token answers only: chosen back after the
    reader pack it must not keep reading together (and lose its confidence)."""
    from ragdesk.core.models.packs import starter_spec
    from ragdesk.core.paths import DataDir
    from ragdesk.ui.controls import ControlsPanel
    from ragdesk.ui.infos import PackInfo

    starter_mode = starter_spec(DataDir(Path("unused"))).default_mode
    assert starter_mode == "token"
    packs = [PackInfo("starter", "causal", True, default_mode=starter_mode),
             PackInfo("reader-1.5b", "causal", True, default_mode="together")]
    panel = ControlsPanel(AnswerOptions(), "starter")
    qtbot.addWidget(panel)
    panel.set_packs(packs, "starter")
    panel.pack.setCurrentIndex(panel.pack.findData("reader-1.5b"))
    assert panel.params().mode == "together"
    panel.pack.setCurrentIndex(panel.pack.findData("starter"))
    assert panel.params().mode == "token"


def test_a_mode_picked_in_the_window_is_kept_for_its_pack(qtbot: Any, window: Any) -> None:
    from ragdesk.core.options import PACK_MODES_KEY, pack_mode_choices

    settings = window.backend.ctx.settings
    pack = window.controls.pack.currentData()
    mode = window.controls.mode
    other = "sequence" if mode.currentData() != "sequence" else "token"
    mode.setCurrentIndex(mode.findData(other))
    qtbot.waitUntil(lambda: pack_mode_choices(settings.get(PACK_MODES_KEY)) == {pack: other},
                    timeout=10_000)
