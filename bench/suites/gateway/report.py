"""What the gateway bench prints: its latency table, the split of the added time,
CPU per call, the routing of the aggregate endpoints, and its record.
"""

import argparse
import os
import platform
import shlex
import statistics
from importlib.metadata import version as package_version

from bench.harness.clients import PROTOCOL_VERSION
from bench.harness.records import record
from bench.harness.stats import Stats
from bench.harness.tray import AGGREGATE_TOOL, SERVER
from bench.suites.gateway.clients import Client
from bench.suites.gateway.constants import (
    AGGREGATE_CLIENTS,
    AGGREGATE_PATHS,
    CLIENTS,
    DEFAULT_BLOCK,
    DEFAULT_WARMUP,
    FLOOR_CLIENTS,
    FLOOR_LABELS,
    MODERN_CLIENTS,
    MODERN_MODE,
    MODERN_VERSION,
    PEER_CLIENTS,
    RAW_AGGREGATE_CLIENTS,
    ROWS,
    TARGET_ADDED_P50_MS,
    TARGET_ROUTING_P50_MS,
)
from bench.suites.gateway.peers import PeerSpec


def _row(name: str, count: int, s: Stats, base: Stats | None, label: str = "") -> str:
    added = f"   {s.p50 - base.p50:>+8.3f} {s.p95 - base.p95:>+8.3f}" if base is not None else ""
    return (
        f"  {name:<14} {count:>6} {s.p50:>8.3f} {s.p95:>8.3f} {s.p99:>8.3f} {s.mean:>8.3f}"
        f"{added}{'   ' + label if label else ''}"
    ).rstrip()


def _block_p50s(samples: list[float], block: int) -> list[float]:
    """The median of each interleaved block of one client, in round order."""
    return [statistics.median(samples[i : i + block]) for i in range(0, len(samples), block)]


def _modern_report(
    clients: dict[str, Client],
    stats: dict[str, Stats],
    header: str,
    block: int,
    enabled: bool,
) -> None:
    """The 2026-07-28 rows over modern-direct, and whether a 2026-07-28 request costs
    more through mcp-tray than a handshake-era one."""
    if not enabled:
        print("  2026-07-28 rows: off (--no-modern)")
        return
    base = stats["modern-direct"]
    print(
        f"  2026-07-28 rows: mcp.Client(mode={MODERN_MODE!r}, cache=None) (mcp SDK "
        f"{package_version('mcp')}): no initialize, a _meta envelope on every request; each "
        f"negotiated {MODERN_VERSION} at connect (checked), same paths, same blocks, same "
        "warm-up and call counts as the handshake-era rows above:"
    )
    print(header + "   (added over modern-direct)")
    for name in MODERN_CLIENTS:
        print(
            _row(
                name,
                len(clients[name].samples),
                stats[name],
                base if name != "modern-direct" else None,
            )
        )
    print(
        f"  modern-direct vs direct (no tray; the SDK client and echo.py, 2026-07-28 vs "
        f"handshake era): p50 {base.p50 - stats['direct'].p50:+.3f} ms, "
        f"p95 {base.p95 - stats['direct'].p95:+.3f} ms"
    )
    print(
        "  2026-07-28 vs handshake-era request through mcp-tray, added p50 (each era over its "
        "own direct row; rounds: the same comparison on the medians of each interleaved "
        "round's blocks):"
    )
    direct_blocks = _block_p50s(clients["direct"].samples, block)
    modern_direct_blocks = _block_p50s(clients["modern-direct"].samples, block)
    for name in ("gateway", "bridge"):
        modern_name = f"modern-{name}"
        handshake = stats[name].p50 - stats["direct"].p50
        modern = stats[modern_name].p50 - base.p50
        more = modern > handshake
        rounds = list(
            zip(
                _block_p50s(clients[name].samples, block),
                _block_p50s(clients[modern_name].samples, block),
                direct_blocks,
                modern_direct_blocks,
                strict=True,
            )
        )
        higher = sum(1 for h, m, hd, md in rounds if m - md > h - hd)
        print(
            f"    {'YES' if more else 'NO ':<3}  a 2026-07-28 request through the {name} "
            f"{'costs' if more else 'does not cost'} more than a handshake-era one: "
            f"{modern_name} {modern:+.3f} ms vs {name} {handshake:+.3f} ms "
            f"({modern - handshake:+.3f} ms; higher in {higher} of {len(rounds)} rounds)"
        )


def _peer_report(
    stats: dict[str, Stats], peers: list[PeerSpec], notes: list[str], enabled: bool
) -> None:
    """What each peer is and how it was launched, and mcp-tray's added p50 against theirs."""
    if not enabled:
        print("  peer rows: off (--no-peers)")
        return
    base = stats["direct"]
    measured = [spec for spec in peers if spec.name in stats]
    print(
        "  peer rows: other stdio -> HTTP gateways, each in front of its own echo.py (the same "
        "script on the same interpreter), called with the same client kind as the gateway row "
        f"(mcp SDK {package_version('mcp')} streamable_http_client over httpx2), in the same "
        "blocks, with the same warm-up and call counts:"
    )
    for spec in measured:
        print(f"    {spec.name}: {spec.describe}, {spec.transport}")
        print(f"      $ {shlex.join(spec.command)}")
    for note in notes:
        print(f"    note: {note}")
    if not measured:
        print("    (no peer row this run)")
        return
    added = {spec.name: stats[spec.name].p50 - base.p50 for spec in measured}
    theirs = ", ".join(f"{name} {value:+.3f}" for name, value in added.items())
    both = "both peers" if len(added) == 2 else "the one peer measured"
    print("  mcp-tray vs peers, added p50 over direct:")
    for name in ("gateway", "bridge"):
        ours = stats[name].p50 - base.p50
        below = all(ours < value for value in added.values())
        print(
            f"    {'YES' if below else 'NO ':<3}  mcp-tray {name} added p50 {ours:+.3f} ms is "
            f"{'' if below else 'not '}below {both} ({theirs} ms)"
        )


def report(
    clients: dict[str, Client],
    args: argparse.Namespace,
    seconds: float,
    peers: list[PeerSpec],
    notes: list[str],
    upstream: str | None,
) -> None:
    stats = {name: Stats.of(client.samples) for name, client in clients.items()}
    base = stats["direct"]
    floor = all(name in clients for name in FLOOR_CLIENTS)
    modern = all(name in clients for name in MODERN_CLIENTS)
    names = [
        name
        for name in (
            *CLIENTS,
            *AGGREGATE_CLIENTS,
            *MODERN_CLIENTS,
            *PEER_CLIENTS,
            *FLOOR_CLIENTS,
            *RAW_AGGREGATE_CLIENTS,
        )
        if name in clients
    ]
    transports = {spec.name: spec.transport for spec in peers}
    rotated = names[1:] + names[:1]
    print("mcp-tray gateway latency: tools/call of a trivial echo tool (tests/servers/echo.py)")
    print(
        f"  {args.calls} timed calls per client after {args.warmup} warm-up calls each; "
        f"interleaved in blocks of {args.block} calls per client, the first client rotating "
        f"every round ({', '.join(names)}, then {', '.join(rotated)}, ...)"
    )
    print(
        f"  python {platform.python_version()} ({platform.python_implementation()}), "
        f"{os.cpu_count()} CPU(s), {platform.system()} {platform.release()} {platform.machine()}"
    )
    print(f"  run took {seconds:.1f} s")
    child = (
        f"speaks {upstream} (the tray's probe of it at spawn, per /metrics)"
        if upstream
        else "speaks an unknown revision (no mcp_tray_server_protocol for echo in /metrics)"
    )
    print(
        f"  client eras: direct, gateway, bridge, the peers and the raw floor rows speak "
        f"{PROTOCOL_VERSION} (handshake era, initialize first)"
        + (f"; the modern-* rows speak {MODERN_VERSION} (stateless)" if modern else "")
        + f". The tray's echo.py child {child}, for clients of either era."
    )
    print()
    header = (
        f"  {'client':<14} {'calls':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'mean ms':>8}"
        f"   {'+p50 ms':>8} {'+p95 ms':>8}"
    )
    print(header + "   (added over direct)")
    labels = {name: f"peer: {transport}" for name, transport in transports.items()}
    labels |= {name: f"{path} ({AGGREGATE_TOOL})" for name, path in AGGREGATE_PATHS.items()}
    for name in (*CLIENTS, *AGGREGATE_CLIENTS, *PEER_CLIENTS):
        if name not in clients:
            continue
        print(
            _row(
                name,
                len(clients[name].samples),
                stats[name],
                base if name != "direct" else None,
                labels.get(name, ""),
            )
        )
    print()
    _modern_report(clients, stats, header, args.block, modern)
    print()
    _peer_report(stats, peers, notes, args.peers)
    if floor:
        raw = stats["raw-direct"]
        print()
        print(header + "   (added over raw-direct)")
        for name in (*FLOOR_CLIENTS, *RAW_AGGREGATE_CLIENTS):
            if name not in clients:
                continue
            print(
                _row(
                    name,
                    len(clients[name].samples),
                    stats[name],
                    raw if name != "raw-direct" else None,
                    FLOOR_LABELS.get(name, ""),
                )
            )
        hop = stats["raw-hop"].p50 - raw.p50
        tray_raw = stats["raw-gateway"].p50 - raw.p50
        gateway_added = stats["gateway"].p50 - base.p50
        bridge_added = stats["bridge"].p50 - base.p50
        print()
        print(
            "  floor rows: raw clients with no SDK (asyncio streams, json.dumps/json.loads "
            "only). raw-direct talks to its own echo.py over pipes; raw-hop puts one minimal "
            "Python relay process in between (loopback TCP, a line copied each way, no "
            "parsing, no HTTP), so its added time is what any extra process hop costs on this "
            "machine, before any gateway logic; raw-gateway sends the same calls through the "
            "tray's /mcp/echo with a hand-written HTTP/1.1 keep-alive client, so its added time "
            "is the tray's own cost without the SDK's streamable-HTTP client. The bridge puts "
            "two processes in the path (bridge, tray), so its floor is about two hops."
        )
        print(
            f"  split of the gateway's added p50 {gateway_added:+.3f} ms (p50 differences, "
            f"a rough split): one-hop floor {hop:+.3f}, tray above the floor "
            f"{tray_raw - hop:+.3f}, SDK HTTP client over SDK stdio client "
            f"{gateway_added - tray_raw:+.3f}"
        )
        print(
            f"  bridge added p50 {bridge_added:+.3f} ms vs a two-hop floor of about "
            f"{2 * hop:+.3f} ms"
        )
    print()
    print(
        "  CPU per call, ms (user+sys of each process in the chain, from the OS; the chain is "
        "serial, so on a busy small machine the mean wall time is close to the sum):"
    )
    for name in names:
        client = clients[name]
        count = len(client.samples)
        parts = "  ".join(
            f"{role} {seconds / count * 1000:.3f}" for role, seconds in client.cpu.items()
        )
        total = sum(client.cpu.values()) / count * 1000
        print(f"    {name:<14} {parts}  | sum {total:.3f} (mean wall {stats[name].mean:.3f})")
    print()
    print("  where the mean goes (tray /metrics: time inside ManagedServer.request per call):")
    for name in names:
        client = clients[name]
        if not client.through_tray:
            continue
        if client.tray_calls != len(client.samples) or not client.tray_calls:
            print(
                f"    {name:<14} n/a (the tray counted {client.tray_calls} calls, "
                f"the bench made {len(client.samples)})"
            )
            continue
        inside = client.tray_seconds / client.tray_calls * 1000.0
        outside = stats[name].mean - inside
        reference = {"raw": "raw-direct", "modern": "modern-direct"}.get(
            name.split("-")[0], "direct"
        )
        print(
            f"    {name:<14} call path {inside:.3f} ms ({reference} round trip "
            f"{stats[reference].mean:.3f} ms), everything else {outside:.3f} ms"
        )
    print()
    _routing_report(clients, stats, args.block)
    print()
    print(f"  target: added p50 < {TARGET_ADDED_P50_MS:g} ms over the era's direct row")
    targets = [("gateway", "direct"), ("bridge", "direct")]
    if modern:
        targets += [("modern-gateway", "modern-direct"), ("modern-bridge", "modern-direct")]
    for name, reference in targets:
        added_p50 = stats[name].p50 - stats[reference].p50
        verdict = "PASS" if added_p50 < TARGET_ADDED_P50_MS else "MISS"
        print(f"    {verdict}  {name} added p50 {added_p50:+.3f} ms (over {reference})")
    print()
    extra = "".join(
        f" --{flag} {value}"
        for flag, value, default in (
            ("warmup", args.warmup, DEFAULT_WARMUP),
            ("block", args.block, DEFAULT_BLOCK),
        )
        if value != default
    )
    if not args.floor:
        extra += " --no-floor"
    if not args.modern:
        extra += " --no-modern"
    if not args.peers:
        extra += " --no-peers"
    if not args.lists:
        extra += " --no-lists"
    command = f".venv/bin/python bench/gateway.py --calls {args.calls}{extra}"
    print(f"  reproduce: {command}")
    if floor:
        tray_raw = stats["raw-gateway"].p50 - stats["raw-direct"].p50
        figures = {
            "raw_gateway_added_p50_ms": tray_raw,
            "gateway_added_p50_ms": stats["gateway"].p50 - base.p50,
            "sdk_client_added_p50_ms": stats["gateway"].p50 - base.p50 - tray_raw,
            "bridge_added_p50_ms": stats["bridge"].p50 - base.p50,
        }
        record("gateway", command, figures, ROWS)


def _routing_report(clients: dict[str, Client], stats: dict[str, Stats], block: int) -> None:
    """What an aggregate endpoint's routing adds over the server's own endpoint, same client."""
    print(
        f"  routing of the aggregate endpoints (target: < {TARGET_ROUTING_P50_MS:g} ms p50 over "
        f"/mcp/{SERVER}, same client; one echo call named {AGGREGATE_TOOL}):"
    )
    pairs = [(name, "gateway") for name in AGGREGATE_CLIENTS]
    pairs += [(name, "raw-gateway") for name in RAW_AGGREGATE_CLIENTS]
    for name, reference in pairs:
        if name not in clients or reference not in clients:
            continue
        added = stats[name].p50 - stats[reference].p50
        verdict = "PASS" if added < TARGET_ROUTING_P50_MS else "MISS"
        rounds = _rounds_below(clients[name], clients[reference], block)
        print(
            f"    {verdict}  {name} p50 {added:+.3f} ms over {reference} "
            f"(p95 {stats[name].p95 - stats[reference].p95:+.3f} ms; {rounds})"
        )


def _rounds_below(client: Client, reference: Client, block: int) -> str:
    """In how many interleaved rounds the block's median was within the target of the
    reference's block of the same round."""
    rounds = list(
        zip(_block_p50s(client.samples, block), _block_p50s(reference.samples, block), strict=True)
    )
    within = sum(1 for mine, theirs in rounds if (mine - theirs) * 1000 < TARGET_ROUTING_P50_MS)
    return f"within it in {within} of {len(rounds)} rounds"
