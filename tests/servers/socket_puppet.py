"""A stdio "server" that a test plays by hand over a loopback socket.

Usage: socket_puppet.py PORT. It connects to 127.0.0.1:PORT and relays bytes
both ways: its stdin goes to the socket, the socket goes to its stdout. So
the test sees exactly what mcp-tray wrote to the child and decides, byte for
byte, what the child answers (half-lines, junk, ids in either form, nothing).
When the test closes its end, the puppet exits 0; stdlib only, so it starts
in a few tens of milliseconds.
"""

import contextlib
import os
import socket
import sys
import threading

sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))


def stdin_to_socket() -> None:
    stdin = sys.stdin.buffer
    while line := stdin.readline():
        sock.sendall(line)
    # stdin closed: tell the test, which then decides whether we exit.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


threading.Thread(target=stdin_to_socket, daemon=True).start()
stdout = sys.stdout.buffer
while data := sock.recv(65536):
    stdout.write(data)
    stdout.flush()
# Not a normal interpreter exit: the stdin thread is blocked in a read, and
# finalization would wait a second for its lock and then abort.
os._exit(0)
