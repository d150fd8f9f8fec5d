"""Actions declared as data: one :class:`ActionSpec` row per action, built into ``QAction``s
and menus by the functions below (the main window's table is ``window_actions.ACTIONS``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QMenuBar, QWidget

from ragdesk.ui.resources import icon

T = TypeVar("T")
Shortcut = str | QKeySequence.StandardKey | None


@dataclass(frozen=True)
class ActionSpec(Generic[T]):
    name: str  # the QAction's objectName
    text: str
    slot: Callable[[T], object]
    shortcut: Shortcut = None
    icon: str | None = None
    tip: str | None = None
    menu: str | None = None  # "&Answer" or "&Answer/Show p&assage"; None: shortcut only
    separator_before: bool = False
    enabled: bool = True


def build_actions(window: QWidget, target: T,
                  specs: Iterable[ActionSpec[T]]) -> dict[str, QAction]:
    """One QAction per row, its slot called with ``target``, added to ``window`` so its
    shortcut works with the menu bar hidden."""
    out: dict[str, QAction] = {}
    for spec in specs:
        a = QAction(spec.text, window)
        a.setObjectName(spec.name)
        if spec.shortcut is not None:
            a.setShortcut(QKeySequence(spec.shortcut))
        if spec.icon:
            a.setIcon(icon(spec.icon))
            a.setData(spec.icon)  # refresh_icons() redraws it for a new palette
        if spec.tip:
            a.setStatusTip(spec.tip)
            a.setToolTip(spec.tip)
        a.setEnabled(spec.enabled)
        a.triggered.connect(lambda _checked=False, s=spec: s.slot(target))
        window.addAction(a)
        out[spec.name] = a
    return out


def build_menus(bar: QMenuBar, titles: Sequence[str], specs: Iterable[ActionSpec[T]],
                actions: dict[str, QAction]) -> dict[str, QMenu]:
    """The menus in ``titles`` order, filled from the rows that name them; submenus are
    made on first use ("&Answer/Show p&assage")."""
    menus: dict[str, QMenu] = {t: bar.addMenu(t) for t in titles}
    for spec in specs:
        if spec.menu is None:
            continue
        menu = _menu(menus, spec.menu)
        if spec.separator_before:
            menu.addSeparator()
        menu.addAction(actions[spec.name])
    return menus


def _menu(menus: dict[str, QMenu], path: str) -> QMenu:
    if path not in menus:
        parent, _, title = path.rpartition("/")
        menus[path] = _menu(menus, parent).addMenu(title)
    return menus[path]


def in_menu(specs: Iterable[ActionSpec[T]], menu: str,
            actions: dict[str, QAction]) -> list[QAction]:
    return [actions[s.name] for s in specs if s.menu == menu]


def literal(text: str) -> str:
    """``text`` shown as written in a menu (a user's name for something may hold "&", which
    Qt would take for a mnemonic)."""
    return text.replace("&", "&&")


def mnemonic(text: str) -> str | None:
    """The letter Alt+letter picks ``text`` by (lower case), None without one ("&&" is a
    literal "&")."""
    i = text.find("&")
    while 0 <= i < len(text) - 1:
        if text[i + 1] != "&":
            return text[i + 1].lower()
        i = text.find("&", i + 2)
    return None


def add_mnemonics(menu: QMenu) -> None:
    """Give each entry of ``menu`` without a mnemonic (a dock's show/hide action is named
    after the dock's title, which has none) the first letter no other entry has taken: the
    first letters of its words before the rest."""
    entries = [a for a in menu.actions() if not a.isSeparator()]
    taken = {m for a in entries if (m := mnemonic(a.text())) is not None}
    for a in entries:
        text = a.text()
        if mnemonic(text) is not None:
            continue
        starts = [i for i, ch in enumerate(text)
                  if ch.isalnum() and (i == 0 or not text[i - 1].isalnum())]
        rest = [i for i, ch in enumerate(text) if ch.isalnum() and i not in starts]
        at = next((i for i in starts + rest if text[i].lower() not in taken), None)
        if at is not None:
            a.setText(f"{text[:at]}&{text[at:]}")
            taken.add(text[at].lower())
