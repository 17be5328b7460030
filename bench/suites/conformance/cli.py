"""The official MCP conformance suite's server scenarios: direct vs through the tray's gateway.

Runs ``@modelcontextprotocol/conformance`` (npm; it needs Node >= 22, so npm's
``node@22`` package comes with it) against one test server twice and prints
the two tallies side by side, per scenario:

* direct:      the server over streamable HTTP, on its own
               (``tests/servers/conformance_server.py --http``);
* via gateway: the same server as the stdio child of a private headless tray
               (``mcp-tray run --headless`` from a temporary MCP_TRAY_HOME,
               "fail" keyring backend, gateway on a free port), ONE config
               entry with the default ``"protocol": "auto"`` for both eras,
               reached at ``/mcp/conformance`` through a small reverse proxy in this
               script that adds ``Authorization: Bearer <token>`` (the suite
               cannot send headers) and forwards everything else byte for byte,
               SSE streams and ``Mcp-Session-Id`` included. A Host or Origin
               naming the proxy itself is rewritten to the gateway's; any
               other (the DNS-rebinding probes) is passed on unchanged.

The suite's scenarios call fixed names (``test_simple_text``,
``test://static-text``, ...) that its own example "everything" server
implements; that server is not in the npm package and speaks HTTP only, so
tests/servers/conformance_server.py is an equivalent written with the Python
SDK, servable over stdio and HTTP alike (its docstring says more).

Eras (``--era``): ``2025-11-25`` runs every scenario the suite marks
applicable at that revision over the stateful handshake (``--suite all
--spec-version 2025-11-25``); ``2026-07-28`` runs the stateless "modern"
revision's scenarios (``server/discover``, per-request ``_meta``,
InputRequiredResult, header validation, caching hints) at that wire; ``all``
(the default) runs both. The 2026-07-28 scenarios exist only in the suite's
0.2.0 pre-releases, hence the pinned default ``--suite-version``; with
``--suite-version 0.1.16`` (the latest stable release) only the handshake era
can run.

The suite and Node are installed on first use into the gitignored cache
folder .conformance/ (``npm install`` with its cache there too); nothing else
is written outside a temporary directory unless ``--keep-results`` copies the
suite's checks.json files to .conformance/results/. Every process started
(the tray, the servers, the suite) runs in its own process group and is
stopped on exit, failure, Ctrl+C or SIGTERM. Results are reported, not
asserted: the exit code is 0 unless the bench itself breaks (``--strict``
also fails when a scenario passes direct but not via the gateway).

Run: make conformance, or .venv/bin/python bench/conformance.py [--era 2025-11-25]
[--scenario NAME ...] [--control] [--keep-results] [--strict]
(``--control`` adds a column: direct through the same proxy, which shows the
proxy itself changes nothing.)
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

from bench.harness.errors import BenchError
from bench.harness.processes import sigterm_as_interrupt
from bench.suites.conformance.constants import CACHE, DEFAULT_SUITE_VERSION, ERAS, PACKAGE
from bench.suites.conformance.processes import Processes
from bench.suites.conformance.report import report
from bench.suites.conformance.runs import run_all
from bench.suites.conformance.servers import DirectServer, Tray
from bench.suites.conformance.suite import ensure_suite


def _reproduce(args: argparse.Namespace) -> str:
    parts = [".venv/bin/python bench/conformance.py"]
    if args.era != "all":
        parts.append(f"--era {args.era}")
    if args.suite_version != DEFAULT_SUITE_VERSION:
        parts.append(f"--suite-version {args.suite_version}")
    parts.extend(f"--scenario {name}" for name in args.scenario)
    if args.control:
        parts.append("--control")
    command = " ".join(parts)
    return "make conformance" if command == parts[0] else command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0] if __doc__ else None,
        epilog="See the module docstring (bench/conformance.py) for what runs where.",
    )
    parser.add_argument(
        "--era",
        choices=[*ERAS, "all"],
        default="all",
        help="protocol revision whose scenarios to run (default: all, i.e. both)",
    )
    parser.add_argument(
        "--modern",
        dest="era",
        action="store_const",
        const="2026-07-28",
        help="shorthand for --era 2026-07-28",
    )
    parser.add_argument(
        "--suite-version",
        default=DEFAULT_SUITE_VERSION,
        help=f"{PACKAGE} version (default {DEFAULT_SUITE_VERSION}; 0.1.16 has no 2026-07-28)",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this scenario (repeatable; names: `conformance list --server`)",
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="add a column: direct through the same header proxy (the proxy's own effect)",
    )
    parser.add_argument(
        "--keep-results",
        action="store_true",
        help="copy the suite's results (checks.json per scenario) to .conformance/results/",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a scenario passes direct but fails via the gateway",
    )
    args = parser.parse_args(argv)
    eras = list(ERAS) if args.era == "all" else [args.era]

    processes = Processes()
    started = time.perf_counter()
    with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="mcp-tray-conf-") as name:
        tmp = Path(name)
        direct = DirectServer(tmp, processes)
        tray = Tray(tmp / "home", processes)
        tray.home.mkdir()
        try:
            suite = ensure_suite(args.suite_version, processes, tmp)
            direct.start()
            tray.start()
            direct.wait_ready()
            tray.wait_ready()
            results = asyncio.run(
                run_all(suite, eras, direct.url, tray, args.control, args.scenario, tmp, processes)
            )
        except KeyboardInterrupt:
            print("\nconformance: interrupted; stopping everything it started", file=sys.stderr)
            return 130
        except BenchError as exc:
            print(f"conformance: FAILED: {exc}", file=sys.stderr)
            return 1
        finally:
            direct.stop()
            code = tray.stop()
            processes.stop_all()
        if args.keep_results:
            keep = CACHE / "results" / time.strftime("%Y%m%d-%H%M%S")
            shutil.copytree(tmp, keep, ignore=shutil.ignore_patterns("home", "*.port"))
            print(f"conformance: results kept in {keep}")
    gateway_only = report(results, suite, _reproduce(args), time.perf_counter() - started)
    if code not in (0, None):
        print(f"  note: the tray exited with {code} on SIGTERM (expected 0)")
    return 1 if args.strict and gateway_only else 0
