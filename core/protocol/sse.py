"""Server-sent events as they arrive: each event's name and the message it carries, on one line.

A large event (a 50 MB tool result) comes in many chunks: they are gathered
in place, and its line is cut once, when its end has arrived (cutting the
whole buffer again at every chunk made a 56 MB event take 23 s). The bridge
reads the gateway's answers with it, and a remote server's session
(core.supervision.remote) the remote's.
"""

from collections.abc import AsyncIterator
from typing import Final

#: An event that does not name itself is a message (the SSE format's default).
MESSAGE: Final = b"message"


async def events(chunks: AsyncIterator[bytes]) -> AsyncIterator[tuple[bytes, bytes]]:
    """Each event of an SSE body that carries data, as its chunks come: its name and its
    data; none for an event without data (a priming event, a comment, a keepalive)."""
    pending = bytearray()
    data: list[bytearray] = []
    name = MESSAGE
    async for chunk in chunks:
        pending += chunk
        if b"\n" not in chunk:
            continue
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.endswith(b"\r"):
                del line[-1:]
            if line.startswith(b"data:"):
                del line[: 6 if line.startswith(b"data: ") else 5]
                data.append(line)
            elif line.startswith(b"event:"):
                name = bytes(line[7:] if line.startswith(b"event: ") else line[6:])
            elif not line:
                if data and (message := _joined(data)):
                    yield name, message
                data, name = [], MESSAGE
    if data and (message := _joined(data)):
        yield name, message  # a stream cut before its last blank line


async def messages(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The data of each event of an SSE body, whatever its name."""
    async for _, message in events(chunks):
        yield message


def _joined(data: list[bytearray]) -> bytes:
    # SSE joins an event's data lines with a newline, which between JSON tokens is
    # whitespace like a space; a stdio client must get each message on one line.
    event = bytes(data[0]) if len(data) == 1 else b" ".join(data)
    return b"" if event.isspace() else event
