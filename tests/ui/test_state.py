"""AppState on its own: no window, no catalog (ragdesk.ui.state)."""

from __future__ import annotations

from typing import Any

from ragdesk.ui.ops import Lane
from ragdesk.ui.state import AppState
from tests.ui.fakes import make_answer, snap


def test_the_active_snapshot_follows_the_catalog_unless_chosen(qapp: Any) -> None:
    s = AppState("tiny")
    changes: list[str | None] = []
    s.activeSnapshotChanged.connect(changes.append)
    s.set_snapshots([snap("a", active=True), snap("b")])
    assert s.active_snapshot == "a" and s.snapshots_loaded
    s.set_active_snapshot("b")  # the user's choice, being written meanwhile
    s.set_snapshots([snap("a", active=True), snap("b")])
    assert s.active_snapshot == "b"
    s.set_snapshots([snap("a", active=True)])  # "b" was removed
    assert s.active_snapshot == "a"
    assert changes == ["a", "b", "a"]


def test_usable_snapshots_pack_and_lookup(qapp: Any) -> None:
    s = AppState("tiny")
    packs: list[str] = []
    s.packChanged.connect(packs.append)
    s.set_snapshots([snap("a"), snap("other", reason="needs 24-d"), snap("i", state="importing")])
    assert [x.name for x in s.usable_snapshots()] == ["a"]
    assert s.snapshot("other") is not None and s.snapshot("nope") is None
    s.set_pack("tiny")
    s.set_pack("starter")
    assert packs == ["starter"] and s.pack == "starter"


def test_selected_answer_and_busy_lanes_signal(qapp: Any) -> None:
    s = AppState("tiny")
    seen: list[object] = []
    busy: list[tuple[object, bool]] = []
    s.answerSelected.connect(seen.append)
    s.busyChanged.connect(lambda lane, b: busy.append((lane, b)))
    answer = make_answer()
    s.select_answer(answer)
    s.set_busy(Lane.JOBS, True)
    s.set_busy(Lane.JOBS, True)
    s.set_busy(Lane.JOBS, False)
    assert seen == [answer] and s.selected_answer is answer
    assert busy == [(Lane.JOBS, True), (Lane.JOBS, False)] and not s.busy()


def test_the_pack_that_answers_follows_the_active_snapshots_apart_from_the_choice(
        qapp: Any) -> None:
    from dataclasses import replace

    s = AppState("dpr", chosen="dpr")
    seen: list[str] = []
    s.packChanged.connect(seen.append)
    own = replace(snap("docs", active=True), answer_pack="starter")
    s.set_snapshots([own, replace(snap("wiki"), answer_pack="dpr")])
    assert s.pack == "starter" and s.chosen_pack == "dpr"  # before the list is announced
    s.set_active_snapshot("wiki")  # at once, from the list
    assert s.pack == "dpr" and seen == ["starter", "dpr"]
    s.set_chosen_pack("other")  # the next list says which pack answers
    assert s.pack == "dpr" and s.chosen_pack == "other"
