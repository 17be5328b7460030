"""The sqlite worker registry (bridges and the tray write it), heartbeats,
client identities, and the environment/runtime diagnostics built on it.
"""
