#!/usr/bin/env python
"""Regenerate the README screenshots: SVG from the app (App.export_screenshot), PNG via rsvg-convert.

    python scripts/tui_screenshots.py [--samples ../shared/samples] [--out docs/screenshots]

Each shot opens a trace headless at 120×40, presses keys, and writes NAME.svg, NAME.png and NAME.txt
(the plain-text screen, handy for reviews and for the README's alt text).
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

SHOTS = [
    # name, sample path (relative to samples dir, or absolute), keys, what it shows
    ("v100-kineto-overview", "kineto/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
     [], "V100 Kineto trace: dense launches (API rows) feeding stream 7, whose pending queue sits at 1022"),
    ("v100-kineto-episode", "kineto/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
     ["g", "until_queue_mark", "plus", "plus", "plus", "plus"],
     "b jumped to the first saturated episode of stream 7; launches made at depth 1021 spike (!)"),
    ("h100-nsys-2gpu", "nsys/nsys-ai__h100_2gpu_1s.sqlite", ["tab"],
     "H100 Nsight export of two GPUs, one under the other; the table focused shows the reading of its top row"),
    ("synthetic-optimizer", str(ROOT / "fixtures" / "demo" / "demo.sqlite"), ["O", "a", "tab", "enter"],
     "synthetic demo: O (optimizer phase), a (all 8 steps), Enter highlights the unfused elementwise kernel"),
]


async def shoot(path: Path, keys: list[str], out: Path, title: str) -> str:
    from tui_helpers import make_app, screen_text, settle, wait_ready
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(app, pilot)
        for k in keys:
            if k == "until_queue_mark":
                for _ in range(60):
                    await pilot.press("b")
                    if app.main.current_mark is not None and app.main.current_mark.kind == "queue":
                        break
            else:
                await pilot.press(k)
            await settle(app, pilot)
        await settle(app, pilot)
        await pilot.pause(0.2)
        # xml:space="preserve": rsvg-convert otherwise drops leading non-breaking spaces of a text
        # run and shifts what follows (e.g. the closing bracket of a long NVTX range)
        svg = app.export_screenshot(title=title).replace("<svg ", '<svg xml:space="preserve" ', 1)
        out.with_suffix(".svg").write_text(svg, encoding="utf-8")
        text = screen_text(app)
        out.with_suffix(".txt").write_text(text, encoding="utf-8")
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--samples", default=str(ROOT.parent / "shared" / "samples"))
    p.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rsvg = shutil.which("rsvg-convert")
    for name, rel, keys, title in SHOTS:
        path = Path(rel) if Path(rel).is_absolute() else Path(a.samples) / rel
        if not path.exists():
            print(f"skip {name}: {path} not found")
            continue
        asyncio.run(shoot(path, keys, out / name, f"launchtui — {title}"))
        if rsvg:
            subprocess.run([rsvg, "-b", "#000000", "-o", str(out / f"{name}.png"), str(out / f"{name}.svg")],
                           check=True)
        print(f"wrote {out / name}.svg" + (" .png" if rsvg else " (no rsvg-convert: apt-get install librsvg2-bin)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
