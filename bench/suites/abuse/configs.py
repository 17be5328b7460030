"""Part 1, hostile configs: generated documents through ``load_config`` and the
real CLI, special files, and hot-reload edits of the running tray's config.
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform == "linux", (
    "bench/abuse.py measures Linux (file limits through psutil.Process.rlimit)"
)

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from bench.harness.files import ROOT
from bench.harness.logs import trouble_in
from bench.harness.tray import SERVER, server_entry, tray_env
from bench.suites.abuse.common import LogTail, T
from bench.suites.abuse.constants import CLI_SECONDS, LOAD_SECONDS, RELOAD_SECONDS, STOP_SECONDS
from bench.suites.abuse.tray import Tray
from core.base.errors import ConfigError, NotRunning
from core.settings.config import load_config
from core.settings.paths import default_paths
from core.settings.runtime import running_instance
from tests.support.fuzz_config import ECHO_ENTRY, NOWHERE


@dataclass
class ConfigCase:
    label: str
    path: Path
    tags: list[str]
    #: load_config in-process: loaded, refused, exception or hang.
    outcome: str = ""
    detail: str = ""
    seconds: float = 0.0
    #: A refusal that is one printable line naming the file, with a "Fix: ".
    one_line: bool = True


@dataclass
class CliRun:
    case: ConfigCase
    code: int | None = None
    #: Seconds to the exit (refused) or to the runtime file (valid).
    seconds: float = 0.0
    up: bool = False
    #: What hung: "" or "no exit", "not up", "no stop".
    hung: str = ""
    stop_code: int | None = None
    traceback: bool = False
    crash_log: bool = False
    stderr: str = ""
    pid: int = 0


@dataclass
class Edit:
    label: str
    expected: str | None
    seen: str = ""
    #: How long until the reload showed in status.
    seconds: float = 0.0
    pid_kept: bool = True
    ready: bool = True
    status_failures: int = 0
    trouble: list[str] = field(default_factory=list)


@dataclass
class ConfigFigures:
    cases: list[ConfigCase] = field(default_factory=list)
    cli: list[CliRun] = field(default_factory=list)
    cli_seconds: float = 0.0
    edits: list[Edit] = field(default_factory=list)
    marker_misses: int = 0
    reload_seconds: float = 0.0
    echo_pid: int = 0


def tags_of(data: bytes) -> list[str]:
    """The hostile features a generated document shows (for the coverage line)."""
    found = []
    if b"\\u0000" in data or b"\x00" in data:
        found.append("NUL")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        found.append("not UTF-8")
    if re.search(rb"\\u[dD][89abAB][0-9a-fA-F]{2}", data):
        found.append("surrogate escape")
    if re.search(rb"NaN|Infinity", data):
        found.append("NaN/Infinity")
    if b"[" * 33 in data:
        found.append("nesting >= 33")
    if re.search(rb"\d{400}", data):
        found.append(">= 400 digits")
    if re.search(rb'"[^"\\]*=[^"\\]*"\s*:', data):
        found.append("'=' in a key")
    if re.search(rb'"[^"]*\\n[^"]*"\s*:', data):
        found.append("newline in a key")
    if re.search(rb"\d{19}", data) and "digits" not in " ".join(found):
        found.append("huge number")
    return found


def special_files(folder: Path) -> list[ConfigCase]:
    """Config paths that are no plain small JSON file."""
    folder.mkdir(parents=True, exist_ok=True)
    echo = {"mcpServers": {SERVER: ECHO_ENTRY}}
    cases: list[ConfigCase] = []

    def case(label: str, path: Path) -> None:
        cases.append(ConfigCase(label, path, ["special"]))

    fifo = folder / "config.fifo"
    os.mkfifo(fifo)
    case("a FIFO", fifo)
    case("/dev/zero", Path("/dev/zero"))
    big = folder / "two-mib.json"
    big.write_bytes(b'{"mcpServers": {}, "pad": "' + b"x" * (2 * 1024 * 1024) + b'"}')
    case("a 2 MiB file", big)
    zero_link = folder / "zero-link.json"
    zero_link.symlink_to("/dev/zero")
    case("a symlink to /dev/zero", zero_link)
    case("/dev/null", Path("/dev/null"))
    sock_path = folder / "config.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_path))
    listener.close()  # the socket file stays
    case("a unix socket", sock_path)
    case("a folder", folder)
    case("a missing file", folder / "missing.json")
    loop_a, loop_b = folder / "loop-a.json", folder / "loop-b.json"
    loop_a.symlink_to(loop_b)
    loop_b.symlink_to(loop_a)
    case("a symlink loop", loop_a)
    exact = folder / "one-mib.json"
    text = json.dumps(echo).encode()
    exact.write_bytes(text + b" " * (1024 * 1024 - len(text)))
    case("exactly 1 MiB, valid", exact)
    over = folder / "one-mib-plus-one.json"
    over.write_bytes(text + b" " * (1024 * 1024 + 1 - len(text)))
    case("1 MiB + 1 byte", over)
    empty = folder / "empty.json"
    empty.write_bytes(b"")
    case("an empty file", empty)
    bom = folder / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + text)
    case("UTF-8 with a BOM, valid", bom)
    utf16 = folder / "utf16.json"
    utf16.write_bytes(json.dumps(echo).encode("utf-16"))
    case("UTF-16", utf16)
    return cases


def load_bounded(case: ConfigCase) -> None:
    """load_config on a thread of its own, bounded by LOAD_SECONDS."""
    box: dict[str, Any] = {}

    def work() -> None:
        began = time.perf_counter()
        try:
            load_config(case.path)
            box["outcome"] = ("loaded", "")
        except ConfigError as exc:
            box["outcome"] = ("refused", str(exc))
        except BaseException as exc:
            box["outcome"] = ("exception", "".join(traceback.format_exception(exc)))
        box["seconds"] = time.perf_counter() - began

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(LOAD_SECONDS)
    if worker.is_alive():
        case.outcome, case.detail, case.seconds = "hang", f"no verdict in {LOAD_SECONDS:g} s", 0
        return
    (case.outcome, case.detail), case.seconds = box["outcome"], box["seconds"]
    if case.outcome == "refused":
        text = case.detail
        case.one_line = text.startswith(str(case.path)) and text.isprintable() and "Fix: " in text


def pick(items: list[T], count: int) -> list[T]:
    """``count`` items spread evenly over ``items``."""
    if count <= 0 or not items:
        return []
    if count >= len(items):
        return list(items)
    step = len(items) / count
    return [items[int(i * step)] for i in range(count)]


def cli_sample(cases: list[ConfigCase], count: int) -> list[ConfigCase]:
    """Every special file, about a fifth valid documents, the rest refused ones."""
    specials = [c for c in cases if "special" in c.tags]
    if count <= len(specials):
        return specials[:count]
    generated = [c for c in cases if "special" not in c.tags]
    valid = [c for c in generated if c.outcome == "loaded"]
    others = [c for c in generated if c.outcome != "loaded"]
    n_valid = min(len(valid), max(1, (count - len(specials)) // 5))
    return specials + pick(valid, n_valid) + pick(others, count - len(specials) - n_valid)


async def cli_run(run: CliRun, home: Path, trays: list[int]) -> None:
    """``mcp-tray run --headless --config FILE`` on a home of its own."""
    paths = default_paths({"MCP_TRAY_HOME": str(home)})
    err_path = home / "stderr.log"
    began = time.perf_counter()
    with err_path.open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "core.cli.main",
            "run",
            "--headless",
            "--config",
            str(run.case.path),
            env=tray_env(home),
            cwd=ROOT,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            start_new_session=True,
        )
    run.pid = process.pid
    trays.append(process.pid)
    deadline = began + CLI_SECONDS
    while time.perf_counter() < deadline and process.returncode is None:
        with contextlib.suppress(NotRunning, OSError, ValueError):
            if running_instance(paths).pid == process.pid:
                run.up = True
                break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 0.02)
    run.seconds = time.perf_counter() - began
    if run.up:
        process.send_signal(signal.SIGTERM)
        try:
            run.stop_code = await asyncio.wait_for(process.wait(), STOP_SECONDS)
        except TimeoutError:
            run.hung = "no stop"
    elif process.returncode is None:
        run.hung = "not up" if run.case.outcome == "loaded" else "no exit"
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
    if not run.up and not run.hung:
        run.code = process.returncode
    run.stderr = err_path.read_text(errors="replace")
    run.traceback = "Traceback" in run.stderr
    run.crash_log = any(paths.log_dir.glob("mcp-tray-cli-error.log"))


def config_cases(docs: list[bytes], folder: Path) -> list[ConfigCase]:
    """The generated documents written to files, and the special files; none checked yet."""
    folder.mkdir(parents=True, exist_ok=True)
    cases = []
    for number, data in enumerate(docs):
        path = folder / f"generated-{number:03}.json"
        path.write_bytes(data)
        cases.append(ConfigCase(f"generated #{number}", path, tags_of(data)))
    return cases + special_files(folder / "special")


def cli_homes(folder: Path, count: int) -> list[Path]:
    homes = [folder / "homes" / f"cli-{number:03}" for number in range(count)]
    for home in homes:
        home.mkdir(parents=True, exist_ok=True)
    return homes


async def check_configs(
    docs: list[bytes],
    folder: Path,
    args: argparse.Namespace,
    figures: ConfigFigures,
    trays: list[int],
) -> None:
    figures.cases = config_cases(docs, folder)
    for case in figures.cases:
        load_bounded(case)

    runs = [CliRun(case) for case in cli_sample(figures.cases, args.cli)]
    began = time.perf_counter()
    queue = iter(zip(runs, cli_homes(folder, len(runs)), strict=True))

    async def job() -> None:
        for run, home in queue:
            await cli_run(run, home, trays)

    await asyncio.gather(*(job() for _ in range(args.cli_jobs)))
    figures.cli_seconds = time.perf_counter() - began
    figures.cli = runs


def marker_config(number: int) -> bytes:
    servers = {SERVER: ECHO_ENTRY, f"marker-{number}": {"command": NOWHERE, "disabled": True}}
    return json.dumps({"gateway": {"port": 0}, "mcpServers": servers}, indent=2).encode()


def replace_with(config: Path, make: Any) -> None:
    """Put something new at ``config`` by renaming it over, as editors save."""
    spare = config.with_name(config.name + ".bench-new")
    with contextlib.suppress(FileNotFoundError):
        spare.unlink()
    make(spare)
    os.replace(spare, config)


async def wait_reload(
    tray: Tray, marker: str, expected: str | None, edit: Edit | None = None
) -> str:
    """Until status shows the edit (refused: its error; applied: the marker gone)."""
    began = time.perf_counter()
    last = ""
    while time.perf_counter() - began < RELOAD_SECONDS:
        tray.alive()
        try:
            body = await tray.status()
        except (httpx2.HTTPError, ValueError) as exc:
            if edit is not None:
                edit.status_failures += 1
            last = f"status failed: {type(exc).__name__}"
            await asyncio.sleep(0.05)
            continue
        names = {s.get("name") for s in body.get("servers", [])}
        error = body.get("config_error")
        if expected is None and error is None and marker not in names:
            return "applied"
        if expected is not None and error == expected:
            return "refused"
        last = f"config_error {error!r}, marker {'present' if marker in names else 'gone'}"
        await asyncio.sleep(0.05)
    return f"not seen in {RELOAD_SECONDS:g} s ({last[:300]})"


async def wait_marker(tray: Tray, marker: str) -> bool:
    """Until status shows ``marker`` (a valid edit) applied and no config error."""
    began = time.perf_counter()
    while time.perf_counter() - began < RELOAD_SECONDS:
        tray.alive()
        with contextlib.suppress(httpx2.HTTPError, ValueError):
            body = await tray.status()
            names = {s.get("name") for s in body.get("servers", [])}
            if marker in names and body.get("config_error") is None:
                return True
        await asyncio.sleep(0.05)
    return False


async def hot_reload(
    tray: Tray, docs: list[bytes], folder: Path, figures: ConfigFigures, tail: LogTail
) -> None:
    config = tray.config
    began = time.perf_counter()
    figures.echo_pid = server_entry(await tray.status(), SERVER).get("pid") or 0
    big = b'{"mcpServers": {}, "pad": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    edits: list[tuple[str, Any]] = [
        (f"generated edit #{n}", lambda path, data=data: path.write_bytes(data))
        for n, data in enumerate(docs)
    ]
    specials: list[tuple[str, Any]] = [
        ("FIFO renamed over", lambda path: replace_with(path, os.mkfifo)),
        (
            "symlink to /dev/zero renamed over",
            lambda path: replace_with(path, lambda spare: spare.symlink_to("/dev/zero")),
        ),
        ("2 MiB file written", lambda path: path.write_bytes(big)),
        ("emptied (truncated)", lambda path: path.write_bytes(b"")),
    ]
    # The special ones spread among the generated ones.
    for offset, special in enumerate(specials):
        edits.insert(
            min(len(edits), (offset + 1) * max(1, len(edits) // (len(specials) + 1))), special
        )
    for number, (label, apply) in enumerate(edits):
        marker = f"marker-{number}"
        replace_with(config, lambda spare, number=number: spare.write_bytes(marker_config(number)))
        # The marker there and config_error clear: the edit's own reload will show.
        if not await wait_marker(tray, marker):
            figures.marker_misses += 1
        tail.new()
        apply(config)
        try:
            load_config(config)
            expected: str | None = None
        except ConfigError as exc:
            expected = str(exc)
        edit = Edit(label, expected)
        started = time.perf_counter()
        edit.seen = await wait_reload(tray, marker, expected, edit)
        edit.seconds = time.perf_counter() - started
        entry: dict[str, Any] = {}
        try:
            entry = server_entry(await tray.status(), SERVER)
        except (httpx2.HTTPError, ValueError):
            edit.status_failures += 1
        edit.pid_kept = entry.get("pid") == figures.echo_pid
        edit.ready = entry.get("state") == "ready"
        edit.trouble = trouble_in(tail.new(), f"tray output after {label}")
        figures.edits.append(edit)
    # Back to the first config, seen applied (after a marker, so that it shows).
    final = len(edits)
    replace_with(config, lambda spare: spare.write_bytes(marker_config(final)))
    if not await wait_marker(tray, f"marker-{final}"):
        figures.marker_misses += 1
    replace_with(
        config,
        lambda spare: spare.write_text(
            json.dumps({"gateway": {"port": 0}, "mcpServers": {SERVER: ECHO_ENTRY}}, indent=2)
        ),
    )
    if await wait_reload(tray, f"marker-{final}", None) != "applied":
        figures.marker_misses += 1
    figures.reload_seconds = time.perf_counter() - began
