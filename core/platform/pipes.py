"""A child's (or the bridge's own) stdio pipes as asyncio transports.

- POSIX, ``event loop``: ``loop.connect_read_pipe``/``connect_write_pipe``;
  the selector loop watches the pipes' descriptors.
- Windows and the portable set, ``threads``: a thread per pipe. The pipes
  ``subprocess`` makes on Windows are synchronous handles that no asyncio
  loop can watch (the Proactor loop needs overlapped ones, which only
  asyncio's own subprocess support creates, and only on that loop), and a
  console stdin is no pipe at all. A reader thread hands each chunk to the
  protocol through ``call_soon_threadsafe``; a writer thread drains a queue,
  pausing the protocol above ``HIGH_WATER`` queued bytes. The transports
  are the same asyncio interfaces, so the code above cannot tell them apart.
"""

import asyncio
import contextlib
import os
import queue
import stat
import threading
from collections.abc import Callable
from typing import IO, Any, Final, Protocol

#: Bytes read from a pipe at once by a reader thread.
CHUNK: Final = 256 * 1024
#: Queued bytes above which a writer pauses its protocol (asyncio's own default).
HIGH_WATER: Final = 64 * 1024
LOW_WATER: Final = 16 * 1024

ReadFactory = Callable[[], asyncio.Protocol]
WriteFactory = Callable[[], asyncio.BaseProtocol]


class Pipes(Protocol):
    @property
    def name(self) -> str: ...

    async def read_pipe(
        self, loop: asyncio.AbstractEventLoop, factory: ReadFactory, pipe: IO[bytes]
    ) -> asyncio.BaseTransport: ...

    async def write_pipe(
        self, loop: asyncio.AbstractEventLoop, factory: WriteFactory, pipe: IO[bytes]
    ) -> asyncio.WriteTransport: ...


class LoopPipes:
    """The event loop watches the pipes (selector loops on POSIX)."""

    name: Final = "event loop (connect_read_pipe/connect_write_pipe)"

    async def read_pipe(
        self, loop: asyncio.AbstractEventLoop, factory: ReadFactory, pipe: IO[bytes]
    ) -> asyncio.BaseTransport:
        transport, _ = await loop.connect_read_pipe(factory, pipe)
        return transport

    async def write_pipe(
        self, loop: asyncio.AbstractEventLoop, factory: WriteFactory, pipe: IO[bytes]
    ) -> asyncio.WriteTransport:
        transport, _ = await loop.connect_write_pipe(factory, pipe)
        return transport


class ThreadPipes:
    """A thread per pipe (Windows, and the portable set everywhere)."""

    name: Final = "threads (one per pipe)"

    async def read_pipe(
        self, loop: asyncio.AbstractEventLoop, factory: ReadFactory, pipe: IO[bytes]
    ) -> asyncio.BaseTransport:
        protocol = factory()
        transport = ThreadReadTransport(loop, protocol, pipe)
        protocol.connection_made(transport)
        transport.start()
        return transport

    async def write_pipe(
        self, loop: asyncio.AbstractEventLoop, factory: WriteFactory, pipe: IO[bytes]
    ) -> asyncio.WriteTransport:
        protocol = factory()
        transport = ThreadWriteTransport(loop, protocol, pipe)
        protocol.connection_made(transport)
        return transport


def pipes_for(stream: IO[bytes], default: Pipes) -> Pipes:
    """``default``, or threads for a stream no event loop can watch.

    asyncio's pipe transports take pipes, sockets and character devices
    only: a regular file (``mcp-tray connect NAME > out.jsonl``, or requests
    fed from one with ``<``) makes them raise ValueError. A thread reads or
    writes a file as well as a pipe.
    """
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError):
        return default
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode):
        return default
    return ThreadPipes()


def _soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., object], *args: Any) -> None:
    # A loop already closed (the tray on its way out) has nobody left to tell.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback, *args)


class _OnThread:
    """What both thread transports keep: the loop, the protocol, the pipe, and the end."""

    _protocol: asyncio.BaseProtocol

    def __init__(
        self, loop: asyncio.AbstractEventLoop, protocol: asyncio.BaseProtocol, pipe: IO[bytes]
    ) -> None:
        self._loop = loop
        self._protocol = protocol
        self._pipe = pipe
        self._closing = False
        self._lost = False

    def _lose(self, error: Exception | None) -> None:
        self._closing = True
        if not self._lost:
            self._lost = True
            self._protocol.connection_lost(error)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol

    def is_closing(self) -> bool:
        return self._closing


class ThreadReadTransport(_OnThread, asyncio.ReadTransport):
    """Reads ``pipe`` on a thread of its own and feeds the protocol on the loop."""

    _protocol: asyncio.Protocol

    def __init__(
        self, loop: asyncio.AbstractEventLoop, protocol: asyncio.Protocol, pipe: IO[bytes]
    ) -> None:
        _OnThread.__init__(self, loop, protocol, pipe)
        asyncio.ReadTransport.__init__(self)
        #: Set while reading is allowed; cleared by pause_reading.
        self._flowing = threading.Event()
        self._flowing.set()
        self._thread = threading.Thread(target=self._pump, name="mcp-tray pipe reader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _pump(self) -> None:
        read = getattr(self._pipe, "read1", self._pipe.read)
        error: Exception | None = None
        try:
            while not self._closing:
                self._flowing.wait()
                data = read(CHUNK)
                if not data:
                    break
                _soon(self._loop, self._deliver, data)
        except (OSError, ValueError) as exc:
            # ValueError: the file was closed under us.
            error = exc
        finally:
            # Closed here, by the thread that reads it: closing it from another
            # thread mid-read could hand this read a recycled descriptor.
            with contextlib.suppress(OSError):
                self._pipe.close()
        _soon(self._loop, self._ended, error)

    def _deliver(self, data: bytes) -> None:
        if not self._closing:
            self._protocol.data_received(data)

    def _ended(self, error: Exception | None) -> None:
        if not self._closing and error is None:
            self._protocol.eof_received()
        self._lose(error)

    def is_reading(self) -> bool:
        return self._flowing.is_set() and not self._closing

    def pause_reading(self) -> None:
        self._flowing.clear()

    def resume_reading(self) -> None:
        self._flowing.set()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        assert isinstance(protocol, asyncio.Protocol)
        self._protocol = protocol

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._flowing.set()  # a paused thread wakes, sees closing and ends
        self._loop.call_soon(self._lose, None)


class ThreadWriteTransport(_OnThread, asyncio.WriteTransport):
    """Writes to ``pipe`` from a thread of its own, draining a queue in order."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, protocol: asyncio.BaseProtocol, pipe: IO[bytes]
    ) -> None:
        _OnThread.__init__(self, loop, protocol, pipe)
        asyncio.WriteTransport.__init__(self)
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._pending = 0
        self._lock = threading.Lock()
        self._paused = False
        self._thread = threading.Thread(
            target=self._drain, name="mcp-tray pipe writer", daemon=True
        )
        self._thread.start()

    def _drain(self) -> None:
        error: Exception | None = None
        while (data := self._queue.get()) is not None:
            try:
                self._pipe.write(data)
                self._pipe.flush()
            except (OSError, ValueError) as exc:
                error = exc
                break
            finally:
                with self._lock:
                    self._pending -= len(data)
                    low = self._pending <= LOW_WATER
            if low and self._paused:
                _soon(self._loop, self._resume)
        with contextlib.suppress(OSError, ValueError):
            self._pipe.close()
        _soon(self._loop, self._lose, error)

    def _resume(self) -> None:
        if self._paused:
            self._paused = False
            self._protocol.resume_writing()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or not data:
            return
        chunk = bytes(data)
        with self._lock:
            self._pending += len(chunk)
            high = self._pending > HIGH_WATER
        self._queue.put(chunk)
        if high and not self._paused:
            self._paused = True
            self._protocol.pause_writing()

    def get_write_buffer_size(self) -> int:
        return self._pending

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return (LOW_WATER, HIGH_WATER)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        raise NotImplementedError("the thread pipe's limits are fixed")

    def can_write_eof(self) -> bool:
        return False

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._protocol = protocol

    def close(self) -> None:
        """Write what is queued, then close the pipe (the reader sees EOF)."""
        if not self._closing:
            self._closing = True
            self._queue.put(None)

    def abort(self) -> None:
        self.close()
