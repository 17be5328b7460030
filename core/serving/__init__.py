"""What the tray process serves, in subpackages from the top down (no import circle,
pyproject.toml [tool.importlinter]):

- ``service`` (``TrayService``, which puts them all together), ``core_thread`` (it on a
  loop of its own) and ``config_watch`` (hot reload);
- ``http``: the HTTP doors (gateway front, control API, express lane, limits);
- ``aggregate``: ``/mcp`` and profiles, many servers behind one endpoint;
- ``eras``: each era's adapter of one server's endpoint;
- ``calls``: the pipeline every request goes through, and its stages;
- ``observe``: the call journal's watches, metrics, activity, process stats;
- ``sessions``: client sessions, their breakers, the saved sessions.
"""
