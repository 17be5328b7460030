"""Running the suite: one invocation per era and target, its checks collected into outcomes."""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

import asyncio
import json
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

from bench.suites.conformance.constants import SERVER, STOP_SECONDS, SUITE_SECONDS, TIMESTAMP_RE
from bench.suites.conformance.processes import Processes, group_alive, killpg, log_tail
from bench.suites.conformance.proxy import HeaderProxy
from bench.suites.conformance.servers import Tray
from bench.suites.conformance.suite import Suite


@dataclass
class Outcome:
    """One scenario's checks in one run."""

    passed: int = 0
    failed: int = 0
    warnings: int = 0
    skipped: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    warned: list[tuple[str, str]] = field(default_factory=list)
    succeeded: list[str] = field(default_factory=list)
    #: INFO checks that say something (not the request/response trace), and SKIPPED ones.
    notes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failed == 0

    def cell(self) -> str:
        if self.failed:
            return f"FAIL {self.passed}/{self.passed + self.failed}"
        if not self.passed:
            return "skip" if self.skipped or not self.warnings else f"warn ({self.warnings})"
        extra = f" +{self.warnings}w" if self.warnings else ""
        return f"pass {self.passed}/{self.passed}{extra}"


@dataclass
class Run:
    """One suite invocation's results, by scenario, in the order they ran."""

    label: str
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    #: Set when the suite produced no results at all (with its output's tail).
    error: str = ""


#: INFO checks that only trace the suite's own requests and responses.
_TRACE_IDS: Final = frozenset(
    {"outgoing-request", "incoming-response", "incoming-sse-event", "stream-closed"}
)


def _message(check: dict[str, object]) -> str:
    details = check.get("details")
    said = details.get("message") if isinstance(details, dict) else None
    text = str(check.get("errorMessage") or said or check.get("description") or "")
    return " ".join(text.split())


def collect(outdir: Path, label: str) -> Run:
    run = Run(label)
    folders = sorted(
        (p for p in outdir.iterdir() if (p / "checks.json").is_file()),
        key=lambda p: (p / "checks.json").stat().st_mtime,
    )
    for folder in folders:
        scenario = TIMESTAMP_RE.sub("", folder.name).removeprefix("server-")
        outcome = Outcome()
        checks = json.loads((folder / "checks.json").read_text())
        for check in checks if isinstance(checks, list) else []:
            status = str(check.get("status", ""))
            ident = str(check.get("id", "?"))
            if status == "SUCCESS":
                outcome.passed += 1
                outcome.succeeded.append(ident)
            elif status == "FAILURE":
                outcome.failed += 1
                outcome.failures.append((ident, _message(check)))
            elif status == "WARNING":
                outcome.warnings += 1
                outcome.warned.append((ident, _message(check)))
            elif status == "SKIPPED":
                outcome.skipped += 1
                outcome.notes.append((ident, "SKIPPED: " + _message(check)))
            elif status == "INFO" and ident not in _TRACE_IDS:
                outcome.notes.append((ident, _message(check)))
        run.outcomes[scenario] = outcome
    return run


def _prepare(outdir: Path) -> IO[bytes]:
    """The results folder, and the suite's output log beside it (opened)."""
    outdir.mkdir(parents=True)
    return outdir.with_suffix(".log").open("wb")


async def _stop_async(process: asyncio.subprocess.Process) -> None:
    """SIGTERM the group, wait, SIGKILL; then SIGKILL any straggler in the group."""
    if process.returncode is None:
        killpg(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), STOP_SECONDS)
        except TimeoutError:
            killpg(process.pid, signal.SIGKILL)
            await process.wait()
    if group_alive(process.pid):
        killpg(process.pid, signal.SIGKILL)


async def run_suite(
    suite: Suite,
    url: str,
    era: str,
    scenarios: list[str],
    outdir: Path,
    label: str,
    processes: Processes,
) -> Run:
    """The suite's server scenarios of ``era`` against ``url``; one invocation per scenario asked."""
    log = _prepare(outdir)
    base = ["server", "--url", url, "--suite", "all", "--spec-version", era, "-o", str(outdir)]
    invocations = [[*base, "--scenario", name] for name in scenarios] or [base]
    with log:
        for args in invocations:
            process = await asyncio.create_subprocess_exec(
                *suite.command(*args),
                cwd=outdir,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
            # Only for the last-resort sweep; stopped below, where asyncio reaps it.
            processes.track(process.pid, f"the suite ({label})")
            try:
                await asyncio.wait_for(process.wait(), SUITE_SECONDS)
            except TimeoutError:
                print(f"conformance: the suite ({label}) ran over {SUITE_SECONDS:g} s; stopped")
            finally:
                await _stop_async(process)
                processes.forget(process.pid)
    run = collect(outdir, label)
    if not run.outcomes:
        run.error = log_tail(Path(log.name), 15)
    return run


@dataclass
class EraResult:
    era: str
    runs: list[Run]


async def run_era(
    suite: Suite,
    era: str,
    targets: list[tuple[str, str]],
    scenarios: list[str],
    tmp: Path,
    processes: Processes,
) -> EraResult:
    runs = []
    for label, url in targets:
        print(f"conformance: {era}: running the suite {label} ({url})", flush=True)
        slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
        runs.append(
            await run_suite(suite, url, era, scenarios, tmp / f"{era}-{slug}", label, processes)
        )
    return EraResult(era, runs)


async def run_all(
    suite: Suite,
    eras: list[str],
    direct_url: str,
    tray: Tray,
    control: bool,
    scenarios: list[str],
    tmp: Path,
    processes: Processes,
) -> list[EraResult]:
    proxy = HeaderProxy(tray.url, tray.token)
    await proxy.start()
    control_proxy: HeaderProxy | None = None
    try:
        gateway = f"http://127.0.0.1:{proxy.listen_port}/mcp/"
        targets = [("direct", direct_url), ("via gateway", gateway)]
        if control:
            control_proxy = HeaderProxy(direct_url, "unused-by-the-direct-server")
            await control_proxy.start()
            targets.append(("direct+proxy", f"http://127.0.0.1:{control_proxy.listen_port}/mcp"))
        return [
            await run_era(
                suite,
                era,
                [(label, url + SERVER if url == gateway else url) for label, url in targets],
                scenarios,
                tmp,
                processes,
            )
            for era in eras
        ]
    finally:
        await proxy.close()
        if control_proxy is not None:
            await control_proxy.close()
