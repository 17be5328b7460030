"""What the tray process serves: the gateway (``/mcp/<server>``), client sessions
and their breakers, the control API, metrics, hot reload, and ``TrayService``
which puts them all together.
"""
