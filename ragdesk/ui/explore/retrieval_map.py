"""The retrieval map: passages around a question in the snapshot's PCA plane, with the
question as a handle the user drags to see retrieval change.

All numerical work (encoding the question, fitting the projection, searching) runs as ops on
the reads lane (the window's runner, or a one-thread runner of the map's own when it stands
alone); the GUI thread only paints. Every request carries a sequence number
and results older than the newest applied one are dropped. While the user drags, at most one
search is in flight and only the newest pending position waits behind it, so the map follows
the mouse without queueing a search per mouse event, and the last position is always searched.

The map searches by dense vectors only. For an answer whose passages came otherwise (BM25,
hybrid, picked by hand), the map says so above it, names its own passages "d1"… instead of the
card's [n], and marks the card's passages under their [n] where they lie in the plane. A map
of a snapshot the catalog no longer holds says that too, and asks nothing from it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent, QResizeEvent
from PySide6.QtWidgets import QFrame, QLabel, QSplitter, QVBoxLayout, QWidget

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
from ragdesk.core.units import percent, plural
from ragdesk.ui.explore.map_canvas import MapCanvas
from ragdesk.ui.explore.map_card import (
    CardPassages,
    MapReady,
    differs_text,
    place_card_passages,
    removed_text,
)
from ragdesk.ui.explore.map_side import PassagesPanel
from ragdesk.ui.ops import Lane, Op, OpRunner
from ragdesk.ui.reports import ErrorReport

log = logging.getLogger(__name__)

QueryEncoder = Callable[[str], np.ndarray]
# A snapshot name (None: the active one) to an opened snapshot; called in the worker thread.
SnapshotResolver = Callable[[str | None], VectorSnapshot]


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
        self._card: CardPassages | None = None  # the answer shown, None: a bare question
        self._numbered = True  # the query's passages are named like the card's
        self._catalog: set[str] | None = None  # the snapshots that exist; None: not known

        self._build_widgets()
        self._build_layout()

    def _build_widgets(self) -> None:
        self.canvas = MapCanvas(self)
        self.canvas.handleMoved.connect(self._on_handle_moved)
        self.canvas.handleReleased.connect(self._on_handle_moved)
        self.canvas.hoveredChanged.connect(self._on_hovered)
        self.canvas.askRequested.connect(self._on_ask)
        self.canvas.resetRequested.connect(self.reset_query)
        self.setFocusProxy(self.canvas)  # the view's shortcut gives the map the arrow keys
        self.notice = QLabel(self)
        self.notice.setObjectName("MapNotice")
        self.notice.setWordWrap(True)
        self.notice.setFrameShape(QFrame.Shape.StyledPanel)
        self.notice.setMargin(6)
        self.notice.setVisible(False)
        self.side = PassagesPanel(self)
        self.side.rowChosen.connect(self._on_row_chosen)
        self.side.ask_button.clicked.connect(self._on_ask)
        self.side.reset_button.clicked.connect(self.reset_query)
        # The side panel's parts, by the names the map has always had.
        self.question_label = self.side.question_label
        self.table = self.side.table
        self.preview = self.side.preview
        self.status_label = self.side.status_label
        self.ask_button = self.side.ask_button
        self.reset_button = self.side.reset_button

    def _build_layout(self) -> None:
        # Docks are tall: the passages go under the map first, and beside it only when the
        # view is wide enough for both (see _orient).
        splitter = QSplitter(Qt.Orientation.Vertical, self)
        splitter.addWidget(self.canvas)
        splitter.addWidget(self.side)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setChildrenCollapsible(False)
        self.splitter = splitter
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.notice)
        lay.addWidget(splitter, 1)
        self.side.set_docs([], [], True, self._k)
        self._update_buttons()
        self._set_status("")

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._orient()

    def _orient(self) -> None:
        """Passages beside the map in a wide view, below it in a tall one (a side dock), so
        the map gets the longer side and the passages' text is not squeezed into a column.
        Never into an orientation the view has no room for: its minimum size would grow, and
        with it the dock and the window (a view being tabbed got a wide, short size for a
        moment, turned, and widened the whole right-hand dock area for good)."""
        tall = self.width() < 1.15 * self.height()
        want = Qt.Orientation.Vertical if tall else Qt.Orientation.Horizontal
        if self.splitter.orientation() == want or not self._fits(want):
            return
        self.splitter.setOrientation(want)
        total = self.height() if tall else self.width()
        self.splitter.setSizes([int(total * 0.58), total - int(total * 0.58)])

    def _fits(self, orientation: Qt.Orientation) -> bool:
        parts = [self.canvas.minimumSize(), self.side.minimumSizeHint()]
        handle = self.splitter.handleWidth() + 8  # the margins of the view's layout
        if orientation == Qt.Orientation.Horizontal:
            return self.width() >= sum(p.width() for p in parts) + handle
        return self.height() >= (sum(p.height() for p in parts) + handle
                                 + (self.notice.height() if self.notice.isVisible() else 0))

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
        self._update_notice()
        self._update_buttons()

    def set_catalog(self, names: Collection[str] | None) -> None:
        """The snapshots the catalog holds now (None: unknown). A map of one it no longer
        holds says so, and "Ask from here" is off: the answer would come from nowhere the
        user can open, with passages of a snapshot that is gone."""
        self._catalog = None if names is None else set(names)
        self._update_notice()
        self._update_buttons()

    def removed(self) -> bool:
        """The map shows a snapshot the catalog no longer holds."""
        return (self._map is not None and self._catalog is not None
                and self._map.snapshot not in self._catalog)

    def numbered_like_the_card(self) -> bool:
        """The query's passages are named [1]… in the card's colours (they are the card's,
        or no answer is shown); otherwise "d1"… in a neutral colour."""
        return self._numbered

    def show_question(self, question: str, query: np.ndarray | None = None, *,
                      snapshot: VectorSnapshot | str | None = None, k: int | None = None
                      ) -> None:
        """Draw the map for ``question``: its vector (given, or made by the encoder), the
        snapshot's projection (fitted once per snapshot) and the neighbours, all off the GUI
        thread. ``snapshot`` switches snapshots first: an object, or a name the
        ``resolve_snapshot`` callable opens (in the worker). ``k`` changes the top K."""
        self._card = None
        self._draw(question, query, snapshot, k)

    def _draw(self, question: str, query: np.ndarray | None,
              snapshot: VectorSnapshot | str | None, k: int | None) -> None:
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
        card = None if self._card is None else list(self._card.docs)

        def job() -> MapReady:
            snap = wanted
            if isinstance(snap, str):
                assert resolve is not None
                snap = resolve(snap or None)
            vec = query if query is not None else encode(question)  # type: ignore[misc]
            proj = cache.get(snap, cancel=cancel)
            data = projmod.build_map(
                snap, np.asarray(vec, dtype=np.float32).reshape(-1), k=k_now, n_neighbours=n,
                projection=proj, cancel=cancel)
            if card is None or [d.id for d in card] == [d.id for d in data.retrieved]:
                return MapReady(snap, data)
            return MapReady(snap, data, place_card_passages(snap, proj, card))

        self._set_status("Drawing the map…")
        self._start(self._seq, job)

    def show_answer(self, answer: Answer) -> None:
        """Map an answer's question on the snapshot it was answered from, with its K. An
        answer from the passages the map shows now (e.g. from "Ask from here") keeps the
        map as it is, dragged query included: those passages are now the card's."""
        card = CardPassages(list(answer.docs), answer.retriever)
        if (self._map is not None and not self.is_busy()
                and answer.question == self._question
                and answer.snapshot == self._map.snapshot
                and [d.id for d in answer.docs] == [d.id for d in self._retrieved]):
            self._card = card
            self._numbered = True
            self.canvas.set_card_marks([])
            self._set_retrieved(self._retrieved)
            self._update_notice()
            return
        same = self._snapshot is not None and self._snapshot.name == answer.snapshot
        self._card = card
        self._draw(answer.question, None, None if same else answer.snapshot,
                   len(answer.docs) or None)

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
            if isinstance(result, MapReady):
                self._snapshot = result.snapshot
                self._apply_map(result)
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

    def _apply_map(self, ready: MapReady) -> None:
        data = ready.data
        self._map = data
        self._query = data.query.copy()
        self._numbered = ready.card_marks is None
        self.side.show_hint()
        self.canvas.set_map(data.points, data.query_xy, data.projection,
                            [d.id for d in data.retrieved])
        self.canvas.set_card_marks(ready.card_marks or [])
        self._set_retrieved(data.retrieved)
        self._update_notice()
        self._update_buttons()
        self.mapReady.emit()

    def _apply_search(self, res: SearchResult) -> None:
        self._query = res.query
        if res.new_points:
            self.canvas.add_points(res.new_points)
        self._set_retrieved(res.retrieved)

    def _set_retrieved(self, docs: list[RetrievedDoc]) -> None:
        self._retrieved = list(docs)
        self.canvas.set_retrieved(docs, self._numbered)
        self.side.set_docs(docs, [self.canvas.rank_label(r) for r in range(len(docs))],
                           self._numbered, self._k)
        self._update_buttons()
        self.retrievalChanged.emit(list(docs))

    def _on_hovered(self, point: object) -> None:
        if isinstance(point, MapPoint):
            self.side.show_preview(point.id, point.title, point.text)

    def _on_row_chosen(self, row: int) -> None:
        if 0 <= row < len(self._retrieved):
            d = self._retrieved[row]
            self.side.show_preview(d.id, d.title, d.text)

    def _on_ask(self) -> None:
        if self._query is None or not self._retrieved or self.removed():
            return
        hits = [Hit(d.id, d.title, d.text, d.score) for d in self._retrieved]
        self.askFromHere.emit(self._question, self._query.copy(), hits)

    def _show_problem(self, text: str) -> None:
        self._map = None
        self._query = None
        self._set_retrieved([])
        self.canvas.set_message(text)
        self._set_status("")
        self._update_notice()
        self.failed.emit(text)

    def _update_notice(self) -> None:
        notes = []
        if self._map is not None and not self._numbered and self._card is not None:
            notes.append(differs_text(self._card.retriever, len(self._retrieved)))
        if self.removed():
            assert self._map is not None
            notes.append(removed_text(self._map.snapshot))
        self.notice.setText("\n".join(notes))
        self.notice.setVisible(bool(notes))

    def _update_buttons(self) -> None:
        ready = self._map is not None
        self.ask_button.setEnabled(ready and bool(self._retrieved) and not self.removed())
        self.reset_button.setEnabled(ready)

    def _describe(self) -> str:
        if self._map is None:
            return ""
        r1, r2 = self._map.projection.explained_variance_ratio
        shown = plural(len(self.canvas.points()), "passage")
        return (f"{shown} of {self._map.snapshot} · the plane shows {percent(r1 + r2)} of "
                "the variance")

    def _set_status(self, text: str) -> None:
        self.status_label.setText(text)

