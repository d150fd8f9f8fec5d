"""The command line: `ragdesk [--data-dir D] [-v] COMMAND ...`; no command starts the GUI."""
