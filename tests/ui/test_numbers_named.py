"""Every number says what it is, in one percent style: a chip's p(z|x) is "retrieval 95%",
the source bar, inspector, heat map scale and tuning results write percent as "60%", the
card's log-probability is "log p(answer)", and the Controls and the settings name the
answer options alike ("Passages (K)", "Answer length", never "1 tokens")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QFormLayout, QLabel, QSpinBox, QWidget

from ragdesk.core.options import AnswerOptions
from ragdesk.core.settings import Settings
from ragdesk.core.types import RetrievedDoc
from ragdesk.ui.chat.card import AnswerCard
from ragdesk.ui.controls import ControlsPanel
from ragdesk.ui.heatmap import PosteriorHeatMap
from ragdesk.ui.heatmap_panel import HeatMapPanel
from ragdesk.ui.inspector import PassageInspector
from ragdesk.ui.settings_dialog import SettingsDialog
from tests.ui.fakes import make_answer

PROBS = [0.948, 0.021, 0.012, 0.011, 0.008]


def _card(qtbot: Any) -> AnswerCard:
    answer = make_answer(k=5, n_tokens=2, seed=1)
    answer.docs[:] = [RetrievedDoc(id=d.id, title=d.title, text=d.text, score=d.score,
                                   prob=p, snapshot=d.snapshot)
                      for d, p in zip(answer.docs, PROBS, strict=True)]
    answer.logprob = -0.3912
    card = AnswerCard(1, answer.question, AnswerOptions(), "demo")
    qtbot.addWidget(card)
    card.finish(answer)
    return card


def test_a_chip_names_its_retrieval_probability(qtbot: Any) -> None:
    card = _card(qtbot)
    chips = card.chip_widgets()
    assert [c.full_text().split("   ")[-1] for c in chips] == [
        "retrieval 95%", "retrieval 2%", "retrieval 1%", "retrieval 1%", "retrieval 1%"]
    tip = chips[0].toolTip()
    assert "p(z|x) = 94.8%" in tip and "not the answer's confidence" in tip
    assert "0.95" not in chips[0].full_text()


def test_the_card_names_its_log_probability(qtbot: Any) -> None:
    meta = _card(qtbot).meta_label.text().replace("\u00a0", " ").replace("\u2060", "")
    assert "log p(answer) = -0.39" in meta and "p(y|x)" not in meta


def test_the_source_bar_writes_percent_without_a_space(qtbot: Any) -> None:
    card = _card(qtbot)
    texts = card.legend.texts()
    assert texts and all(re.fullmatch(r"\[\d\] \d+%", t) for t in texts), texts
    counts = card.legend.counts  # tokens cited from each passage: each share of their sum
    shares = [(counts[r] if r < len(counts) else 0) / sum(counts) for r in range(card.legend.k)]
    assert texts == [f"[{r + 1}] {round(100 * x)}%" for r, x in enumerate(shares)]


def test_the_inspector_gives_its_numbers_in_percent(qtbot: Any) -> None:
    answer = _card(qtbot).answer
    assert answer is not None
    ins = PassageInspector()
    qtbot.addWidget(ins)
    ins.set_answer(answer)
    ins.show_passage(0)
    # the τ part is kept on one line
    assert ins.fact_labels["prob"].text() == \
        f"retrieval 95%  (τ\u00a0=\u00a0{answer.temperature:.3g})"
    assert "94.8%" in ins.fact_labels["prob"].toolTip()
    share = ins.fact_labels["share"].text()
    mean = sum(t.posterior[0] for t in answer.tokens) / len(answer.tokens)
    n = sum(1 for t in answer.tokens if t.source == 0)
    assert share == (f"{n} of 2 tokens ({round(100 * n / 2)}%) · mean posterior "
                     f"{100 * mean:.0f}%")
    assert "0." not in share


def test_the_heat_maps_scale_and_tooltips_read_in_percent_like_its_cells(qtbot: Any) -> None:
    answer = make_answer(k=5, n_tokens=3, seed=2)
    panel = HeatMapPanel()
    qtbot.addWidget(panel)
    panel.map.set_data(answer.tokens, answer.docs)
    panel.set_mode("token", answer.question)
    assert panel.colour_bar.labels() == ["100", "50", "0"]
    assert "(%)" in panel.caption.text()
    hm: PosteriorHeatMap = panel.map
    tip = hm.tooltip_text(0, 1)
    assert f"posterior {100 * hm.value(0, 1):.1f}%" in tip
    assert answer.question in panel.caption.toolTip()


def test_tuning_results_write_percent_without_a_space() -> None:
    from ragdesk.core.progress import TrainingUpdate
    from ragdesk.core.training.tune import TuneResult
    from ragdesk.ui.tune_texts import result_text, step_line

    u = TrainingUpdate(done=0, total=0, message="", rate=None, eta_s=None, k=5, top_k=0.284)
    assert step_line(u).endswith("held-out top-5 28.4%")
    r = TuneResult(pack="t", base_pack="starter", snapshot="s", k=5, top_k_before=None,
                   top_k_after=0.284, steps=3, trained_on=8, held_out=2, folder=Path("f"))
    assert "(2 questions): – → 28.4% after" in result_text(r)


def _form_labels(widget: QWidget) -> dict[str, QWidget]:
    """Each form row's label text (without its "&") and its field."""
    out: dict[str, QWidget] = {}
    for form in widget.findChildren(QFormLayout):
        for row in range(form.rowCount()):
            label = form.itemAt(row, QFormLayout.ItemRole.LabelRole)
            field = form.itemAt(row, QFormLayout.ItemRole.FieldRole)
            lw = label.widget() if label is not None else None
            fw = field.widget() if field is not None else None
            if isinstance(lw, QLabel) and lw.text() and fw is not None:
                out[lw.text().replace("&", "")] = fw
    return out


def test_the_controls_and_the_settings_name_the_answer_options_alike(
        qtbot: Any, tmp_path: Path) -> None:
    from ragdesk.ui.background import Background

    panel = ControlsPanel(AnswerOptions(n_docs=5, max_new_tokens=1), "tiny")
    qtbot.addWidget(panel)
    never: Background = lambda *_a, **_k: None  # noqa: E731 - nothing is saved here
    dialog = SettingsDialog(Settings(tmp_path / "settings.json"), tmp_path, never,
                            overrides={})
    qtbot.addWidget(dialog)
    controls, settings = _form_labels(panel), _form_labels(dialog)
    for name in ("Passages (K)", "Answer length"):
        assert name in controls and name in settings, (list(controls), list(settings))
    assert not {"Passages K", "Max length", "Answer length (tokens)"} & (set(controls)
                                                                        | set(settings))
    # The unit agrees with the number, also where the value was set with signals blocked.
    length = controls["Answer length"]
    assert isinstance(length, QSpinBox) and length.text() == "1 token"
    length.setValue(32)
    assert length.text() == "32 tokens"
    in_settings = settings["Answer length"]
    assert isinstance(in_settings, QSpinBox)
    for n, want in ((1, "1 token"), (2, "2 tokens")):
        in_settings.setValue(n)
        assert in_settings.text() == want
