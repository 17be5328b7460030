"""mcp-tray's desktop side: Qt only, fed by core/ snapshots and events."""
