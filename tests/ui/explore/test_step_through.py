"""The generation step-through: at every step the bars are the posterior stored with that
token (step 0: the retrieval prior), whether moved by buttons, slider or keys; the painted
bars have those lengths; RAG-Token and RAG-Sequence side by side. These step through the
sub-word pieces ("Sub-word pieces" on); words are checked at the end."""

from __future__ import annotations

import html

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from ragdesk.core.types import Answer
from ragdesk.ui.explore import StepThrough
from ragdesk.ui.explore.palette import rank_colour
from tests.ui.explore.helpers import synthetic_answer


def _expected(answer: Answer, step: int) -> list[float]:
    s = min(step, len(answer.tokens))
    return [d.prob for d in answer.docs] if s == 0 else answer.tokens[s - 1].posterior


def _check_step(w: StepThrough, answers: list[Answer], step: int) -> None:
    assert w.step() == step
    for panel, ans in zip(w.panels, answers, strict=True):
        want = _expected(ans, step)
        assert panel.bars.values() == want
        # The painted bars: each is its track's width times the stored value.
        for bar, track, v in zip(panel.bars.bar_rects(), panel.bars.track_rects(), want,
                                 strict=True):
            assert bar.width() == pytest.approx(track.width() * v, abs=1e-9)
        assert panel.bars.labels() == [f"[{i + 1}] {d.title}" for i, d in enumerate(ans.docs)]
        s = min(step, len(ans.tokens))
        if s:
            assert html.escape(ans.tokens[s - 1].text.strip()) in panel.token_label.text()


def test_buttons_walk_every_step_and_bars_equal_the_stored_posteriors(qtbot) -> None:  # type: ignore[no-untyped-def]
    ans = synthetic_answer("token", 9)
    w = StepThrough([ans])
    qtbot.addWidget(w)
    w.set_pieces(True)
    w.resize(700, 420)
    w.show()
    _check_step(w, [ans], 0)
    assert not w.prev_button.isEnabled()
    for step in range(1, 10):
        qtbot.mouseClick(w.next_button, Qt.MouseButton.LeftButton)
        _check_step(w, [ans], step)
    assert not w.next_button.isEnabled()
    for step in range(8, -1, -1):
        qtbot.mouseClick(w.prev_button, Qt.MouseButton.LeftButton)
        _check_step(w, [ans], step)


def test_keyboard_and_slider(qtbot) -> None:  # type: ignore[no-untyped-def]
    ans = synthetic_answer("sequence", 12, k=4, seed=3)
    w = StepThrough([ans])
    qtbot.addWidget(w)
    w.set_pieces(True)
    w.show()
    w.setFocus()
    qtbot.keyClick(w, Qt.Key.Key_Right)
    qtbot.keyClick(w, Qt.Key.Key_Right)
    _check_step(w, [ans], 2)
    qtbot.keyClick(w, Qt.Key.Key_End)
    _check_step(w, [ans], 12)
    qtbot.keyClick(w, Qt.Key.Key_Left)
    _check_step(w, [ans], 11)
    qtbot.keyClick(w, Qt.Key.Key_Home)
    _check_step(w, [ans], 0)
    for step in (5, 1, 12, 7):
        w.slider.setValue(step)
        _check_step(w, [ans], step)


def test_answer_so_far_grows_token_by_token(qtbot) -> None:  # type: ignore[no-untyped-def]
    ans = synthetic_answer("token", 7)
    w = StepThrough([ans])
    qtbot.addWidget(w)
    w.set_pieces(True)
    panel = w.panels[0]
    for step in range(1, 8):
        w.set_step(step)
        shown = panel.text_label.text()
        # Each token text appears, in order, up to this step and not beyond.
        pos = 0
        for t in ans.tokens[:step]:
            pos = shown.index(html.escape(t.text.strip()), pos)
        assert "…" in shown if step < 7 else "…" not in shown


def test_rag_token_and_rag_sequence_side_by_side(qtbot) -> None:  # type: ignore[no-untyped-def]
    tok = synthetic_answer("token", 6, seed=1)
    seq = synthetic_answer("sequence", 10, seed=2)
    w = StepThrough([tok, seq])
    qtbot.addWidget(w)
    w.set_pieces(True)
    w.show()
    assert [p.heading.text() for p in w.panels] == ["<b>RAG-Token</b>",
                                                   "<b>RAG-Sequence</b> · thorough"]
    assert w.slider.maximum() == 10
    for step in range(11):
        w.set_step(step)
        _check_step(w, [tok, seq], step)
    assert "finished" in w.panels[0].token_label.text()


def test_painted_bar_lengths_match_the_posterior(qtbot) -> None:  # type: ignore[no-untyped-def]
    ans = synthetic_answer("token", 4, k=5, seed=7)
    w = StepThrough([ans])
    qtbot.addWidget(w)
    w.set_pieces(True)
    w.resize(800, 480)
    w.show()
    qtbot.waitExposed(w)
    w.set_step(3)
    bars = w.panels[0].bars
    img = bars.grab().toImage()
    ratio = img.devicePixelRatio()
    for i, (track, v) in enumerate(zip(bars.track_rects(), ans.tokens[2].posterior,
                                       strict=True)):
        y = int(track.center().y() * ratio)
        colour = rank_colour(i)
        run = sum(1 for x in range(int(track.left() * ratio), int(track.right() * ratio))
                  if _close(QColor(img.pixel(x, y)), colour))
        assert run == pytest.approx(track.width() * ratio * v, abs=2.0)


def _close(a: QColor, b: QColor) -> bool:
    return abs(a.red() - b.red()) + abs(a.green() - b.green()) + abs(a.blue() - b.blue()) < 12


def test_empty_view_says_what_to_do(qtbot) -> None:  # type: ignore[no-untyped-def]
    w = StepThrough()
    qtbot.addWidget(w)
    w.show()
    assert w.empty_label.isVisible()
    assert not w.slider.isEnabled()
    w.set_answers([synthetic_answer("token", 3)])
    assert not w.empty_label.isVisible()
    assert w.slider.maximum() == 3


def test_show_answer_pairs_token_and_sequence_for_the_same_question(qtbot) -> None:  # type: ignore[no-untyped-def]
    w = StepThrough()
    qtbot.addWidget(w)
    seq = synthetic_answer("sequence", 5, seed=1)
    tok = synthetic_answer("token", 7, seed=1)  # same question, snapshot and passages
    w.show_answer(seq)
    assert [a.mode for a in w.answers()] == ["sequence"]
    w.show_answer(tok)
    assert [a.mode for a in w.answers()] == ["token", "sequence"]
    assert w.answers()[0] is tok and w.answers()[1] is seq
    for step in range(w.step_count + 1):
        w.set_step(step)
        _check_step(w, [tok, seq], step)
    # Another question replaces the pair.
    other = synthetic_answer("token", 3, seed=2, question="who painted the mona lisa")
    w.show_answer(other)
    assert w.answers() == [other]


def test_bar_values_read_as_percentages_like_the_chips(qtbot) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.units import percent

    ans = synthetic_answer("token", 3, seed=2)
    w = StepThrough([ans])
    qtbot.addWidget(w)
    bars = w.panels[0].bars
    assert bars.value_texts() == [percent(d.prob) for d in ans.docs]
    w.set_step(2)
    assert bars.value_texts() == [percent(v) for v in ans.tokens[1].posterior]
    assert all(t.endswith("%") and "." not in t for t in bars.value_texts())


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.usefixtures("no_app_style_sheet")
def test_the_source_named_in_a_step_reads_on_either_theme(qtbot, theme: str) -> None:  # type: ignore[no-untyped-def]
    import re

    from PySide6.QtGui import QPalette

    from ragdesk.ui.theme import contrast_ratio, dark_palette, light_palette

    ans = synthetic_answer("token", 10, k=5, seed=1)
    w = StepThrough([ans])
    qtbot.addWidget(w)
    w.setPalette(light_palette() if theme == "light" else dark_palette())
    w.set_pieces(True)
    panel = w.panels[0]
    bg = panel.palette().color(QPalette.ColorRole.Window)
    for step in range(1, 11):
        w.set_step(step)
        colours = re.findall(r"color:(#[0-9a-f]{6})", panel.token_label.text())
        assert colours
        assert all(contrast_ratio(QColor(c), bg) >= 4.5 for c in colours)
