"""The retrieval map: passages around a question in the snapshot's PCA plane, with the
question as a handle the user drags to see retrieval change.

All numerical work (encoding the question, fitting the projection, searching) runs as ops on
the reads lane (the window's runner, or a one-thread runner of the map's own when it stands
alone); the GUI thread only paints. Every request carries a sequence number
and results older than the newest applied one are dropped. While the user drags, at most one
search is in flight and only the newest pending position waits behind it, so the map follows
the mouse without queueing a search per mouse event, and the last position is always searched.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent, QPalette, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core import projection as projmod
from ragdesk.core.progress import CancelToken
from ragdesk.core.projection import (
    MapData,
    MapPoint,
    Projection,
    ProjectionCache,
    SearchResult,
    VectorSnapshot,
)
from ragdesk.core.types import Answer, Hit, RetrievedDoc
from ragdesk.core.units import plural
from ragdesk.ui.explore.map_canvas import MapCanvas
from ragdesk.ui.explore.palette import rank_colour
from ragdesk.ui.ops import Lane, Op, OpRunner
from ragdesk.ui.reports import ErrorReport

log = logging.getLogger(__name__)

QueryEncoder = Callable[[str], np.ndarray]
# A snapshot name (None: the active one) to an opened snapshot; called in the worker thread.
SnapshotResolver = Callable[[str | None], VectorSnapshot]



@dataclass(frozen=True)
class _MapReady:
    snapshot: VectorSnapshot
    data: MapData


class RetrievalMap(QWidget):
    """The map, the list of retrieved passages and "Ask from here".

    Give it a snapshot (anything with ``name``, ``size``, ``embeddings()`` and
    ``search(queries, k)``, e.g. a ``SnapshotIndex``) or a ``resolve_snapshot`` callable that
    opens one by name, then :meth:`show_question` with the question's vector (or an ``encode``
    callable that makes one), or :meth:`show_answer`. Callables run in the map's worker thread.
    """

    mapReady = Signal()  # the question's map is drawn
    retrievalChanged = Signal(object)  # list[RetrievedDoc] after each applied search
    askFromHere = Signal(str, object, object)  # question, query vector [dim], list[Hit]
    failed = Signal(str)  # a user-facing message

    def __init__(self, snapshot: VectorSnapshot | None = None, *, k: int = 5,
                 n_neighbours: int = projmod.DEFAULT_NEIGHBOURS,
                 encode: QueryEncoder | None = None,
                 resolve_snapshot: SnapshotResolver | None = None,
                 cache: ProjectionCache | None = None, ops: OpRunner | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._snapshot = snapshot
        self._resolve = resolve_snapshot
        self._k = k
        self._n_neighbours = n_neighbours
        self._encode = encode
        self._cache = cache if cache is not None else projmod.projection_cache()
        self._own_ops = ops is None
        self._ops = ops if ops is not None else OpRunner(self, reads_threads=1)
        self._running: dict[int, Op[object]] = {}
        self._cancel = CancelToken()

        self._seq = 0  # newest request issued
        self._applied = 0  # newest result applied
        self._map_seq = 0  # the request that drew the current map; older results are stale
        self._outstanding = 0  # jobs started and not yet answered
        self._pending: tuple[int, tuple[float, float]] | None = None
        self._map: MapData | None = None
        self._question = ""
        self._query: np.ndarray | None = None
        self._retrieved: list[RetrievedDoc] = []

        self._build_widgets()
        self._build_layout()

    def _build_widgets(self) -> None:
        self.canvas = MapCanvas(self)
        self.canvas.handleMoved.connect(self._on_handle_moved)
        self.canvas.handleReleased.connect(self._on_handle_moved)

        self.question_label = QLabel(self)
        self.question_label.setWordWrap(True)
        self.question_label.setTextFormat(Qt.TextFormat.PlainText)
        self.table = QTableWidget(0, 3, self)
        self.table.setHorizontalHeaderLabels(["#", "p(z|x)", "Title"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        hdr = self.table.horizontalHeader()
        hdr.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        hdr.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        hdr.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.table.cellClicked.connect(self._on_row_clicked)
        self.table.setToolTip("Click a passage to read it below.")
        self.preview = QTextBrowser(self)
        self.preview.setOpenLinks(False)
        # The hint is the preview's text, not its placeholder: a placeholder neither wraps
        # nor scrolls, so a short preview cut it mid-sentence.
        self._show_hint()
        self.canvas.hoveredChanged.connect(self._on_hovered)
        self.status_label = QLabel(self)
        self.status_label.setWordWrap(True)
        self.status_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.ask_button = QPushButton("Ask from here", self)
        self.ask_button.setToolTip("Generate an answer from the passages the dragged query "
                                   "retrieves.")
        self.ask_button.clicked.connect(self._on_ask)
        self.reset_button = QPushButton("Back to the question", self)
        self.reset_button.clicked.connect(self.reset_query)

    def _build_layout(self) -> None:
        side = QWidget(self)
        sl = QVBoxLayout(side)
        sl.setContentsMargins(6, 0, 0, 0)
        title = QLabel("<b>Retrieved passages</b>", side)
        sl.addWidget(title)
        sl.addWidget(self.question_label)
        sl.addWidget(self.table)
        sl.addWidget(self.preview, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.reset_button)
        buttons.addWidget(self.ask_button)
        sl.addLayout(buttons)
        sl.addWidget(self.status_label)
        splitter = QSplitter(Qt.Orientation.Horizontal, self)
        splitter.addWidget(self.canvas)
        splitter.addWidget(side)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setChildrenCollapsible(False)
        self.splitter = splitter
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(splitter)
        self._fit_table_height()
        self._update_buttons()
        self._set_status("")

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._orient()

    def _orient(self) -> None:
        """Passages beside the map in a wide view, below it in a tall one (a side dock), so
        the map gets the longer side and the passages' text is not squeezed into a column."""
        tall = self.width() < 1.15 * self.height()
        want = Qt.Orientation.Vertical if tall else Qt.Orientation.Horizontal
        if self.splitter.orientation() != want:
            self.splitter.setOrientation(want)
            total = self.height() if tall else self.width()
            self.splitter.setSizes([int(total * 0.58), total - int(total * 0.58)])

    def _show_hint(self) -> None:
        muted = self.palette().color(QPalette.ColorGroup.Disabled,
                                     QPalette.ColorRole.Text).name()
        self.preview.setHtml(
            f"<div style='color:{muted}'><p>Drag the ★ to move the query; the passages it "
            "retrieves light up, and dotted rings mark the question's own passages. "
            "Retrieval uses the full vectors, so dots near the query in 2-D need not be the "
            "nearest ones.</p><p>Hover a dot, or click a passage above, to read it.</p></div>")

    # -- public API ---------------------------------------------------------------------
    def set_snapshot(self, snapshot: VectorSnapshot | None) -> None:
        """Switch snapshots; the map clears until the next :meth:`show_question`."""
        self._snapshot = snapshot
        self._seq += 1
        self._map_seq = self._seq
        self._map = None
        self._query = None
        self._pending = None
        self._set_retrieved([])
        self.canvas.set_message("")
        self._update_buttons()

    def show_question(self, question: str, query: np.ndarray | None = None, *,
                      snapshot: VectorSnapshot | str | None = None, k: int | None = None
                      ) -> None:
        """Draw the map for ``question``: its vector (given, or made by the encoder), the
        snapshot's projection (fitted once per snapshot) and the neighbours, all off the GUI
        thread. ``snapshot`` switches snapshots first: an object, or a name the
        ``resolve_snapshot`` callable opens (in the worker). ``k`` changes the top K."""
        if k is not None:
            self._k = max(1, int(k))
        if snapshot is not None and not isinstance(snapshot, str):
            self._snapshot = snapshot
        wanted: VectorSnapshot | str | None = (
            snapshot if isinstance(snapshot, str) else self._snapshot)
        if wanted is None and self._resolve is not None:
            wanted = ""  # the resolver's default (the active snapshot)
        if wanted is None or (isinstance(wanted, str) and self._resolve is None):
            self._show_problem("No snapshot is open.")
            return
        if query is None and self._encode is None:
            self._show_problem("No question encoder is loaded, so the question has no vector.")
            return
        if self._cancel.cancelled:
            self._cancel = CancelToken()
        self._question = question
        self.question_label.setText(question)
        self._seq += 1
        self._map_seq = self._seq
        self._pending = None
        # Until the new map arrives there is nothing to drag (a search now would be stale).
        self._map = None
        self._set_retrieved([])
        self._update_buttons()
        self.canvas.set_message("Drawing the map…")
        encode, k_now, n, cache, cancel, resolve = (
            self._encode, self._k, self._n_neighbours, self._cache, self._cancel, self._resolve)

        def job() -> _MapReady:
            snap = wanted
            if isinstance(snap, str):
                assert resolve is not None
                snap = resolve(snap or None)
            vec = query if query is not None else encode(question)  # type: ignore[misc]
            proj = cache.get(snap, cancel=cancel)
            return _MapReady(snap, projmod.build_map(
                snap, np.asarray(vec, dtype=np.float32).reshape(-1), k=k_now, n_neighbours=n,
                projection=proj, cancel=cancel))

        self._set_status("Drawing the map…")
        self._start(self._seq, job)

    def show_answer(self, answer: Answer) -> None:
        """Map an answer's question on the snapshot it was answered from, with its K. An
        answer from the passages the map shows now (e.g. from "Ask from here") keeps the
        map as it is, dragged query included."""
        if (self._map is not None and not self.is_busy()
                and answer.question == self._question
                and answer.snapshot == self._map.snapshot
                and [d.id for d in answer.docs] == [d.id for d in self._retrieved]):
            return
        same = self._snapshot is not None and self._snapshot.name == answer.snapshot
        self.show_question(answer.question, snapshot=None if same else answer.snapshot,
                           k=len(answer.docs) or None)

    def move_query_to(self, xy: tuple[float, float]) -> None:
        """Move the handle to ``xy`` (data coordinates) and search from there."""
        self.canvas.set_handle(xy)
        self._on_handle_moved(xy[0], xy[1])

    def reset_query(self) -> None:
        if self._map is not None:
            self.move_query_to(self._map.query_xy)

    def map_data(self) -> MapData | None:
        return self._map

    def snapshot_name(self) -> str | None:
        """The name of the snapshot the map shows (None before the first map)."""
        return None if self._map is None else self._map.snapshot

    def projection(self) -> Projection | None:
        return None if self._map is None else self._map.projection

    def retrieved(self) -> list[RetrievedDoc]:
        return list(self._retrieved)

    def current_query(self) -> np.ndarray | None:
        """The full query vector the retrieved passages were searched with."""
        return None if self._query is None else self._query.copy()

    def is_busy(self) -> bool:
        """A request is running or waiting, or the newest one has not been applied."""
        return (self._outstanding > 0 or self._pending is not None
                or self._applied < self._seq)

    def shutdown(self) -> None:
        """Stop accepting results and wait for the worker (called on close)."""
        self._cancel.cancel()
        self._pending = None
        for op in self._running.values():
            op.cancel()
        self._running.clear()
        if self._own_ops:
            self._ops.shutdown()
        # Ops still queued answer as cancelled; results still queued are dropped as stale.
        self._outstanding = 0
        self._seq += 1
        self._map_seq = self._applied = self._seq

    def closeEvent(self, event: QCloseEvent) -> None:
        self.shutdown()
        super().closeEvent(event)

    # -- work ---------------------------------------------------------------------------
    def _start(self, seq: int, fn: Callable[[], object]) -> None:
        self._outstanding += 1
        op: Op[object] = Op(lambda _ctx: fn(), lane=Lane.READS, title="The retrieval map",
                            parent=self)
        op.success(lambda result: self._on_done(op, seq, result))
        op.failure(lambda report: self._on_failed(op, seq, report))
        self._running[op.id] = op
        op.run(self._ops)

    def _on_handle_moved(self, x: float, y: float) -> None:
        if self._map is None:
            return
        self._seq += 1
        xy = (x, y)
        if self._outstanding:
            self._pending = (self._seq, xy)
            return
        self._start_search(self._seq, xy)

    def _start_search(self, seq: int, xy: tuple[float, float]) -> None:
        assert self._map is not None and self._snapshot is not None
        snap, proj, original, k = (self._snapshot, self._map.projection, self._map.query,
                                   self._k)
        known = frozenset(p.id for p in self.canvas.points())

        def job() -> SearchResult:
            moved = proj.lift(xy, original)
            return projmod.search_from(snap, proj, moved, k=k, known_ids=known.__contains__)

        self._set_status("Searching…")
        self._start(seq, job)

    def _start_pending(self) -> None:
        if self._pending is not None and self._map is not None and self._outstanding == 0:
            seq, xy = self._pending
            self._pending = None
            self._start_search(seq, xy)

    def _on_done(self, op: Op[object], seq: int, result: object) -> None:
        if self._running.pop(op.id, None) is None:
            return  # shut down meanwhile: stale
        self._outstanding = max(0, self._outstanding - 1)
        if seq >= self._map_seq and seq > self._applied:
            self._applied = seq
            if isinstance(result, _MapReady):
                self._snapshot = result.snapshot
                self._apply_map(result.data)
            elif isinstance(result, SearchResult):
                self._apply_search(result)
        self._start_pending()
        if not self.is_busy():
            self._set_status(self._describe())

    def _on_failed(self, op: Op[object], seq: int, report: ErrorReport) -> None:
        if self._running.pop(op.id, None) is None:
            return
        self._outstanding = max(0, self._outstanding - 1)
        if seq >= self._map_seq and seq > self._applied and not report.cancelled:
            self._applied = seq
            text = f"{report.message}\n{report.hint}" if report.hint else report.message
            self._show_problem(f"The map could not be drawn. {text}" if report.is_bug
                               else text)
        self._start_pending()

    def _apply_map(self, data: MapData) -> None:
        self._map = data
        self._show_hint()
        self._query = data.query.copy()
        self.canvas.set_map(data.points, data.query_xy, data.projection,
                            [d.id for d in data.retrieved])
        self._set_retrieved(data.retrieved)
        self._update_buttons()
        self.mapReady.emit()

    def _apply_search(self, res: SearchResult) -> None:
        self._query = res.query
        if res.new_points:
            self.canvas.add_points(res.new_points)
        self._set_retrieved(res.retrieved)

    def _set_retrieved(self, docs: list[RetrievedDoc]) -> None:
        self._retrieved = list(docs)
        self.canvas.set_retrieved(docs)
        self.table.setRowCount(len(docs))
        for row, d in enumerate(docs):
            rank = QTableWidgetItem(f"[{row + 1}]")
            rank.setForeground(rank_colour(row))
            f = rank.font()
            f.setBold(True)
            rank.setFont(f)
            prob = QTableWidgetItem(f"{d.prob:.3f}")
            prob.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            title = QTableWidgetItem(d.title)
            title.setToolTip(f"{d.title}\n\n{d.text[:400]}")
            for col, item in enumerate((rank, prob, title)):
                self.table.setItem(row, col, item)
        self._fit_table_height()
        self._update_buttons()
        self.retrievalChanged.emit(list(docs))

    def _fit_table_height(self) -> None:
        """Just tall enough for K rows, so the preview gets the rest."""
        rows = max(self._k, self.table.rowCount())
        row_h = self.table.verticalHeader().defaultSectionSize()
        self.table.setFixedHeight(self.table.horizontalHeader().sizeHint().height()
                                  + rows * row_h + 2 * self.table.frameWidth() + 2)

    def _on_hovered(self, point: object) -> None:
        if isinstance(point, MapPoint):
            self._show_preview(point.id, point.title, point.text)

    def _on_row_clicked(self, row: int, _col: int) -> None:
        if 0 <= row < len(self._retrieved):
            d = self._retrieved[row]
            self._show_preview(d.id, d.title, d.text)

    def _show_preview(self, pid: int, title: str, text: str) -> None:
        ranks = [d.id for d in self._retrieved]
        badge = ""
        if pid in ranks:
            r = ranks.index(pid)
            badge = (f"<span style='color:{rank_colour(r).name()}'><b>[{r + 1}]</b></span> "
                     f"p(z|x) = {self._retrieved[r].prob:.3f} · ")
        self.preview.setHtml(f"<p><b>{html.escape(title)}</b></p><p>{badge}passage {pid}</p>"
                             f"<p>{html.escape(text)}</p>")

    def _on_ask(self) -> None:
        if self._query is None or not self._retrieved:
            return
        hits = [Hit(d.id, d.title, d.text, d.score) for d in self._retrieved]
        self.askFromHere.emit(self._question, self._query.copy(), hits)

    def _show_problem(self, text: str) -> None:
        self._map = None
        self._query = None
        self._set_retrieved([])
        self.canvas.set_message(text)
        self._set_status("")
        self.failed.emit(text)

    def _update_buttons(self) -> None:
        ready = self._map is not None
        self.ask_button.setEnabled(ready and bool(self._retrieved))
        self.reset_button.setEnabled(ready)

    def _describe(self) -> str:
        if self._map is None:
            return ""
        r1, r2 = self._map.projection.explained_variance_ratio
        shown = plural(len(self.canvas.points()), "passage")
        return f"{shown} of {self._map.snapshot} · the plane shows {r1 + r2:.0%} of the variance"

    def _set_status(self, text: str) -> None:
        self.status_label.setText(text)
