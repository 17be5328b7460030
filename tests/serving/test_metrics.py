"""/metrics stays bounded whatever clients send.

Strategy: the real Metrics object fed the way the call path feeds it, with
thousands of invented method names and per-session children; the rendered
text is measured and its label values listed.
"""

import re

from core.base.snapshot import TraySnapshot
from core.serving.observe.metrics import KNOWN_METHODS, Metrics, SnapshotCollector


def metrics() -> Metrics:
    empty = TraySnapshot(version="0", config_path="", servers=())
    return Metrics(SnapshotCollector(lambda: empty, dict, list, list))


def label_values(text: str, label: str) -> set[str]:
    return set(re.findall(rf'{label}="([^"]*)"', text))


def test_invented_method_names_count_as_other_and_keep_metrics_small() -> None:
    m = metrics()
    m.observe("echo", "tools/call", 0.01, True)
    baseline = len(m.render())
    for n in range(20_000):
        m.observe("echo", f"x/invented-{n}", 0.01, False)

    text = m.render().decode()

    assert label_values(text, "method") == {"tools/call", "other"}
    assert 'mcp_tray_call_seconds_count{method="other",server="echo"} 20000.0' in text
    # One more series of buckets, not 20,000.
    assert len(text) < 2 * baseline + 2_000


def test_per_session_children_share_their_servers_label() -> None:
    m = metrics()
    for session in range(500):
        m.observe(f"echo@{session:08x}", "tools/call", 0.01, True)

    text = m.render().decode()

    assert label_values(text, "server") == {"echo"}
    assert 'mcp_tray_call_seconds_count{method="tools/call",server="echo"} 500.0' in text


def test_every_known_method_keeps_its_own_label() -> None:
    m = metrics()
    for method in KNOWN_METHODS:
        m.observe("echo", method, 0.01, True)

    assert label_values(m.render().decode(), "method") == set(KNOWN_METHODS)
