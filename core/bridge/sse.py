"""Server-sent events as they arrive: the message each event carries, on one line.

A large event (a 50 MB tool result) comes in many chunks: they are gathered
in place, and its line is cut once, when its end has arrived (cutting the
whole buffer again at every chunk made a 56 MB event take 23 s).
"""

from collections.abc import AsyncIterator


async def messages(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The data of each event of an SSE body, as its chunks come; none for an event
    without data (a priming event, a comment, a keepalive)."""
    pending = bytearray()
    data: list[bytearray] = []
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
            elif not line and data:
                if message := _joined(data):
                    yield message
                data = []
    if data and (message := _joined(data)):
        yield message  # a stream cut before its last blank line


def _joined(data: list[bytearray]) -> bytes:
    # SSE joins an event's data lines with a newline, which between JSON tokens is
    # whitespace like a space; a stdio client must get each message on one line.
    event = bytes(data[0]) if len(data) == 1 else b" ".join(data)
    return b"" if event.isspace() else event
