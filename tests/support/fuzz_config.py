"""Hypothesis strategies for config documents, hostile ones among them: shared by
tests/settings/test_fuzz_config.py and the abuse bench (bench/suites/abuse).
"""

import json
from typing import Any, Final

from hypothesis import strategies as st

from tests.conftest import ECHO, python_server

#: A command that exists nowhere, for the generated servers that are valid.
NOWHERE: Final = "/nonexistent/mcp-tray-fuzz/server"
#: What the echo entry is, in every generated document that has servers.
ECHO_ENTRY: Final = python_server(ECHO)

hostile_strings = st.sampled_from(
    [
        "\0",
        "a\0b",
        "\ud800",
        "x\udfff",
        "\ud83d",
        "",
        " ",
        "\n",
        "a=b",
        "=",
        "\u202e",
        "é",
        "${env:MCP_TRAY_FUZZ_UNSET}",
        "${keyring:}",
        "${keyring:x}",
        "${python}",
        "${configDir}",
        "${nope}",
        "${",
        "x" * 300,
    ]
)
texts = st.text(max_size=12) | hostile_strings
hostile_numbers = st.sampled_from(
    [
        float("nan"),
        float("inf"),
        float("-inf"),
        -1,
        0,
        4.9,
        5,
        86400.5,
        1e308,
        10**30,
        -(10**30),
        2**63,
        65536,
        1023,
    ]
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | texts
    | hostile_numbers
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
#: Anything at all where a setting goes.
hostile = hostile_strings | hostile_numbers | json_values
#: Hostile, but no object: where an object could be a valid config without echo.
no_object = scalars | st.lists(json_values, max_size=3)
server_names = (
    st.sampled_from(["notes", "a.b", "x-1", "web_2", "a\n", "", "a b", "../x", "-x", "x" * 65])
    | st.text(max_size=10)
).filter(lambda name: name != "echo")
env_names = st.sampled_from(["API_KEY", "PATH", "X", "", "A=B", "=", "A\0", "\udc00"]) | st.text(
    max_size=8
)
own_keys = {
    "args": st.lists(st.just("--flag") | texts, max_size=3) | hostile,
    "env": st.dictionaries(env_names, st.text(max_size=8) | hostile, max_size=3) | hostile,
    "cwd": st.just("/tmp") | hostile,
    "retry": st.sampled_from(["safe", "always", "never"]) | hostile,
    "keepalive_seconds": st.floats(5, 86400) | hostile,
    "sharing": st.sampled_from(["shared", "per-session", "per-workspace"]) | hostile,
    "protocol": st.sampled_from(["auto", "handshake", "2026-07-28"]) | hostile,
    "max_children": st.integers(1, 512) | hostile,
    "type": st.just("stdio") | hostile,
    "url": texts,
    "bogus": hostile,
}


@st.composite
def server_entries(draw: st.DrawFn) -> Any:
    """A server entry: usually nearly valid, never one that would start."""
    if draw(st.integers(0, 19)) == 0:
        return draw(hostile)
    entry: dict[str, Any] = {}
    if draw(st.integers(0, 9)) > 0:
        entry["command"] = draw(st.just(NOWHERE) | hostile)
    for key in draw(st.lists(st.sampled_from(sorted(own_keys)), max_size=4, unique=True)):
        entry[key] = draw(own_keys[key])
    # true, or something that is no bool and so refused: never started.
    entry["disabled"] = draw(st.just(True) | hostile.filter(lambda v: not isinstance(v, bool)))
    return entry


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    """The bytes of a config file: a generated document, sometimes broken as a whole."""
    servers: Any = {"echo": ECHO_ENTRY}
    servers |= draw(st.dictionaries(server_names, server_entries(), max_size=3))
    doc: Any = {"mcpServers": servers if draw(st.integers(0, 19)) else draw(no_object)}
    if draw(st.booleans()):
        gateway = {
            "port": draw(st.integers(0, 65535) | hostile),
            "max_body_bytes": draw(st.integers(1024, 256 * 1024 * 1024) | hostile),
        }
        kept = draw(st.lists(st.sampled_from(sorted(gateway)), unique=True))
        doc["gateway"] = {key: gateway[key] for key in kept}
    if draw(st.integers(0, 4)) == 0:
        doc[draw(st.sampled_from(["$schema", "mcpServer", "extra"]) | texts)] = draw(hostile)
    if draw(st.integers(0, 9)) == 0:
        doc = draw(no_object)  # a root that is not an object
    text = json.dumps(doc, allow_nan=True, indent=draw(st.sampled_from([None, 2])))
    breakage = draw(
        st.sampled_from(
            ["none"] * 6 + ["deep", "digits", "duplicate", "cut", "bytes", "raw-surrogate"]
        )
    )
    if breakage == "deep":
        depth = draw(st.sampled_from([33, 500, 1000, 50_000]))
        nested = "[" * depth + "]" * depth
        text = text[:-1] + f', "$schema": {nested}}}' if text.endswith("}") else nested
    elif breakage == "digits":
        text = text.replace(": ", ": " + "9" * draw(st.sampled_from([400, 4301, 10_000])), 1)
    elif breakage == "duplicate" and text.endswith("}"):
        text = text[:-1] + ', "mcpServers": {}}'
    elif breakage == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif breakage == "bytes":
        return draw(st.binary(max_size=200))
    elif breakage == "raw-surrogate":
        # Written as bytes (CESU-8), not as a \u escape: not UTF-8 at all.
        return json.dumps(doc, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return text.encode("utf-8")
