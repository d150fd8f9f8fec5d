"""The desktop GUI (PySide6). Thin: widgets render core results; work runs in workers."""
