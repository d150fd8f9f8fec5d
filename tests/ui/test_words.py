"""Words as a reader sees them in the heat map and the step-through: Gemma writes "28 July
1914" as " ", "2", "8", " July", " ", "1", "9", "1", "4"; the views show "28", "July", "1914"
with the pieces one click away, and never a token id."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import Qt

from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc
from ragdesk.ui.explore import StepThrough
from ragdesk.ui.heatmap_panel import HeatMapPanel
from ragdesk.ui.words import merge_pieces, word_spans

PIECES = [" The", " war", " began", " on", " ", "2", "8", " July", " ", "1", "9", "1", "4", "."]
WORDS = ["The", "war", "began", "on", "28", "July", "1914."]


def gemma_answer(mode: str = "token", k: int = 4, seed: int = 0) -> Answer:
    rng = np.random.default_rng(seed)
    docs = [RetrievedDoc(id=i, title=f"Passage {i + 1}", text="…", score=1.0 - i,
                         prob=1.0 / k) for i in range(k)]
    tokens = [AnswerToken(id=236743 + i, text=t,
                          posterior=[float(x) for x in rng.dirichlet(np.ones(k))])
              for i, t in enumerate(PIECES)]
    return Answer(question="when did the first world war begin", text="".join(PIECES).strip(),
                  token_ids=[t.id for t in tokens], tokens=tokens, docs=docs, logprob=-5.0,
                  mode=mode, decoding="fast" if mode == "sequence" else None)


def test_pieces_merge_into_the_words_a_reader_sees() -> None:
    ans = gemma_answer()
    words = merge_pieces(ans.tokens, "token")
    assert [w.label for w in words] == WORDS
    assert [len(w.pieces) for w in words] == [1, 1, 1, 1, 3, 1, 6]
    # A lone space starts a word that the next pieces join; a piece starting with a space
    # after real text starts the next word.
    assert word_spans([AnswerToken(0, " ", []), AnswerToken(1, " July", [])]) == [(0, 1)]
    # White space at the end is no column of its own ("July", "␣" was).
    assert word_spans([AnswerToken(0, "July", []), AnswerToken(1, " ", [])]) == [(0, 1)]
    assert word_spans([AnswerToken(0, " ", [])]) == [(0,)]
    year = words[-1]
    want = np.mean([ans.tokens[i].posterior for i in year.pieces], axis=0)
    assert year.posterior == pytest.approx(want.tolist())
    seq = merge_pieces(gemma_answer("sequence").tokens, "sequence")[-1]
    assert list(seq.posterior) == gemma_answer("sequence").tokens[-1].posterior
    # Its source is the one most of its pieces show (what the chat colours them with).
    sources = [ans.tokens[i].source for i in year.pieces]
    assert sources.count(year.source) == max(sources.count(s) for s in sources)


def test_the_heat_map_has_a_column_per_word_and_the_pieces_one_click_away(qtbot: Any) -> None:
    ans = gemma_answer()
    panel = HeatMapPanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 300)
    panel.show()
    panel.set_mode(ans.mode, ans.question)
    hm = panel.map
    hm.set_data(ans.tokens, ans.docs)
    assert [hm._token_label(i) for i in range(len(hm.words))] == WORDS
    assert "per word" in panel.caption.text()
    assert "which passage generated each word" in panel.caption.toolTip()
    year = len(WORDS) - 1
    pieces = hm.words[year].pieces
    for k in range(4):
        assert hm.value(year, k) == pytest.approx(
            np.mean([ans.tokens[i].posterior[k] for i in pieces]))
    tip = hm.tooltip_text(year, 0)
    assert "“1914.”" in tip and "mean over pieces" in tip and "␣" in tip
    with qtbot.waitSignal(hm.cellClicked) as sig:
        qtbot.mouseClick(hm, Qt.MouseButton.LeftButton,
                         pos=hm.cell_rect(year, 2).center().toPoint())
    assert sig.args == [year, 2]
    panel.pieces_box.click()  # the per-piece view
    assert len(hm.words) == len(PIECES) and "per piece" in panel.caption.text()
    assert hm._token_label(4) == "␣" and hm._token_label(5) == "2"
    assert hm.value(5, 1) == ans.tokens[5].posterior[1]


def test_the_heat_map_merges_pieces_while_they_stream(qtbot: Any) -> None:
    ans = gemma_answer()
    panel = HeatMapPanel()
    qtbot.addWidget(panel)
    panel.show()
    hm = panel.map
    hm.set_data([], None)
    for tok in ans.tokens:
        hm.append_token(tok)
    assert [w.label for w in hm.words] == WORDS
    assert len(hm._xs) == len(WORDS) + 1  # one column edge per word
    qtbot.waitUntil(lambda: not hm._relayout_timer.isActive())
    assert hm.cell_at(hm.cell_rect(len(WORDS) - 1, 0).center()) == (len(WORDS) - 1, 0)


@pytest.mark.parametrize("mode", ["token", "sequence"])
def test_the_step_through_steps_by_word_and_shows_no_token_ids(qtbot: Any, mode: str) -> None:
    ans = gemma_answer(mode)
    w = StepThrough([ans])
    qtbot.addWidget(w)
    w.show()
    panel = w.panels[0]
    assert w.slider.maximum() == len(WORDS)
    seen = []
    for step in range(len(WORDS) + 1):
        w.set_step(step)
        seen.append(panel.token_label.text())
        assert not re.search(r"\bid\b", panel.token_label.text())
        assert str(ans.tokens[0].id) not in panel.token_label.text()
    assert "“1914.”" in seen[-1] and "6 pieces" in seen[-1]
    assert panel.bars.values() == list(panel.words[-1].posterior)
    # The pieces, one click away, keep the place in the answer.
    w.set_step(5)  # "28"
    w.pieces_box.click()
    assert w.slider.maximum() == len(PIECES)
    assert w.step() == 7  # "28" ends with the answer's 7th piece
    assert panel.bars.values() == ans.tokens[6].posterior
    assert "“8”" in panel.token_label.text()
    w.pieces_box.click()
    assert w.step() == 5 and w.slider.maximum() == len(WORDS)
