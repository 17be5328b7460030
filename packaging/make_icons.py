"""Make the bundles' icons from resources/icons/mcp-tray.svg: mcp-tray.ico and mcp-tray.icns.

Windows wants an .ico, macOS an .icns; both are containers of PNG images at
several sizes, written here by hand (a few headers) around PNGs that Qt's
SVG renderer draws, so no image tool beyond PySide6 is needed. Run it when
the SVG changes and commit what it writes:

    QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/make_icons.py
"""

import struct
import sys
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
ICONS: Final = ROOT / "resources" / "icons"
SOURCE: Final = ICONS / "mcp-tray.svg"
#: Sizes an .ico carries (Windows picks per DPI; 256 is stored as 0 in its directory).
ICO_SIZES: Final = (16, 24, 32, 48, 64, 128, 256)
#: .icns types holding PNG data, and their pixel sizes (Apple's icns format).
ICNS_TYPES: Final = (
    (b"icp4", 16),
    (b"icp5", 32),
    (b"icp6", 64),
    (b"ic07", 128),
    (b"ic08", 256),
    (b"ic09", 512),
    (b"ic10", 1024),
    (b"ic11", 32),
    (b"ic12", 64),
    (b"ic13", 256),
    (b"ic14", 512),
)


def render_png(size: int) -> bytes:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(SOURCE))
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, b"PNG")
    return bytes(data.data())


def ico(pngs: dict[int, bytes]) -> bytes:
    """ICONDIR, one ICONDIRENTRY per size, then the PNGs (Vista and later read PNG entries)."""
    sizes = sorted(pngs)
    header = struct.pack("<HHH", 0, 1, len(sizes))
    offset = len(header) + 16 * len(sizes)
    entries, blobs = b"", b""
    for size in sizes:
        png = pngs[size]
        side = 0 if size >= 256 else size
        entries += struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(png), offset)
        blobs += png
        offset += len(png)
    return header + entries + blobs


def icns(pngs: dict[int, bytes]) -> bytes:
    """'icns', the total length, then (type, length, PNG) for each type."""
    body = b"".join(
        kind + struct.pack(">I", 8 + len(pngs[size])) + pngs[size] for kind, size in ICNS_TYPES
    )
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main() -> int:
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    sizes = sorted({*ICO_SIZES, *(size for _, size in ICNS_TYPES)})
    pngs = {size: render_png(size) for size in sizes}
    (ICONS / "mcp-tray.ico").write_bytes(ico({s: pngs[s] for s in ICO_SIZES}))
    (ICONS / "mcp-tray.icns").write_bytes(icns(pngs))
    print(f"wrote {ICONS / 'mcp-tray.ico'} and {ICONS / 'mcp-tray.icns'} from {SOURCE}")
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main())
