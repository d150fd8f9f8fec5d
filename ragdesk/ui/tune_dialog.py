"""Index ▸ Tune the retriever…: train the question encoder of the pack in use on a file of
questions, against the active snapshot, and offer the tuned pack beside it.

The question encoder alone learns to rank the passages that hold a gold answer first (the
passages objective); the reader is not loaded, so any pack can be tuned, in minutes. The
file is checked before anything trains (its questions, and how many have a gold answer in
the passages the pack retrieves, as deep as training looks: only those can teach it). The
job runs on the jobs lane with the stage, the step counts and the time left; Cancel keeps a
checkpoint, and the same job started again resumes from it. At the end the held-out
accuracy before and after is shown, and the tuned pack can be chosen for the next answer (or
the base pack again); a run that measured no gain says so and does not recommend it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.export import MODE_NAMES
from ragdesk.core.progress import ProgressUpdate, TrainingUpdate
from ragdesk.core.units import plural
from ragdesk.ui.backend import Backend
from ragdesk.ui.dialogs import (
    FittedDialog,
    JobPanel,
    report_html,
    set_flagged_text,
    start_folder,
)
from ragdesk.ui.library import Library
from ragdesk.ui.ops import Lane, Op, OpRunner
from ragdesk.ui.reports import ErrorReport
from ragdesk.ui.state import AppState
from ragdesk.ui.tune_texts import check_text, rate_text, result_text, step_line

if TYPE_CHECKING:
    from ragdesk.ui.backend import QuestionCheck, TuneChoices, TuneResult

TUNE_TITLE = "Tuning the retriever"
CHECK_TITLE = "Checking the questions"
# Learning rates offered around the default; docs/finetuning.md chose 2e-5 over 5e-5 for
# the passages objective on the starter pack.
LEARNING_RATES = (1e-5, 2e-5, 5e-5, 1e-4)
FILE_FILTER = "Questions (*.jsonl *.json);;All files (*)"


@dataclasses.dataclass(frozen=True)
class ReadingMode:
    """The controls' Mode, read and picked: the tuned pack is the base pack's reader with
    another retriever, so it reads as the base pack was read, not in its own default."""

    current: Callable[[], str]
    pick: Callable[[str], None]


class TuneDialog(FittedDialog):
    """Non-modal: the user can keep asking while the retriever trains."""

    def __init__(self, parent: QWidget, state: AppState, ops: OpRunner, library: Library,
                 backend: Backend, mode: ReadingMode | None = None) -> None:
        super().__init__(parent)
        self.state, self.ops, self.library, self.backend = state, ops, library, backend
        self.mode = mode
        self.setObjectName("TuneDialog")
        self.setWindowTitle("Tune the retriever")
        self.setModal(False)
        self.defaults: TuneChoices | None = None
        self.check: QuestionCheck | None = None
        self.resume_step: int | None = None
        self.job: Op[TuneResult] | None = None
        self.outcome: TuneResult | None = None
        self.done_with: tuple[str, TuneChoices, str] | None = None  # the finished job's inputs
        self.chosen = False  # Use, Keep or Back was pressed for the outcome shown
        self.mode_note = ""  # how the tuned pack reads, once used
        self.base_pack = state.pack
        self.snapshot = state.active_snapshot
        lay = QVBoxLayout(self)
        lay.setContentsMargins(16, 14, 16, 12)
        lay.setSpacing(10)
        self.intro = QLabel()
        self.intro.setWordWrap(True)
        lay.addWidget(self.intro)
        lay.addLayout(self._file_row())
        self.check_label = QLabel()
        self.check_label.setObjectName("TuneCheck")
        self.check_label.setWordWrap(True)
        lay.addWidget(self.check_label)
        lay.addLayout(self._choices())
        self.job_panel = JobPanel()
        self.job_panel.cancelRequested.connect(lambda op_id: ops.cancel(Lane.JOBS, op_id))
        lay.addWidget(self.job_panel)
        self.steps = QLabel()
        self.steps.setObjectName("TuneSteps")
        lay.addWidget(self.steps)
        self.message = QLabel()
        self.message.setObjectName("TuneMessage")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.message)
        lay.addLayout(self._offer_row())
        lay.addStretch(1)  # room left by a finished job's panel stays below, not between rows
        lay.addLayout(self._buttons())
        self.setMinimumWidth(620)
        self._show_steps("")
        self._say("")
        self.check_label.setText("Choose a file of questions with their answers; it is checked "
                                 "before anything trains.")
        self._set_intro()
        self._update_buttons()
        state.packChanged.connect(lambda _p: self._context_changed())
        state.activeSnapshotChanged.connect(lambda _s: self._context_changed())
        Op(lambda _c: backend.tune_defaults(), parent=self).success(
            self._set_defaults).run(ops)

    # ---- construction --------------------------------------------------------------------

    def _file_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        label = QLabel("&Questions:")
        row.addWidget(label)
        self.path = QLineEdit()
        label.setBuddy(self.path)
        self.path.setObjectName("TunePath")
        self.path.setPlaceholderText('A JSONL file: {"question": "…", "answer": ["…"]} per line')
        self.path.editingFinished.connect(lambda: self.choose_file(self.path.text()))
        row.addWidget(self.path, 1)
        self.browse = QPushButton("&Choose…")
        self.browse.clicked.connect(self._browse)
        row.addWidget(self.browse)
        return row

    def _choices(self) -> QFormLayout:
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.FieldsStayAtSizeHint)
        self.epochs = QSpinBox()
        self.epochs.setRange(1, 100)
        self.epochs.setSuffix(" epoch")
        self.epochs.valueChanged.connect(self._epochs_changed)
        self.lr = QComboBox()
        # its items come after it is first shown, when the defaults arrive
        self.lr.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.held_out = QSpinBox()
        self.held_out.setRange(5, 50)
        self.held_out.setSuffix("% of the questions, to measure on")
        for text, field in (("&Passes over the questions:", self.epochs),
                            ("&Learning rate:", self.lr), ("&Held out:", self.held_out)):
            label = QLabel(text)
            label.setBuddy(field)
            form.addRow(label, field)
        for w in (self.epochs, self.held_out):
            w.valueChanged.connect(lambda _v: self._choices_changed())
        self.lr.currentIndexChanged.connect(lambda _i: self._choices_changed())
        self.choice_widgets: tuple[QWidget, ...] = (self.epochs, self.lr, self.held_out)
        return form

    def _offer_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.use_tuned, self.keep_base = QPushButton(), QPushButton()
        for b, name, slot in ((self.use_tuned, "UseTuned", self.use_tuned_pack),
                              (self.keep_base, "KeepBase", self.keep_base_pack)):
            b.setObjectName(name)
            b.clicked.connect(slot)
            b.setVisible(False)
            row.addWidget(b)
        row.addStretch(1)
        return row

    def _buttons(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.addStretch(1)
        self.start_button = QPushButton("&Start")
        self.start_button.setObjectName("TuneStart")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.start)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close)
        row.addWidget(self.start_button)
        row.addWidget(self.close_button)
        return row

    def _set_intro(self) -> None:
        snapshot = self.state.active_snapshot or "the active snapshot"
        self.intro.setText(
            f"Trains the question encoder of <b>{self.base_pack}</b> on your questions to "
            f"rank the passages of <b>{snapshot}</b> that hold a gold answer first. The "
            "reader is not even loaded, so it works for every pack (the 1.5 GB reader pack "
            "too) and takes minutes. The tuned pack is added beside it; nothing of the pack "
            "in use is changed.")

    def _next_base(self) -> str:
        """The pack the next job tunes: the one in use, except the tuned pack just offered,
        which stands for its base (Use must not make the same file tune the tuned pack)."""
        r = self.outcome
        return r.base_pack if r is not None and self.state.pack == r.pack else self.state.pack

    def _context_changed(self) -> None:
        """Another pack or snapshot: the next job starts from them, so the file is checked
        against them (a running job keeps its own)."""
        self._show_outcome()
        base, snapshot = self._next_base(), self.state.active_snapshot
        if self.job is not None or (base, snapshot) == (self.base_pack, self.snapshot):
            return
        self.base_pack, self.snapshot = base, snapshot
        self._set_intro()
        if self.path.text().strip():
            self.choose_file(self.path.text(), again=True)

    def _set_defaults(self, choices: TuneChoices) -> None:
        # The widgets first, the defaults last: each setValue reports a change, and
        # choices() reads every widget once the defaults are known.
        self.epochs.setValue(choices.epochs)
        rates = sorted({*LEARNING_RATES, choices.lr})
        self.lr.blockSignals(True)
        for r in rates:
            self.lr.addItem(rate_text(r) + ("  (default)" if r == choices.lr else ""), r)
        self.lr.setCurrentIndex(rates.index(choices.lr))
        self.lr.blockSignals(False)
        self.held_out.setValue(round(choices.held_out * 100))
        self.defaults = choices
        self._refresh_resume()  # a file checked before the defaults came may resume

    # ---- the file ------------------------------------------------------------------------

    def _browse(self) -> None:
        dlg = QFileDialog(self, "Questions to tune on", start_folder(self.path.text()),
                          FILE_FILTER)
        dlg.setFileMode(QFileDialog.FileMode.ExistingFile)
        dlg.fileSelected.connect(self.choose_file)
        dlg.open()

    def choose_file(self, path: str, again: bool = False) -> None:
        """Check ``path`` on the jobs lane: it loads the pack's question encoder.
        ``again``: for another pack or snapshot; what the dialog says stays."""
        path = path.strip()
        if not path or (self.check is not None and str(self.check.path) == path
                        and not again):
            return
        self.path.setText(path)
        self.check = None
        self.resume_step = None
        if not again:
            self._say("")
            self._show_outcome()  # the last job's pack stays offered until the next starts
        set_flagged_text(self.check_label, "Checking the questions…", error=False)
        pack, choices = self.base_pack, self.choices()

        def checked(check: QuestionCheck) -> None:
            if self.path.text().strip() != path:
                return  # another file was chosen meanwhile
            self.check = check
            set_flagged_text(self.check_label, check_text(check), error=check.answerable == 0)
            self._refresh_resume()

        def failed(report: ErrorReport) -> None:
            if self.path.text().strip() == path:
                set_flagged_text(self.check_label, "" if report.cancelled
                                 else report_html(report), error=True)
                self._update_buttons()

        Op(lambda _c: self.backend.check_tune_questions(path, pack, choices), lane=Lane.JOBS,
           title=CHECK_TITLE, parent=self).success(checked).failure(failed).run(self.ops)
        self._update_buttons()

    # ---- choices and resuming ------------------------------------------------------------

    def choices(self) -> TuneChoices | None:
        if self.defaults is None:
            return None
        return dataclasses.replace(self.defaults, epochs=self.epochs.value(),
                                   lr=float(self.lr.currentData()),
                                   held_out=self.held_out.value() / 100)

    def _inputs(self) -> tuple[str, TuneChoices, str] | None:
        choices = self.choices()
        if self.check is None or choices is None:
            return None
        return str(self.check.path), choices, self.base_pack

    def _epochs_changed(self, n: int) -> None:
        self.epochs.setSuffix(" epoch" if n == 1 else " epochs")

    def _choices_changed(self) -> None:
        self._refresh_resume()  # the last job's pack stays offered until the next starts

    def _refresh_resume(self, then: Callable[[], None] | None = None) -> None:
        """Whether Start resumes: the job with these inputs has a checkpoint."""
        check, choices = self.check, self.choices()
        self.resume_step = None
        self._update_buttons()
        if check is None or choices is None:
            return
        path, pack = str(check.path), self.base_pack

        def known(step: int | None) -> None:
            if self.choices() == choices and self.check is check:
                self.resume_step = step
                self._update_buttons()
                if then is not None:
                    then()

        Op(lambda _c: self.backend.tune_resumable(path, pack, choices),
           parent=self).success(known).failure(lambda _r: None).run(self.ops)

    def _update_buttons(self) -> None:
        running = self.job is not None
        ready = (self.check is not None and self.check.answerable > 0
                 and self.defaults is not None)
        finished = self.done_with is not None and self.done_with == self._inputs()
        self.start_button.setEnabled(ready and not running and not finished)
        self.start_button.setText("&Resume" if self.resume_step else "&Start")
        self.start_button.setToolTip(
            f"Continue from the checkpoint at step {self.resume_step:,}" if self.resume_step
            else "This job is done: choose another file or other choices to tune again"
            if finished else "")
        for w in self.choice_widgets:
            w.setEnabled(not running and self.defaults is not None)
        for w in (self.path, self.browse):
            w.setEnabled(not running)
        self._pick_default()

    # ---- the job -------------------------------------------------------------------------

    def start(self) -> None:
        choices, check = self.choices(), self.check
        if choices is None or check is None or self.job is not None:
            return
        self._say("")
        self.outcome = None
        for b in (self.use_tuned, self.keep_base):
            b.setVisible(False)
        self._show_steps("")
        path, pack = str(check.path), self.base_pack
        op = Op(lambda c: self.backend.tune(path, pack, choices, c.progress, c.cancel),
                lane=Lane.JOBS, title=TUNE_TITLE, parent=self)
        self.job = op.started(lambda: self.job_panel.start(op)).progress(
            lambda u: self._progress(op, u)).success(self._done).failure(self._failed)
        op.run(self.ops)
        self._update_buttons()

    def _progress(self, op: Op[TuneResult], u: ProgressUpdate) -> None:
        self.job_panel.update_progress(op, u)
        if isinstance(u, TrainingUpdate):
            self._show_steps(step_line(u))

    def _ended(self) -> None:
        if self.job is not None:
            self.job_panel.finish(self.job)
        self.job = None

    def _done(self, result: TuneResult) -> None:
        self._ended()
        self.outcome = result
        self.done_with = self._inputs()
        self.library.reload_packs()  # the controls list the tuned pack
        self.chosen, self.mode_note = False, ""
        self._show_outcome()
        (self.use_tuned if result.gained else self.keep_base).setFocus()
        self._refresh_resume()

    def _failed(self, report: ErrorReport) -> None:
        self._ended()
        if report.cancelled:
            self._refresh_resume(then=self._say_cancelled)
        else:
            self._say(report_html(report), error=True)
            self._refresh_resume()

    def _say_cancelled(self) -> None:
        if self.resume_step:
            self._say(f"Cancelled after {plural(self.resume_step, 'step')}, kept in a "
                      "checkpoint: Resume continues from there.")
        else:
            self._say("Cancelled before the first step; Start begins again.")

    # ---- the outcome --------------------------------------------------------------------

    def use_tuned_pack(self) -> None:
        r, reading = self.outcome, self.mode
        if r is None:
            return
        mode = reading.current() if reading is not None else ""
        self.chosen = True
        self.library.set_pack(r.pack)
        self.library.reload_packs()
        if reading is not None and reading.current() != mode:
            reading.pick(mode)
        self.mode_note = f", in {MODE_NAMES.get(mode, mode)} as {r.base_pack} was" if mode else ""
        self._show_outcome()

    def keep_base_pack(self) -> None:
        """Keep the base pack, or go back to it after Use."""
        r = self.outcome
        if r is None:
            return
        self.chosen, self.mode_note = True, ""
        if self.state.pack != r.base_pack:
            self.library.set_pack(r.base_pack)
        self._show_outcome()

    def _show_outcome(self) -> None:
        """The finished job's measure, what answers now, and the buttons that change it,
        each named for what it does with the pack in use now."""
        r = self.outcome
        if r is None or self.job is not None:
            return
        pack = self.state.pack
        on_tuned = pack == r.pack
        self.use_tuned.setText(f"&Use {r.pack}" + ("" if r.gained else " anyway"))
        self.use_tuned.setToolTip(f"Answer the next questions with {r.pack}")
        self.keep_base.setText(f"&Back to {r.base_pack}" if on_tuned else f"&Keep {r.base_pack}")
        self.keep_base.setToolTip(f"Answer the next questions with {r.base_pack}")
        self.use_tuned.setVisible(not on_tuned)
        self.keep_base.setVisible(on_tuned or (pack == r.base_pack and not self.chosen))
        self._pick_default()
        now = ""
        if on_tuned:
            now = f"The next questions are answered with {r.pack}{self.mode_note}."
        elif pack == r.base_pack and self.chosen:
            now = (f"The next questions are answered with {r.base_pack}; {r.pack} stays in "
                   "Index ▸ Model packs…")
        self._say(result_text(r) + (f"<br>{now}" if now else ""))

    def _pick_default(self) -> None:
        """The button Enter presses: Start when it can start, else the advice, which is Use
        only after a measured gain."""
        r = self.outcome
        if r is not None and not self.start_button.isEnabled():
            use = r.gained and self.use_tuned.isVisibleTo(self)
            advice = self.use_tuned if use else self.keep_base
            if advice.isVisibleTo(self):
                advice.setDefault(True)
                return
        self.start_button.setDefault(True)

    def _say(self, text: str, error: bool = False) -> None:
        set_flagged_text(self.message, text, error=error)
        self.message.setVisible(bool(text))  # an empty line would still take its spacing

    def _show_steps(self, text: str) -> None:
        self.steps.setText(text)
        self.steps.setVisible(bool(text))


def open_tune_dialog(parent: QWidget, state: AppState, ops: OpRunner, library: Library,
                     backend: Backend, mode: ReadingMode | None = None) -> TuneDialog:
    """``parent``'s one tune dialog, made on first use and brought to the front."""
    dialog = parent.findChild(TuneDialog)
    if dialog is None:
        dialog = TuneDialog(parent, state, ops, library, backend, mode)
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog
