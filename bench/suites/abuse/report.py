"""What the abuse bench prints, part by part."""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform == "linux", (
    "bench/abuse.py measures Linux (file limits through psutil.Process.rlimit)"
)

import math
from collections import Counter

from bench.harness.logs import shape
from bench.harness.stats import percentile
from bench.suites.abuse.common import header_row, row
from bench.suites.abuse.configs import ConfigFigures
from bench.suites.abuse.constants import (
    FLOOD_KINDS,
    PROBE_EVERY,
    READY_SECONDS,
    TARGET_PROBE_SECONDS,
)
from bench.suites.abuse.flood import FloodFigures
from bench.suites.abuse.metrics import MetricsFigures
from bench.suites.abuse.requests import RequestFigures
from core.serving.http.http_guard import READ_SECONDS
from core.serving.observe.metrics import KNOWN_METHODS, OTHER_METHOD


def report_configs(figures: ConfigFigures) -> tuple[int, int]:
    """Part 1; returns (tracebacks, hangs)."""
    cases = figures.cases
    generated = [c for c in cases if "special" not in c.tags]
    outcomes = Counter(c.outcome for c in cases)
    print(
        f"  1. configs: {len(generated)} generated documents + "
        f"{len(cases) - len(generated)} special files"
    )
    tags = Counter(tag for c in generated for tag in c.tags)
    print(
        "     hostile features among the generated: "
        + ", ".join(f"{t} {n}" for t, n in tags.most_common())
    )
    print(
        "     load_config in-process: "
        + ", ".join(
            f"{name} {outcomes[name]}" for name in ("loaded", "refused", "exception", "hang")
        )
        + f"; refusals not one printable line with a Fix: {sum(not c.one_line for c in cases)}"
    )
    print(header_row())
    print(
        row(
            "load_config (generated and special)", [c.seconds for c in cases if c.outcome != "hang"]
        )
    )
    for case in cases:
        if case.outcome in ("exception", "hang"):
            print(
                f"     !! {case.label} ({case.path}): {case.outcome}: {case.detail.strip()[-400:]}"
            )
    for case in [c for c in cases if not c.one_line][:5]:
        print(f"     !! {case.label}: refusal not one line: {case.detail[:200]!r}")
    print("     special files:")
    for case in cases:
        if "special" in case.tags:
            verdict = case.detail.split(": ", 1)[-1] if case.outcome == "refused" else case.outcome
            print(
                f"       {case.label:<26} {case.outcome:<8} {case.seconds * 1e3:7.2f} ms  {verdict[:110]}"
            )

    runs = figures.cli
    codes = Counter(
        "hang"
        if r.hung
        else f"up, then exit {r.stop_code} after SIGTERM"
        if r.up
        else f"exit {r.code}"
        for r in runs
    )
    print(
        f"     CLI `run --headless --config FILE`: {len(runs)} runs in {figures.cli_seconds:.1f} s "
        f"({sum(r.case.outcome == 'loaded' for r in runs)} valid, stopped by SIGTERM once up): "
        + ", ".join(f"{code} x{n}" for code, n in codes.most_common())
    )
    refused = [r for r in runs if r.case.outcome != "loaded"]
    valid = [r for r in runs if r.case.outcome == "loaded"]
    print(header_row())
    print(row("refused config: start -> exit", [r.seconds for r in refused if not r.hung]))
    print(row("valid config: start -> runtime file", [r.seconds for r in valid if r.up]))
    disagree = [
        r
        for r in runs
        if not r.hung and ((r.case.outcome == "loaded") != r.up or (not r.up and r.code != 2))
    ]
    print(
        f"     CLI vs load_config disagreements: {len(disagree)}; tracebacks on stderr: "
        f"{sum(r.traceback for r in runs)}; crash logs: {sum(r.crash_log for r in runs)}; "
        f"valid runs' exit after SIGTERM: "
        + ", ".join(f"{c} x{n}" for c, n in Counter(r.stop_code for r in valid if r.up).items())
    )
    for run in [r for r in runs if r.hung or r.traceback or r in disagree][:8]:
        print(
            f"     !! {run.case.label} ({run.case.path.name}): exit {run.code} hung {run.hung!r} "
            f"load_config {run.case.outcome}: {run.stderr.strip()[-400:]!r}"
        )
    lines = Counter(
        shape(r.stderr.strip().splitlines()[-1], paths=True) for r in refused if r.stderr.strip()
    )
    print(f"     refused runs' last stderr line, {len(lines)} shapes, e.g.:")
    for text, number in lines.most_common(3):
        print(f"       {number:>3} x {text[:150]}")

    edits = figures.edits
    seen = Counter(e.seen if e.seen in ("applied", "refused") else "not seen" for e in edits)
    print(
        f"     hot reload: {len(edits)} edits onto the running tray's config in "
        f"{figures.reload_seconds:.1f} s: applied {seen['applied']}, refused {seen['refused']}, "
        f"not seen as load_config says {seen['not seen']}; marker edits not seen {figures.marker_misses}"
    )
    print(header_row())
    print(
        row(
            "edit written -> reload shown in status",
            [e.seconds for e in edits if e.seen in ("applied", "refused")],
        )
    )
    trouble = [line for e in edits for line in e.trouble]
    print(
        f"     echo pid changed after an edit: {sum(not e.pid_kept for e in edits)} "
        f"(of them refused edits: {sum(not e.pid_kept and e.expected is not None for e in edits)}); "
        f"echo not ready after an edit: {sum(not e.ready for e in edits)}; "
        f"status failures: {sum(e.status_failures for e in edits)}; tracebacks in the tray's output: {len(trouble)}"
    )
    for edit in edits:
        if edit.seen not in ("applied", "refused") or not edit.pid_kept or edit.trouble:
            print(
                f"     !! {edit.label}: {edit.seen}; pid kept {edit.pid_kept}; {edit.trouble[:2]}"
            )
    specials = [e for e in edits if not e.label.startswith("generated")]
    for edit in specials:
        said = (edit.expected or "").split(": ", 1)[-1]
        print(f"       {edit.label:<34} {edit.seen:<8} {said[:100]}")
    tracebacks = (
        sum(c.outcome == "exception" for c in cases) + sum(r.traceback for r in runs) + len(trouble)
    )
    hangs = outcomes["hang"] + sum(bool(r.hung) for r in runs) + seen["not seen"]
    return tracebacks, hangs


def report_flood(figures: FloodFigures) -> tuple[list[float], int]:
    conns = figures.conns
    connected = [c for c in conns if c.connected]
    closed = [c for c in conns if c.closed_after is not None]
    during = [p for p in figures.probes if figures.start <= p.at <= figures.start + figures.hold]
    answered = [p.seconds for p in during if p.seconds is not None]
    failed = [p for p in during if p.seconds is None]
    print(
        f"  2. flood: {len(conns)} connections without the token in {figures.hold:g} s "
        f"(the first burst of {sum(c.opened < figures.start + figures.burst_seconds for c in conns)} "
        f"in {figures.burst_seconds:.1f} s, then each one closed replaced, at most "
        f"{figures.reopen_rate}/s; the bench's file limit {figures.bench_nofile}); "
        f"tray file limit {figures.tray_nofile}, so its cap is {figures.cap}; read deadline {READ_SECONDS:g} s"
    )
    print(
        f"     connected {len(connected)}, connect failures {len(conns) - len(connected)}"
        + (
            " ("
            + ", ".join(
                f"{n} x {h}"
                for h, n in Counter(c.how for c in conns if not c.connected).most_common(3)
            )
            + ")"
            if len(conns) > len(connected)
            else ""
        )
        + f"; closed by the server {len(closed)}, still open when the bench closed them "
        f"{sum(c.how == 'held to the end' for c in conns)}"
    )
    print(
        "     by kind (opened / closed by the server: reset, eof after a reply, eof; lifetime s min / p50 / max):"
    )
    for kind in dict.fromkeys(FLOOD_KINDS):
        mine = [c for c in conns if c.kind == kind]
        shut = [c for c in mine if c.closed_after is not None]
        lives = [c.closed_after for c in shut if c.closed_after is not None]
        replies = Counter(
            c.received.split(b"\r\n", 1)[0].decode("latin-1") for c in shut if c.received
        )
        print(
            f"       {kind:<13} {len(mine):>5} / {len(shut):>5}: reset {sum(c.how == 'reset' for c in shut)}, "
            f"eof+reply {sum(c.how == 'eof' and bool(c.received) for c in shut)}, "
            f"eof {sum(c.how == 'eof' and not c.received for c in shut)}; "
            + (
                f"{min(lives):.2f} / {percentile(lives, 0.5):.2f} / {max(lives):.2f}"
                if lives
                else "-"
            )
            + (
                "; replies: " + ", ".join(f"{r!r} x{n}" for r, n in replies.most_common(2))
                if replies
                else ""
            )
        )
    edges = (
        (0.1, "< 0.1 s"),
        (1.0, "0.1-1 s"),
        (READ_SECONDS - 1, f"1-{READ_SECONDS - 1:g} s"),
        (READ_SECONDS + 1, f"{READ_SECONDS - 1:g}-{READ_SECONDS + 1:g} s (read deadline)"),
        (math.inf, f">= {READ_SECONDS + 1:g} s"),
    )
    for label, chosen in (
        ("first burst", [c for c in closed if c.opened < figures.start + figures.burst_seconds]),
        ("after it", [c for c in closed if c.opened >= figures.start + figures.burst_seconds]),
    ):
        lives = [c.closed_after for c in chosen if c.closed_after is not None]
        buckets = Counter(next(name for edge, name in edges if life < edge) for life in lives)
        print(
            f"     lifetime of those the server closed, {label}: "
            + ", ".join(f"{name} {buckets[name]}" for _, name in edges if buckets[name])
            + (
                f" (min {min(lives):.2f}, p50 {percentile(lives, 0.5):.2f}, max {max(lives):.2f} s)"
                if lives
                else "none"
            )
        )
    shed_life = figures.cap / figures.reopen_rate
    if shed_life < READ_SECONDS:
        print(
            f"     (past the cap each new connection sheds the oldest untrusted one: at "
            f"{figures.reopen_rate}/s a connection lives ~cap/rate = {shed_life:.1f} s, before "
            f"the {READ_SECONDS:g} s read deadline; --reopen-rate below "
            f"{figures.cap / READ_SECONDS:.0f} lets the deadline close them instead)"
        )
    print(
        "     timeline (s from the flood's start: opened, closed by the server, tray fds max, status max ms):"
    )
    end = figures.start + figures.hold + 2.0
    step = 5.0
    start = figures.start
    while start < end:
        stop = start + step
        opened = sum(start <= c.opened < stop for c in conns)
        closing = sum(
            c.closed_after is not None and start <= c.opened + c.closed_after < stop for c in conns
        )
        fds = [n for at, n in figures.fds if start <= at < stop]
        probes = [
            p.seconds for p in figures.probes if start <= p.at < stop and p.seconds is not None
        ]
        print(
            f"       {start - figures.start:5.0f}-{stop - figures.start:<4.0f} opened {opened:>5}, closed {closing:>5}, "
            f"fds {max(fds) if fds else '-':>5}, status max "
            f"{(max(probes) * 1e3 if probes else float('nan')):7.1f}"
        )
        start = stop
    peak = max((n for _, n in figures.fds), default=0)
    print(
        f"     tray open files (num_fds): before {figures.fds_before}, peak {peak}, "
        f"2 s after the flood {figures.fds_after}"
    )
    print(header_row())
    print(row(f"status (new connection) during the flood, every {PROBE_EVERY:g} s", answered))
    before = [p.seconds for p in figures.probes if p.at < figures.start and p.seconds is not None]
    print(row("  the same before the flood", before))
    cli = [
        seconds
        for at, seconds, code in figures.cli_probes
        if figures.start <= at <= figures.start + figures.hold and code == 0
    ]
    print(row("mcp-tray status --json (CLI, incl. start) during", cli))
    over = sum(s > TARGET_PROBE_SECONDS for s in answered)
    print(
        f"     status probes during the flood: {len(during)}, over {TARGET_PROBE_SECONDS:g} s {over}, "
        f"unanswered {len(failed)}"
        + (
            " ("
            + ", ".join(f"{n} x {e}" for e, n in Counter(p.error for p in failed).most_common(3))
            + ")"
            if failed
            else ""
        )
        + f"; CLI status runs {len(figures.cli_probes)}, failed {sum(code != 0 for _, _, code in figures.cli_probes)}"
    )
    if figures.kill_at is None:
        print("     kill -9 of echo: not done")
    else:
        ready = (
            f"ready again (generation {figures.generation_before} -> higher, pid {figures.new_pid}) "
            f"{figures.ready_after * 1e3:.0f} ms after the kill"
            if figures.ready_after is not None
            else f"NOT ready again within {READY_SECONDS:g} s"
        )
        print(
            f"     kill -9 of echo pid(s) {figures.killed} at {figures.kill_at - figures.start:.1f} s into the "
            f"flood: {ready}; states seen: {' -> '.join(figures.states_seen)}"
        )
    return answered, len(failed)


def report_requests(figures: RequestFigures) -> tuple[int, int]:
    sent = figures.sent
    print(
        f"  3. fuzzed requests: {len(sent)} sent ({sum(s.kind != 'control' for s in sent)} gateway, "
        f"{sum(s.kind == 'control' for s in sent)} control API) in {figures.seconds:.1f} s = "
        f"{len(sent) / figures.seconds if figures.seconds else 0:.0f}/s; generated "
        f"{figures.generated} in {figures.generation_seconds:.1f} s (worker process)"
    )
    for kind in dict.fromkeys(s.kind for s in sent):
        statuses = Counter(s.status for s in sent if s.kind == kind and s.status is not None)
        print(
            f"     {kind:<26} {sum(s.kind == kind for s in sent):>5}, HTTP status x count: "
            + ", ".join(f"{code} x{n}" for code, n in sorted(statuses.items()))
        )
    problems = Counter(s.problem for s in sent if s.problem)
    print(
        "     no status / other: "
        + (", ".join(f"{n} x {p}" for p, n in problems.most_common(6)) or "none")
    )
    print(header_row())
    print(row("request (send -> whole answer)", [s.seconds for s in sent if not s.problem]))
    errors = sum(
        1
        for s in sent
        if s.problem and s.problem not in ("held open",) and not s.problem.startswith("refused by")
    )
    fives = sum(s.status == 500 for s in sent)
    print(
        f"     echo pid {figures.pid_before} -> {figures.pid_after} "
        f"({'unchanged' if figures.pid_before == figures.pid_after else 'CHANGED'}), generation "
        f"{figures.generation_before} -> {figures.generation_after}; client sessions open at the end "
        f"{figures.sessions_after}"
    )
    for line in figures.five_hundreds + figures.errors:
        print(f"     !! {line[:600]}")
    return fives, errors


def report_metrics(figures: MetricsFigures) -> bool:
    statuses = ", ".join(f"{k} x{n}" for k, n in figures.statuses.most_common())
    rate = figures.requests / figures.seconds if figures.seconds else 0
    print(
        f"  4. /metrics: {figures.requests} requests with invented methods in "
        f"{figures.seconds:.1f} s ({rate:.0f}/s): {statuses}"
    )
    sizes = [size for _, size in figures.scrapes]
    print(
        f"     /metrics before them {figures.before_bytes} bytes; after: "
        f"{max(sizes) if sizes else 0} bytes, {figures.lines} lines; method labels "
        f"{len(figures.method_labels)} ({', '.join(sorted(figures.method_labels))}); "
        f"session labels {figures.session_labels}; 'invented' named {figures.invented_named} time(s)"
    )
    print(header_row())
    print(
        row(
            f"scrape of /metrics, {len(figures.scrapes)} back to back",
            [s for s, _ in figures.scrapes],
        )
    )
    print(row("echo tool call, no scrapes", figures.baseline_calls))
    print(row("echo tool call sent with each scrape", figures.calls_during))
    if figures.call_failures:
        print(f"     !! tool calls that failed: {figures.call_failures}")
    allowed = KNOWN_METHODS | {OTHER_METHOD}
    return figures.invented_named == 0 and figures.method_labels <= allowed
