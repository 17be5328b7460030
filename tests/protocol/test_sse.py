"""Server-sent events cut from chunks as they come (core.protocol.sse): the bridge reads the
gateway's answers with it, a remote server's session the remote's."""

from collections.abc import AsyncIterator

import pytest

from core.protocol.sse import events, messages


async def chunked(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def all_events(*chunks: bytes) -> list[tuple[bytes, bytes]]:
    return [event async for event in events(chunked(*chunks))]


async def test_each_event_has_its_name_and_its_data_whatever_the_chunks() -> None:
    body = (
        b": a comment\r\n\r\n"
        b"event: endpoint\r\ndata: /messages/?session_id=1\r\n\r\n"
        b'data: {"jsonrpc": "2.0",\ndata: "id": 1}\n\n'
        b"id: 7\ndata:\n\n"
        b'data:{"id": 2}\n'
    )
    expected = [
        (b"endpoint", b"/messages/?session_id=1"),
        # Two data lines are one message on one line (a stdio peer reads lines).
        (b"message", b'{"jsonrpc": "2.0", "id": 1}'),
        # Cut before its blank line, the last event still counts.
        (b"message", b'{"id": 2}'),
    ]

    assert await all_events(body) == expected
    assert await all_events(*(body[i : i + 1] for i in range(len(body)))) == expected


@pytest.mark.parametrize("name", [b"event:ping", b"event: ping"])
async def test_a_named_event_keeps_its_name_and_messages_take_every_event(name: bytes) -> None:
    body = name + b"\ndata: 1\n\ndata: 2\n\n"

    assert await all_events(body) == [(b"ping", b"1"), (b"message", b"2")]
    assert [m async for m in messages(chunked(body))] == [b"1", b"2"]
