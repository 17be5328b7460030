"""Where mcp-tray's inputs come from: the config file, secrets in the keyring,
per-user paths, and the running instance's lock and runtime file.
"""
