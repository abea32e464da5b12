#!/usr/bin/env python3
"""The HTML report in a real browser (docs/report.md): headless Chromium loads each page, and the
test checks that the page's script ran without an error and drew what the text report says.

  report_browser_test.py SSMCHECK SSMCHECK_MUTANTS FIXTURES OUTDIR

- every deliberately faulty trace (FIXTURES/traces/faulty/*.h5, at least one): `ssmcheck replay
  --html`; the first-divergence cell of the map (its op, layer and field, read from the DOM) is
  where the text report's "FIRST DIVERGENCE at ..." line puts it, and the screenshot shows it
  there: the cell's centre pixel is the failure colour and the marker around it is black;
- a campaign against a mutant (`ssmcheck-mutants fuzz`): the shrunk case's map marks the op,
  layer and field of the lockstep's first failing tensor; `ssmcheck diff --html` of its two dumps
  marks the first failing tensor of the mismatch reports;
- a passing campaign, a short gate and `ssmcheck report --bench` on the bundled benchmark
  measurements render every section without a script error.

Chromium: $SSMCHECK_CHROMIUM, else chromium-headless-shell or chromium on PATH. Without one the
test is skipped (exit 77) unless SSMCHECK_REQUIRE_BROWSER=1 (scripts/test sets it) makes that a
failure.
"""
import glob
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

FAIL_RGB = (214, 54, 56)  # report/page.js FAIL_RGB


def browser():
    for b in (os.environ.get("SSMCHECK_CHROMIUM"), "chromium-headless-shell", "chromium"):
        if b and shutil.which(b):
            return shutil.which(b)
    return None


def chromium(exe, page, *args):
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,1100",
           *args, "file://" + os.path.abspath(page)]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return r.stdout


def root_attrs(dom):
    """The attributes of <html> in the DOM Chromium dumps after the page's script ran."""
    m = re.search(r"<html([^>]*)>", dom)
    assert m, "no <html> element in the dumped DOM"
    return dict(re.findall(r'([a-z-]+)="([^"]*)"', m.group(1)))


def read_png(path):
    """RGB(A) 8-bit non-interlaced PNG (what Chromium writes) -> (width, height, rows of pixel tuples)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, f"{path}: unsupported PNG ({depth}, {colour})"
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, [[tuple(r[x * bpp:x * bpp + 3]) for x in range(width)] for r in rows]


def check_page(exe, page, expect_sections):
    attrs = root_attrs(chromium(exe, page, "--dump-dom"))
    assert attrs.get("data-rendered") == "ok", f"{page}: the page's script did not finish: {attrs}"
    assert "data-script-errors" not in attrs, f"{page}: script errors: {attrs['data-script-errors']}"
    assert expect_sections is None or int(attrs.get("data-sections", 0)) == expect_sections, \
        f"{page}: {attrs.get('data-sections')} sections drawn, expected {expect_sections}"
    return attrs


def check_first_divergence(exe, page, shot, op, layer, field):
    attrs = check_page(exe, page, None)
    assert "data-first-op" in attrs, f"{page}: no first-divergence cell was drawn"
    got = (int(attrs["data-first-op"]), int(attrs["data-first-layer"]), attrs["data-first-field"])
    assert got == (op, layer, field), f"{page}: first divergence drawn at {got}, the text report says {(op, layer, field)}"
    chromium(exe, page, "--screenshot=" + shot)
    w, h, px = read_png(shot)
    assert attrs.get("data-scroll") == "0,0", f"{page}: the page scrolled ({attrs.get('data-scroll')})"
    x, y, bw, bh = (float(v) for v in attrs["data-first-box"].split(","))
    cx, cy = int(x + bw / 2), int(y + bh / 2)
    assert 0 <= cx < w and 0 <= cy < h, f"{page}: the first divergence ({cx}, {cy}) is outside the {w}x{h} view"
    centre = px[cy][cx]
    assert all(abs(a - b) <= 12 for a, b in zip(centre, FAIL_RGB)), \
        f"{page}: the first-divergence cell at ({cx}, {cy}) is {centre} in the screenshot, not the failure colour"
    edge = px[cy][int(x) - 1]
    assert max(edge) <= 60, f"{page}: no black marker left of the first divergence: pixel {edge} at ({int(x) - 1}, {cy})"
    return got


HEADLINE = re.compile(r"FIRST DIVERGENCE at op (\d+) '[^']*'(?:, seq \d+(?: \(slot \d+\))?)?(?:, layer (\d+))?"
                      r"(?:, ([a-z_0-9]+)(?:\[\d+\])?)?(?: \((\w+)\))?$", re.M)


def first_from_text(text):
    m = HEADLINE.search(text)
    assert m, "no FIRST DIVERGENCE line in the text report:\n" + text[-3000:]
    op, layer, tensor, what = m.groups()
    return int(op), int(layer) if layer else -1, tensor or what


def run(cmd, expect_rc, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, **kw)
    assert r.returncode == expect_rc, f"{' '.join(cmd)}: exit {r.returncode}, expected {expect_rc}\n{r.stdout[-3000:]}"
    return r.stdout


def main():
    ssmcheck, mutants, fixtures, out = sys.argv[1:5]
    exe = browser()
    if not exe:
        msg = "no headless Chromium (chromium-headless-shell or chromium; scripts/deps.sh installs it)"
        if os.environ.get("SSMCHECK_REQUIRE_BROWSER") == "1":
            print("FAILED: " + msg)
            return 1
        print("SKIPPED: " + msg)
        return 77
    os.makedirs(out, exist_ok=True)
    checked = 0
    faulty = sorted(glob.glob(os.path.join(fixtures, "traces", "faulty", "*.h5")))
    assert faulty, f"no faulty traces under {fixtures}/traces/faulty"
    for trace in faulty:
        name = os.path.splitext(os.path.basename(trace))[0]
        page = os.path.join(out, name + ".html")
        text = run([ssmcheck, "replay", trace, "--html", page], 1)
        want = first_from_text(text)
        got = check_first_divergence(exe, page, os.path.join(out, name + ".png"), *want)
        print(f"replay {name}: first divergence drawn at op {got[0]}, layer {got[1]}, {got[2]}, as the text says")
        checked += 1

    # a campaign against a mutant: the shrunk case's map
    page = os.path.join(out, "campaign-mutant.html")
    text = run([mutants, "fuzz", "--backend", "reference", "--cases", "200", "--seed", "3", "--out",
                os.path.join(out, "campaign-mutant"), "--html", page], 1,
               env=dict(os.environ, SSMCHECK_MUTANT="alt_commit_off_by_one"))
    m = re.search(r"FAIL op (\d+) '[^']*', seq \d+ \(slot \d+\), layer (\d+), ([a-z_]+)", text)
    assert m, "the campaign's report names no failing tensor:\n" + text[-3000:]
    got = check_first_divergence(exe, page, os.path.join(out, "campaign-mutant.png"), int(m[1]), int(m[2]), m[3])
    print(f"campaign against alt_commit_off_by_one: first divergence drawn at {got}, as the text says")
    checked += 1

    # the shrunk case's two dumps, diffed: one column per sequence (the case has one, seq 0)
    prefix = os.path.join(out, "campaign-mutant", "case-seed3-case20")  # seed and failing case (fuzz --out)
    page = os.path.join(out, "diff.html")
    text = run([ssmcheck, "diff", prefix + ".model.h5", prefix + ".sut.h5", "--html", page], 1)
    m = re.search(r"^FAIL op \d+ '[^']*', seq 0 \(slot \d+\), layer (\d+), ([a-z_]+)", text, re.M)
    assert m, "the diff reports no failing tensor of seq 0:\n" + text[-3000:]
    got = check_first_divergence(exe, page, os.path.join(out, "diff.png"), 0, int(m[1]), m[2])
    print(f"diff of the shrunk case's dumps: first divergence drawn at {got}, as the text says")
    checked += 1

    page = os.path.join(out, "campaign.html")
    run([ssmcheck, "fuzz", "--cases", "20", "--seed", "5", "--out", os.path.join(out, "campaign"), "--html", page], 0)
    check_page(exe, page, 2)  # coverage, text
    page = os.path.join(out, "gate.html")
    run([ssmcheck, "gate", "--backend", "reference", "--cases", "20", "--no-coverage", "--traces",
         os.path.join(fixtures, "traces"), "--html", page], 0)
    check_page(exe, page, 2)  # checks, summary
    page = os.path.join(out, "bench.html")
    bench = sorted(glob.glob(os.path.join(fixtures, "bench", "*.json")))
    assert bench, f"no benchmark measurements under {fixtures}/bench"
    run([ssmcheck, "report"] + [a for b in bench for a in ("--bench", b)] + ["--html", page], 0)
    check_page(exe, page, len(bench))
    checked += 3
    print(f"{checked} pages rendered in {os.path.basename(exe)} without a script error")
    return 0


if __name__ == "__main__":
    sys.exit(main())
