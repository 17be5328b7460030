"""The tray's HTTP doors: the gateway's front (``/mcp...``), the control API, the express
lane that skips the ASGI stack for the common call, and the limits that keep the local
server from being starved.
"""
