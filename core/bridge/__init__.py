"""``mcp-tray connect NAME``: its own process, a stdio MCP server that a client
launches and that relays to the running tray's gateway.
"""
