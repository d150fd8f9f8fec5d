"""The menus: built from the action table, each entry with a mnemonic of its own."""

from __future__ import annotations

from typing import Any


def test_menus_come_from_the_action_table(window: Any) -> None:
    from ragdesk.ui.window_actions import ACTIONS, MENUS

    bar = window.menuBar()
    titles = [a.text() for a in bar.actions()]
    assert titles == list(MENUS)

    def entries(menu: Any) -> set[str]:
        out: set[str] = set()
        for a in menu.actions():
            out.add(a.text())
            if a.menu() is not None:
                out |= {f"{a.text()}/{t}" for t in entries(a.menu())}
        return out

    menus = {a.text(): a.menu() for a in bar.actions()}
    for spec in ACTIONS:
        if spec.menu is not None:
            top, _, sub = spec.menu.partition("/")
            want = f"{sub}/{spec.text}" if sub else spec.text
            assert want in entries(menus[top]), spec.name
        act = window.actions_by_name[spec.name]
        assert act in window.actions()  # its shortcut works with the menu bar hidden


def test_every_menu_entry_has_its_own_mnemonic(window: Any) -> None:
    """Alt+letter reaches every entry of every menu, submenus too, and no two entries of one
    menu share a letter. Not the Index menu's snapshots: their names are the user's."""
    from ragdesk.ui.actions import mnemonic

    snapshots = set(window.index_menu.group.actions())

    def check(menu: Any, path: str) -> None:
        entries = [a for a in menu.actions() if not a.isSeparator() and a not in snapshots
                   and a.text() != "Active snapshot"]  # the snapshots' heading
        letters = [mnemonic(a.text()) for a in entries]
        assert None not in letters, (path, [a.text() for a in entries])
        assert len(set(letters)) == len(letters), (path, [a.text() for a in entries])
        for a in entries:
            if a.menu() is not None:
                check(a.menu(), f"{path}/{a.text()}")

    menus = list(window.menuBar().actions())
    assert len({mnemonic(a.text()) for a in menus}) == len(menus)
    for a in menus:
        check(a.menu(), a.text())
    view = next(a.menu() for a in menus if a.text() == "&View")
    docks = [d.toggleViewAction().text() for d in window.docks()]
    assert docks == ["&Controls", "&Passage", "Posterior &heat map", "C&onversations"]
    assert {d.toggleViewAction() for d in window.docks()} <= set(view.actions())


def test_a_doubled_ampersand_is_no_mnemonic() -> None:
    from ragdesk.ui.actions import mnemonic

    assert mnemonic("R&&D notes") is None
    assert mnemonic("R&&D &notes") == "n"
    assert mnemonic("S&top") == "t"
