"""Render the installer icons from the app icon: ``python packaging/make_icons.py``.

The source is the GUI's window icon, ``ragdesk/resources/icons/ragdesk.svg``, so the launcher, the
taskbar and the window show the same picture. Writes ``linux/ragdesk.svg`` (a copy),
``linux/ragdesk.png`` (256 px), ``windows/ragdesk.ico`` and ``macos/ragdesk.icns``. The
outputs are committed; run this again when the SVG changes.

ICO and ICNS are written here (both are a small index of PNG images), because Qt's writers
store a single size per file.
"""

from __future__ import annotations

import os
import shutil
import struct
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1]
PACKAGING = SRC / "packaging"
SVG = SRC / "ragdesk" / "resources" / "icons" / "ragdesk.svg"

ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# ICNS element types holding PNG data, by pixel size (retina types reuse the larger images).
ICNS_TYPES = ((b"icp4", 16), (b"icp5", 32), (b"icp6", 64), (b"ic07", 128), (b"ic08", 256),
              (b"ic09", 512), (b"ic10", 1024), (b"ic11", 32), (b"ic12", 64), (b"ic13", 256),
              (b"ic14", 512))


def ico_bytes(pngs: dict[int, bytes]) -> bytes:
    header = struct.pack("<HHH", 0, 1, len(pngs))
    entries, blobs = b"", b""
    offset = len(header) + 16 * len(pngs)
    for px, data in sorted(pngs.items()):
        side = 0 if px >= 256 else px  # 0 means 256 in an ICONDIRENTRY
        entries += struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(data), offset)
        blobs += data
        offset += len(data)
    return header + entries + blobs


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    body = b"".join(kind + struct.pack(">I", 8 + len(pngs[px])) + pngs[px]
                    for kind, px in ICNS_TYPES)
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    _app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        raise SystemExit(f"{SVG} is not a valid SVG")

    def png(px: int) -> bytes:
        image = QImage(px, px, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter, QRectF(0, 0, px, px))
        painter.end()
        data = QByteArray()
        buf = QBuffer(data)
        buf.open(QIODevice.OpenModeFlag.WriteOnly)
        if not image.save(buf, "PNG"):
            raise SystemExit(f"could not encode a {px}px PNG")
        buf.close()
        return bytes(data.data())

    pngs = {px: png(px) for px in {*ICO_SIZES, *(px for _, px in ICNS_TYPES)}}
    outputs = {
        PACKAGING / "linux" / "ragdesk.png": pngs[256],
        PACKAGING / "windows" / "ragdesk.ico": ico_bytes({px: pngs[px] for px in ICO_SIZES}),
        PACKAGING / "macos" / "ragdesk.icns": icns_bytes(pngs),
    }
    shutil.copyfile(SVG, PACKAGING / "linux" / "ragdesk.svg")
    for path, data in outputs.items():
        path.write_bytes(data)
        print(f"wrote {path.relative_to(SRC)} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
