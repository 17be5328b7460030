"""The ``mcp-tray`` command line: argument parsing, the control API client,
client snippets and imports, the desktop entry, and the headless runner.
"""
