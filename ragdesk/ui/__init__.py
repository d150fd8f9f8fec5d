"""The desktop GUI (PySide6). Thin: widgets render core results; work runs as ops on the
lanes of :mod:`ragdesk.ui.ops`."""
