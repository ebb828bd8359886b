"""Draws Foresay's icon: assets/icons/foresay.svg, PNGs at the freedesktop sizes, foresay.ico
(Windows) and foresay.icns (macOS). The outputs are committed; rerun after changing the drawing.

    QT_QPA_PLATFORM=offscreen python packaging/make_icons.py
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

ICONS = Path(__file__).resolve().parents[1] / "assets" / "icons"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# icns element types holding PNG data, by pixel size
ICNS_TYPES = {16: b"icp4", 32: b"icp5", 64: b"icp6", 128: b"ic07", 256: b"ic08", 512: b"ic09"}


def svg() -> str:
    """A speech bubble on a rounded square, with a sound wave that runs ahead of the bubble."""
    bars = [(92, 36), (112, 64), (132, 88), (152, 56), (172, 28)]  # x, height (centred on y=116)
    wave = "".join(f'<rect x="{x - 7}" y="{116 - h / 2:g}" width="14" height="{h}" rx="7" fill="url(#bg)"/>'
                   for x, h in bars)
    return ('<svg xmlns="http://www.w3.org/2000/svg" width="256" height="256" viewBox="0 0 256 256">'
            '<defs><linearGradient id="bg" x1="0" y1="0" x2="1" y2="1">'
            '<stop offset="0" stop-color="#2f80ed"/><stop offset="1" stop-color="#7b3fe4"/>'
            '</linearGradient></defs>'
            '<rect x="8" y="8" width="240" height="240" rx="56" fill="url(#bg)"/>'
            '<path d="M60 64 h136 a24 24 0 0 1 24 24 v56 a24 24 0 0 1 -24 24 h-72 l-40 32 v-32 h-24 '
            'a24 24 0 0 1 -24 -24 v-56 a24 24 0 0 1 24 -24 z" fill="#ffffff"/>'
            f'{wave}</svg>\n')


def render_pngs(svg_text: str) -> dict[int, bytes]:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # noqa: F841 (kept alive)
    renderer = QSvgRenderer(QByteArray(svg_text.encode()))
    if not renderer.isValid():
        raise SystemExit("make_icons: the SVG does not parse")
    out = {}
    for size in PNG_SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
        painter.end()
        buffer = QBuffer()
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        image.save(buffer, "PNG")
        out[size] = bytes(buffer.data())
    return out


def ico(pngs: dict[int, bytes]) -> bytes:
    """An ICO file whose images are PNGs (supported since Windows Vista)."""
    sizes = [s for s in ICO_SIZES if s in pngs]
    header = struct.pack("<HHH", 0, 1, len(sizes))
    offset = 6 + 16 * len(sizes)
    entries, data = b"", b""
    for s in sizes:
        png = pngs[s]
        entries += struct.pack("<BBBBHHII", s % 256, s % 256, 0, 0, 1, 32, len(png), offset + len(data))
        data += png
    return header + entries + data


def icns(pngs: dict[int, bytes]) -> bytes:
    elements = b"".join(kind + struct.pack(">I", 8 + len(pngs[s])) + pngs[s]
                        for s, kind in ICNS_TYPES.items() if s in pngs)
    return b"icns" + struct.pack(">I", 8 + len(elements)) + elements


def main() -> int:
    ICONS.mkdir(parents=True, exist_ok=True)
    text = svg()
    (ICONS / "foresay.svg").write_text(text, "utf-8")
    pngs = render_pngs(text)
    for size, data in pngs.items():
        (ICONS / f"foresay-{size}.png").write_bytes(data)
    (ICONS / "foresay.ico").write_bytes(ico(pngs))
    (ICONS / "foresay.icns").write_bytes(icns(pngs))
    print(f"make_icons: wrote {len(pngs)} PNGs, foresay.svg, foresay.ico, foresay.icns to {ICONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
