"""One record of the call journal (docs/design.md §3.16), and what is kept of a call's words.

A call is seen twice: on the event loop, where only what costs nothing is
taken (``Seen``: times, who, where, the arguments as they are, the result's
size and first lines), and on the journal's writer thread, where it becomes
a ``CallRecord``: its arguments redacted and cut, its texts scrubbed of
secrets. So the loop pays for a tuple and a queue put, never for JSON.

Why the result's summary is taken on the loop: a record waits up to a batch
for the writer, and a whole result held that long keeps hundreds of decoded
results alive at once, where the summary costs the loop a few dictionary
lookups.

Redaction keeps secrets out of the file and the window:

- the value of any key that looks secret (``SECRET_KEY_RE``: token,
  password, secret, api_key, authorization, ...) becomes ``REDACTED``,
  whatever it holds;
- any string that holds a value resolved from the keyring for a server's
  env (``${keyring:NAME}``) has it replaced by ``REDACTED_SECRET``.

Then the arguments' JSON is cut at ``ARGUMENTS_BYTES`` with ``CUT_MARK``.

Stdlib only; no I/O.
"""

import contextlib
import functools
import json
import re
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import Any, Final, Literal, NamedTuple, get_args

#: How a call ended. ``refused`` says by whom in ``refused_by``; ``denied`` and
#: ``timeout`` include an approval that was denied or never answered.
Outcome = Literal[
    "ok", "tool-error", "error", "exited", "retried", "refused", "denied", "cancelled", "timeout"
]
OUTCOMES: Final[tuple[str, ...]] = get_args(Outcome)
#: Who refused a call before it reached its server.
RefusedBy = Literal["breaker", "profile", "approval", "tool-change"]
REFUSERS: Final[tuple[str, ...]] = get_args(RefusedBy)

#: The arguments' JSON is kept up to this many bytes (UTF-8), then ``CUT_MARK``.
ARGUMENTS_BYTES: Final = 4096
#: The result's first lines kept in a record (its text, or what its blocks are).
RESULT_HEAD_BYTES: Final = 1024
#: A longer error text is cut here (the full text went to the client and the log).
DETAIL_CHARS: Final = 500
CUT_MARK: Final = "…[cut: {total} bytes in all]"
REDACTED: Final = "[redacted]"
REDACTED_SECRET: Final = "[redacted: keyring secret]"
#: Keys whose values are never kept: matched anywhere in the key, any case.
SECRET_KEY_RE: Final = re.compile(
    r"token|passw(or)?d|passphrase|secret|api[-_]?key|authori[sz]ation|credential|"
    r"private[-_]?key|cookie|session[-_]?key|bearer",
    re.IGNORECASE,
)
#: Keyring values shorter than this are not searched for (they would match words).
MIN_SECRET_CHARS: Final = 4


class Seen(NamedTuple):
    """A call as the loop saw it end: raw but for its result's summary (a tuple: the cheapest
    to make)."""

    #: UTC seconds since the epoch at its start.
    started: float
    duration_ms: float
    client: str
    client_name: str
    pid: int | None
    identified_by: str
    session: str
    door: str
    server: str
    generation: int | None
    method: str
    tool: str
    arguments: object
    outcome: str
    refused_by: str
    error_code: int | None
    detail: str
    #: ``result_summary`` of the result: its size and first lines (0, "" without one).
    result_size: int
    result_head: str
    trace_id: str = ""


class CallRecord(NamedTuple):
    """One call, as the journal keeps it (a tuple: written to sqlite as it is)."""

    id: str
    started: float
    duration_ms: float
    client: str
    client_name: str
    pid: int | None
    identified_by: str
    session: str
    door: str
    server: str
    generation: int | None
    method: str
    #: The tool's name, the resource's URI or the prompt's name ("" for other methods).
    tool: str
    #: The arguments' JSON, redacted and cut (None: the config keeps names only).
    arguments: str | None
    outcome: str
    refused_by: str
    error_code: int | None
    detail: str
    result_size: int
    result_head: str
    trace_id: str
    #: Its place in the file (0 until written): ``--follow`` and the API page by it.
    seq: int = 0

    @property
    def time(self) -> str:
        """Its start, UTC, ISO 8601 with milliseconds."""
        return datetime.fromtimestamp(self.started, UTC).isoformat(timespec="milliseconds")

    def to_json(self) -> dict[str, Any]:
        arguments: object = self.arguments
        if self.arguments is not None:
            with contextlib.suppress(ValueError):  # cut: kept as the text it is
                arguments = json.loads(self.arguments)
        return {
            "seq": self.seq,
            "id": self.id,
            "time": self.time,
            "duration_ms": round(self.duration_ms, 3),
            "client": self.client,
            "client_name": self.client_name,
            "pid": self.pid,
            "identified_by": self.identified_by,
            "session": self.session,
            "door": self.door,
            "server": self.server,
            "generation": self.generation,
            "method": self.method,
            "tool": self.tool,
            "arguments": arguments,
            "outcome": self.outcome,
            "refused_by": self.refused_by or None,
            "error_code": self.error_code,
            "detail": self.detail,
            "result_size": self.result_size,
            "result_head": self.result_head,
            "trace_id": self.trace_id,
        }


def _encoder() -> Callable[[object], str]:
    """One encoder for every record. ``JSONEncoder.encode`` builds C's encoder anew for
    each value (1.2 us of a record's 3 for a small dict); this one is built once
    (0.45 us). No check for cycles (no ``markers``): what it encodes was decoded
    from JSON. Where C's encoder is missing or takes other arguments, Python's."""
    python = json.JSONEncoder(ensure_ascii=False)
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    sample = {"a": [1, 2.5, None, True], "é\n": '"x"'}
    try:
        made = make(None, python.default, json.encoder.encode_basestring, None, ": ", ", ",
                    False, False, True)  # fmt: skip
        if "".join(made(sample, 0)) != python.encode(sample):
            return python.encode
    except TypeError:  # no C encoder (None is not callable), or another signature
        return python.encode
    return lambda value: "".join(made(value, 0))


_encode: Final = _encoder()
_SCALARS: Final = frozenset({int, float, bool, type(None)})
_SEQUENCES: Final = (list, tuple)


@functools.lru_cache(maxsize=1024)
def secret_key(key: str) -> bool:
    """Whether a key looks like it holds a secret (keys repeat: the verdict is kept)."""
    return SECRET_KEY_RE.search(key) is not None


def complete(
    seen: Seen, secrets: Collection[str], *, keep_arguments: bool, id: str = "", seq: int = 0
) -> CallRecord:
    """What the journal keeps of a call (on the writer thread: this is the costly part)."""
    arguments = None
    if keep_arguments and seen.arguments is not None:
        arguments = cut(_encode(redact(seen.arguments, secrets)))
    head = seen.result_head
    detail = seen.detail
    if secrets:
        detail, head = scrub(detail, secrets), scrub(head, secrets)
    # Seen's fields in CallRecord's places (checked below), through tuple's own
    # constructor: a NamedTuple's __new__ is a Python frame with 22 arguments.
    return _new_record(
        (
            id,
            *seen[:12],
            arguments,
            *seen[13:16],
            detail[:DETAIL_CHARS],
            seen[17],
            head,
            seen[19],
            seq,
        )
    )


_new_record: Final = functools.partial(tuple.__new__, CallRecord)
assert (
    Seen._fields[:12] == CallRecord._fields[1:13]
    and Seen._fields[13:16] == CallRecord._fields[14:17]
    and (Seen._fields[17], Seen._fields[19]) == ("result_size", "trace_id")
    and CallRecord._fields[18::2] == ("result_size", "trace_id")
), "complete() puts Seen's fields in CallRecord's places: keep their orders together"


def redact(value: object, secrets: Collection[str]) -> object:
    """``value`` with secret-looking keys' values and keyring secrets replaced."""
    if isinstance(value, str):
        return scrub(value, secrets) if secrets else value
    if isinstance(value, dict):  # before Mapping: an ABC check costs ten times more
        return _redact_map(value, secrets)
    if isinstance(value, _SEQUENCES):
        return [redact(item, secrets) for item in value]
    if isinstance(value, Mapping):
        return _redact_map(value, secrets)
    return value


def _redact_map(value: Mapping[Any, Any], secrets: Collection[str]) -> dict[str, object]:
    kept: dict[str, object] = {}
    for key, item in value.items():
        name = key if isinstance(key, str) else str(key)
        if secret_key(name):
            kept[name] = REDACTED
        elif type(item) in _SCALARS or (not secrets and isinstance(item, str)):
            kept[name] = item
        else:
            kept[name] = redact(item, secrets)
    return kept


def scrub(text: str, secrets: Collection[str]) -> str:
    """``text`` with every keyring secret in it replaced."""
    for secret in secrets:
        if len(secret) >= MIN_SECRET_CHARS and secret in text:
            text = text.replace(secret, REDACTED_SECRET)
    return text


def cut(text: str, limit: int = ARGUMENTS_BYTES) -> str:
    """``text`` up to ``limit`` UTF-8 bytes, then the mark saying how long it was."""
    if len(text) <= limit // 4:  # no character takes more than 4 bytes
        return text
    encoded = text.encode()
    if len(encoded) <= limit:
        return text
    kept = encoded[:limit].decode(errors="ignore")  # never half a character
    return kept + CUT_MARK.format(total=len(encoded))


def result_summary(result: Mapping[str, Any] | None) -> tuple[int, str]:
    """The result's size (the characters of its texts and data, not its JSON: that would
    encode every result once more) and its first lines."""
    if result is None:
        return 0, ""
    content = result.get("content")
    if isinstance(content, list) and len(content) == 1:
        # Most results: one text block.
        block = content[0]
        if isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                return len(text), cut(text, RESULT_HEAD_BYTES)
    size = 0
    parts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                text = str(block.get("text", ""))
                size += len(text)
                parts.append(text)
            else:
                data = block.get("data") or block.get("blob") or ""
                size += len(data) if isinstance(data, str) else 0
                parts.append(f"[{block.get('type')} {block.get('mimeType') or ''}]".strip())
    else:
        for key in ("contents", "messages"):  # resources/read, prompts/get
            items = result.get(key)
            if isinstance(items, list):
                for item in items:
                    if isinstance(item, dict):
                        found = item.get("text")
                        inner = item.get("content")
                        if isinstance(inner, dict):
                            found = inner.get("text", found)
                        if isinstance(found, str):
                            size += len(found)
                            parts.append(found)
    head = "\n".join(parts) if len(parts) != 1 else parts[0]
    if not head and "structuredContent" in result:
        head = _encode(result["structuredContent"])
        size = len(head)
    return size, cut(head, RESULT_HEAD_BYTES)


#: ``--since`` units: seconds, minutes, hours, days.
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_SINCE_RE: Final = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")


def parse_since(text: str, now: float) -> float:
    """UTC seconds from ``10m``, ``2h``, ``3d``, ``90`` (seconds ago) or an ISO 8601 time.

    Raises ``ValueError`` with the forms it takes."""
    match = _SINCE_RE.fullmatch(text.strip())
    if match is not None:
        return now - float(match.group(1)) * _UNITS[match.group(2) or "s"]
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r} is neither a time ago (90, 10m, 2h, 3d) nor an ISO 8601 time "
            "(2026-12-02T06:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()
