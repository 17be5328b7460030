"""Each era's adapter of one server's endpoint: handshake-era sessions, 2026-07-28
(stateless) requests, and who a stateless client is.
"""
