"""mcp-tray's supervision core. Never imports Qt: app/ adapts it to widgets."""

__version__ = "0.1.0"
