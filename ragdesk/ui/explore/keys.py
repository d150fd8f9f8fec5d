"""The explore views' keys, in one place for the views that handle them and for Help ▸
Keyboard shortcuts, which lists them."""

from __future__ import annotations

from PySide6.QtCore import Qt

Key = Qt.Key

# The step-through: steps moved by each key (Home and End go to the first and last step).
STEP_MOVES: dict[int, int] = {Key.Key_Left: -1, Key.Key_Right: 1, Key.Key_Up: -1,
                              Key.Key_Down: 1, Key.Key_PageUp: -5, Key.Key_PageDown: 5}

# The retrieval map: the query moves this many pixels per arrow key (with Shift, the fine
# step), in the arrow's direction on the screen.
MAP_STEP_PX = 12.0
MAP_FINE_STEP_PX = 3.0
MAP_ARROWS: dict[int, tuple[int, int]] = {Key.Key_Left: (-1, 0), Key.Key_Right: (1, 0),
                                          Key.Key_Up: (0, -1), Key.Key_Down: (0, 1)}
MAP_ASK_KEYS = (Key.Key_Return, Key.Key_Enter)
MAP_RESET_KEY = Key.Key_Home
# What the map shows along its top while it has the keyboard.
MAP_KEYS_LINE = "Arrows move the query · Enter asks from here · Home: back"

KEY_ROWS: list[tuple[str, str]] = [
    ("Step-through: previous or next word", "Left / Right (or Up / Down)"),
    ("Step-through: five words back or on", "Page Up / Page Down"),
    ("Step-through: before the first word, or the last", "Home / End"),
    ("Retrieval map: move the query (Tab to the map first)", "Arrow keys"),
    ("Retrieval map: move the query a little", "Shift + arrow keys"),
    ("Retrieval map: Ask from here", "Enter"),
    ("Retrieval map: back to the question", "Home"),
]
