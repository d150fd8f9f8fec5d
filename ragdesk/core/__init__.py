"""The Qt-free core of ragdesk: data directory, catalog, snapshots, encoders, engine, evaluation.

Nothing under this package may import Qt, ``ragdesk.ui`` or ``ragdesk.cli`` (checked by
import-linter and by ``tests/test_layers.py``).
"""
