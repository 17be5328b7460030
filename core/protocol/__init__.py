"""MCP on the wire: JSON-RPC framing, the shared header names, and the server
side of streamable HTTP. Knows nothing of supervision or of mcp-tray's parts.
"""
