"""What the conformance run prints: the outcomes side by side, and where the tray
differs from the direct server.
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

from bench.suites.conformance.constants import PACKAGE, SERVER
from bench.suites.conformance.runs import EraResult, Outcome, Run
from bench.suites.conformance.suite import Suite


def _wrap(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _print_table(result: EraResult) -> None:
    runs = result.runs
    names: list[str] = []
    for run in runs:
        names.extend(name for name in run.outcomes if name not in names)
    print()
    print(f"era {result.era} (--suite all --spec-version {result.era})")
    if not names:
        errors = {run.error for run in runs}
        print("  the suite produced no results; its output ended:")
        for error in errors:
            print("    " + error.replace("\n", "\n    "))
        return
    width = max([len("total scenarios"), *(len(name) for name in names)])
    columns = [max(len(run.label), 15) for run in runs]

    def row(first: str, cells: list[str]) -> None:
        line = "  ".join(f"{cell:<{w}}" for cell, w in zip(cells, columns, strict=True))
        print(f"  {first:<{width}}  {line}".rstrip())

    row("scenario", [run.label for run in runs])
    rule = ["-" * w for w in columns]
    row("-" * width, rule)
    for name in names:
        row(
            name, [run.outcomes[name].cell() if name in run.outcomes else "not run" for run in runs]
        )
    row("-" * width, rule)
    scenarios: list[str] = []
    checks: list[str] = []
    for run in runs:
        outcomes = list(run.outcomes.values())
        scenarios.append(f"{sum(o.ok for o in outcomes)}/{len(names)} pass")
        passed = sum(o.passed for o in outcomes)
        checks.append(f"{passed}/{passed + sum(o.failed for o in outcomes)} pass")
    row("total scenarios", scenarios)
    row("total checks", checks)
    for run in runs:
        if run.error:
            print(f"\n  the suite produced no results {run.label}; its output ended:")
            print("    " + run.error.replace("\n", "\n    "))


def _print_differences(direct: Run, run: Run) -> int:
    """What ``run`` does worse than ``direct``; returns how many scenarios fail only there."""
    only_here = 0
    failing = [(name, outcome) for name, outcome in run.outcomes.items() if outcome.failures]
    if failing:
        print(f"\n  failed checks {run.label} (scenario: check id: the suite's message):")
        for name, outcome in failing:
            also = direct.outcomes.get(name)
            fails_direct = also is not None and bool(also.failures)
            only_here += not fails_direct
            print(f"    {name} ({'fails direct too' if fails_direct else 'passes direct'})")
            for ident, message in outcome.failures:
                print(f"      - {ident}: {_wrap(message)}")
    unexercised: list[tuple[str, Outcome, list[str]]] = []
    for name, outcome in run.outcomes.items():
        reference = direct.outcomes.get(name)
        if reference is None or outcome.failures:
            continue
        missing = [i for i in reference.succeeded if i not in outcome.succeeded]
        if missing:
            unexercised.append((name, outcome, missing))
    if unexercised:
        print(
            f"\n  checks that pass direct but did not run {run.label} (not failures: the "
            "suite found them not applicable; its notes say why):"
        )
        for name, outcome, missing in unexercised:
            print(f"    {name}: not run: {', '.join(missing)}")
            for ident, message in outcome.notes:
                print(f"      - {ident}: {_wrap(message, 300)}")
    warned: list[tuple[str, str, str]] = []
    for name, outcome in run.outcomes.items():
        reference = direct.outcomes.get(name)
        known = {i for i, _ in reference.warned} if reference is not None else set()
        warned.extend((name, i, m) for i, m in outcome.warned if i not in known)
    if warned:
        print(f"\n  warnings {run.label} that direct does not have:")
        for name, ident, message in warned:
            print(f"    {name}: {ident}: {_wrap(message, 300)}")
    return only_here


def report(results: list[EraResult], suite: Suite, reproduce: str, seconds: float) -> int:
    """Prints the tables and the failure reasons; returns the gateway-only failure count."""
    gateway_only = 0
    print()
    print(
        f"MCP conformance, server scenarios: {PACKAGE}@{suite.version}, "
        "test server tests/servers/conformance_server.py"
    )
    print(
        "  direct = the server over streamable HTTP; via gateway = the same server as the "
        "stdio child of a headless mcp-tray, one config entry with the default "
        f'"protocol": "auto", at /mcp/{SERVER} for both eras (bearer token added by a proxy)'
    )
    print(
        "  cells: pass/FAIL passed/scored checks (+Nw: warnings); skip: no scored check ran "
        "(the suite found the scenario not applicable)"
    )
    print(f"  run took {seconds:.1f} s")
    for result in results:
        _print_table(result)
        direct = result.runs[0]
        for run in result.runs[1:]:
            only_here = _print_differences(direct, run)
            if run.label == "via gateway":
                gateway_only += only_here
        failing_direct = [(n, o) for n, o in direct.outcomes.items() if o.failures]
        if failing_direct:
            print("\n  failed checks direct (the test server or its SDK, not the gateway):")
            for name, outcome in failing_direct:
                for ident, message in outcome.failures:
                    print(f"    {name}: {ident}: {_wrap(message)}")
    print()
    print(f"reproduce: {reproduce}")
    return gateway_only
