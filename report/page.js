// The HTML report's drawing (docs/report.md): reads the JSON in #ssmcheck-data and draws each
// section with inline SVG or plain HTML. No network, no library. When done it sets
// data-rendered="ok" on <html>; any script error is listed in data-script-errors (the browser
// test in tests/report_browser_test.py reads both) and shown at the top of the page.
"use strict";
(function () {
  const root = document.documentElement;
  const errors = [];
  function noteError(msg) {
    errors.push(String(msg));
    root.dataset.scriptErrors = errors.join(" | ");
    const banner = document.getElementById("script-errors") || document.body.insertBefore(el("pre", { id: "script-errors" }), document.body.firstChild);
    banner.textContent = "report script error: " + errors.join("\n");
  }
  window.addEventListener("error", function (e) { noteError(e.message + " at " + e.lineno + ":" + e.colno); });

  const SVG = "http://www.w3.org/2000/svg";
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function tip(node, text) { node.appendChild(svg("title", {}, text)); return node; }
  function ratioOf(v) { return v === "inf" ? Infinity : v; }
  function fmtRatio(r) {
    if (r === null || r === undefined) return "not compared";
    if (r === Infinity) return "beyond any tolerance";
    if (r === 0) return "0 (no error)";
    return r.toPrecision(3) + " of the tolerance";
  }
  function short(s, n) { return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; }
  const PALETTE = ["#2271b1", "#d63638", "#00a32a", "#dba617", "#8c5fbf", "#e66f00", "#135e96", "#3c434a",
                   "#9ec2e6", "#b32d2e", "#68de7c", "#996800"];

  // error over tolerance -> colour: no error light green; up to the limit green to amber on a
  // log scale (1e-6 .. 1); over the limit red
  const FAIL_RGB = [214, 54, 56];
  function cellColour(r, pass) {
    if (!pass || r === Infinity || r > 1) return "rgb(" + FAIL_RGB.join(",") + ")";
    if (r === 0) return "rgb(215,236,217)";
    const t = Math.min(1, Math.max(0, (Math.log10(r) + 6) / 6));
    const a = [46, 160, 67], b = [242, 201, 76];
    return "rgb(" + a.map(function (x, i) { return Math.round(x + (b[i] - x) * t); }).join(",") + ")";
  }

  function legend(items) {
    const d = el("div", { class: "legend" });
    items.forEach(function (it) {
      const s = el("span");
      s.appendChild(el("span", { class: "swatch", style: "background:" + it[0] + (it[2] ? ";border:2px solid #000" : "") }));
      s.appendChild(document.createTextNode(it[1]));
      d.appendChild(s);
    });
    return d;
  }

  function drawDivergenceMap(sec, box) {
    const cw = 16, ch = 16, left = 190, top = 120;
    const cols = sec.columns, rows = sec.rows;
    const W = left + cols.length * cw + 10, H = top + rows.length * ch + 10;
    box.appendChild(el("p", { class: "note" },
      "Columns: " + sec.column_axis + "s; rows: layer and field (intermediates folded into one row). " +
      "Colour: error over tolerance, the worst tensor of the cell. Click a cell for its report."));
    box.appendChild(legend([["rgb(215,236,217)", "no error"], [cellColour(1e-6, true), "1e-6 of the tolerance"],
                            [cellColour(1e-3, true), "1e-3"], [cellColour(1, true), "at the tolerance"],
                            [cellColour(Infinity, false), "failed"], ["#fff", "first divergence", true]]));
    if (sec.note) box.appendChild(el("p", { class: "note" }, sec.note));
    const scroll = el("div", { class: "scroll" });
    const s = svg("svg", { width: W, height: H, class: "divergence-map" });
    cols.forEach(function (c, i) {
      const x = left + i * cw + cw / 2;
      tip(s.appendChild(svg("text", { x: x, y: top - 6, transform: "rotate(-65 " + x + " " + (top - 6) + ")" },
                            short(c, 18))), c);
    });
    rows.forEach(function (r, j) {
      s.appendChild(svg("text", { x: left - 6, y: top + j * ch + ch - 4, "text-anchor": "end" }, short(r.label, 26)));
    });
    const pre = el("pre", { class: "details" }, sec.first ? sec.first.text : "Everything agreed: click a cell.");
    let selected = null, firstRect = null;
    sec.cells.forEach(function (c) {
      const col = c[0], row = c[1], r = ratioOf(c[2]), pass = c[3], detail = sec.details[c[4]];
      const rect = svg("rect", { x: left + col * cw, y: top + row * ch, width: cw, height: ch, class: "cell",
                                 fill: cellColour(r, pass), "data-op": col, "data-layer": rows[row].layer,
                                 "data-field": rows[row].field, "data-ratio": String(r), "data-pass": String(pass) });
      tip(rect, cols[col] + ", " + rows[row].label + ": " + fmtRatio(r));
      rect.addEventListener("click", function () {
        if (selected) selected.classList.remove("selected");
        selected = rect;
        rect.classList.add("selected");
        pre.textContent = cols[col] + ", " + rows[row].label + "\n" + detail;
      });
      s.appendChild(rect);
      if (sec.first && col === sec.first.column && row === sec.first.row) {
        rect.classList.add("first");
        firstRect = rect;
        pre.textContent = "FIRST DIVERGENCE at " + sec.first.text + "\n" + detail;
      }
    });
    if (firstRect) {
      const x = +firstRect.getAttribute("x"), y = +firstRect.getAttribute("y");
      s.appendChild(svg("rect", { x: x - 1, y: y - 1, width: cw + 2, height: ch + 2, class: "first-marker" }));
    }
    scroll.appendChild(s);
    box.appendChild(scroll);
    box.appendChild(pre);
    return firstRect;
  }

  // a log-scale line chart of error over tolerance per field, against the tolerance (ratio 1)
  function drawErrorGrowth(sec, box) {
    const n = sec.columns.length, left = 60, top = 14, h = 220, step = Math.max(8, Math.min(40, 900 / Math.max(1, n)));
    const W = Math.max(480, left + Math.max(1, n - 1) * step + 40), H = top + h + 60;
    let hi = 1;
    sec.series.forEach(function (s) { s.ratios.forEach(function (v) { const r = ratioOf(v); if (r !== null && isFinite(r) && r > hi) hi = r; }); });
    const lo = -7, top10 = Math.min(6, Math.ceil(Math.log10(hi)) + 1);
    const y = function (r) {
      const l = r === Infinity ? top10 : r <= 0 ? lo : Math.max(lo, Math.min(top10, Math.log10(r)));
      return top + h - (l - lo) / (top10 - lo) * h;
    };
    const x = function (i) { return left + i * step; };
    box.appendChild(el("p", { class: "note" },
      "Worst error over tolerance per field at each " + sec.column_axis + " (log scale; 1 = the tolerance, dashed). " +
      "Points on the floor had no error; on the ceiling, beyond any tolerance."));
    const scroll = el("div", { class: "scroll" });
    const s = svg("svg", { width: W, height: H, class: "error-growth" });
    for (let e = lo; e <= top10; ++e) {
      s.appendChild(svg("line", { x1: left, x2: W - 20, y1: y(Math.pow(10, e)), y2: y(Math.pow(10, e)), class: "grid" }));
      s.appendChild(svg("text", { x: left - 6, y: y(Math.pow(10, e)) + 4, "text-anchor": "end" }, "1e" + e));
    }
    s.appendChild(svg("line", { x1: left, x2: W - 20, y1: y(1), y2: y(1), class: "limit" }));
    s.appendChild(svg("text", { x: W - 22, y: y(1) - 4, "text-anchor": "end" }, "tolerance"));
    s.appendChild(svg("line", { x1: left, x2: left, y1: top, y2: top + h, class: "axis" }));
    for (let i = 0; i < n; i += Math.max(1, Math.ceil(n / 30)))
      s.appendChild(svg("text", { x: x(i), y: top + h + 14, "text-anchor": "middle" }, String(i)));
    s.appendChild(svg("text", { x: left + (W - left) / 2, y: top + h + 32, "text-anchor": "middle" }, sec.column_axis));
    const items = [];
    sec.series.forEach(function (ser, k) {
      const colour = PALETTE[k % PALETTE.length];
      items.push([colour, ser.field]);
      let d = "";
      ser.ratios.forEach(function (v, i) {
        const r = ratioOf(v);
        if (r === null) return;
        d += (d ? " L" : "M") + x(i) + " " + y(r);
        tip(s.appendChild(svg("circle", { cx: x(i), cy: y(r), r: 2.5, fill: colour })),
            ser.field + " at " + sec.columns[i] + ": " + fmtRatio(r));
      });
      if (d) s.appendChild(svg("path", { d: d, fill: "none", stroke: colour, "stroke-width": 1.5 }));
    });
    scroll.appendChild(s);
    box.appendChild(scroll);
    box.appendChild(legend(items));
  }

  function drawChecks(sec, box) {
    const counts = { pass: 0, fail: 0, skip: 0 };
    sec.rows.forEach(function (r) { counts[r.status] = (counts[r.status] || 0) + 1; });
    box.appendChild(el("p", { class: "note" }, (sec.pass ? "PASS" : "FAIL") + ": " + counts.pass + " passed, " +
                                               counts.fail + " failed, " + counts.skip + " skipped in " +
                                               sec.seconds.toFixed(1) + " s. Click a row for its report."));
    const t = el("table", { class: "checks" });
    const head = t.appendChild(el("tr"));
    ["status", "suite", "name", "seconds", "message"].forEach(function (h) { head.appendChild(el("th", {}, h)); });
    const pre = el("pre", { class: "details" }, "");
    sec.rows.forEach(function (r) {
      const tr = el("tr", { class: "row " + r.status });
      const st = el("td");
      st.appendChild(el("span", { class: "status " + r.status }, r.status));
      tr.appendChild(st);
      tr.appendChild(el("td", {}, r.suite));
      tr.appendChild(el("td", {}, r.name));
      tr.appendChild(el("td", {}, r.seconds.toFixed(2)));
      tr.appendChild(el("td", {}, r.message));
      tr.addEventListener("click", function () { pre.textContent = r.suite + " " + r.name + "\n" + (r.details || r.message); });
      t.appendChild(tr);
    });
    box.appendChild(t);
    box.appendChild(pre);
  }

  function drawCoverage(sec, box) {
    box.appendChild(el("p", { class: "note" }, sec.total + " ops compared in agreement."));
    if (sec.missing.length) box.appendChild(el("p", { class: "missing" }, "never reached: " + sec.missing.join(", ")));
    sec.groups.forEach(function (g) {
      box.appendChild(el("h3", { style: "font-size:13px;margin:10px 0 4px" }, g.title));
      if (!g.items.length) { box.appendChild(el("p", { class: "note" }, "none")); return; }
      const max = Math.max.apply(null, g.items.map(function (it) { return it[1]; }));
      const bh = 14, left = 260, w = 420;
      const s = svg("svg", { width: left + w + 80, height: g.items.length * (bh + 3) + 4 });
      g.items.forEach(function (it, i) {
        const y0 = 2 + i * (bh + 3);
        s.appendChild(svg("text", { x: left - 6, y: y0 + bh - 3, "text-anchor": "end" }, short(it[0], 36)));
        s.appendChild(svg("rect", { x: left, y: y0, height: bh, width: Math.max(1, w * it[1] / max), fill: "#2271b1" }));
        s.appendChild(svg("text", { x: left + w * it[1] / max + 4, y: y0 + bh - 3 }, String(it[1])));
      });
      box.appendChild(s);
    });
  }

  function drawBandwidth(sec, box) {
    let maxB = 1, maxY = sec.ceiling_gbs;
    sec.series.forEach(function (s) { s.points.forEach(function (p) { maxB = Math.max(maxB, p[0]); maxY = Math.max(maxY, p[1]); }); });
    const left = 64, top = 14, w = 620, h = 300, xmax = Math.max(1, Math.log2(maxB));
    const x = function (b) { return left + Math.log2(b) / xmax * w; };
    const y = function (g) { return top + h - g / (maxY * 1.05) * h; };
    const s = svg("svg", { width: left + w + 40, height: top + h + 50, class: "bandwidth" });
    for (let g = 0; g <= maxY * 1.05; g += Math.pow(10, Math.floor(Math.log10(maxY))) / 2) {
      s.appendChild(svg("line", { x1: left, x2: left + w, y1: y(g), y2: y(g), class: "grid" }));
      s.appendChild(svg("text", { x: left - 6, y: y(g) + 4, "text-anchor": "end" }, String(Math.round(g))));
    }
    for (let b = 1; b <= maxB; b *= 2) s.appendChild(svg("text", { x: x(b), y: top + h + 14, "text-anchor": "middle" }, String(b)));
    s.appendChild(svg("text", { x: left + w / 2, y: top + h + 32, "text-anchor": "middle" }, "batch (sequences); GB/s of state moved"));
    s.appendChild(svg("line", { x1: left, x2: left + w, y1: y(sec.ceiling_gbs), y2: y(sec.ceiling_gbs), class: "limit" }));
    s.appendChild(svg("text", { x: left + w, y: y(sec.ceiling_gbs) - 4, "text-anchor": "end" },
                      "device-to-device copy " + Math.round(sec.ceiling_gbs) + " GB/s"));
    // one colour per op, one dash pattern per h mode (the first mode solid)
    const items = [], opColour = {}, hDash = {};
    sec.series.forEach(function (ser) {
      if (!(ser.op in opColour)) opColour[ser.op] = PALETTE[Object.keys(opColour).length % PALETTE.length];
      if (!(ser.h in hDash)) hDash[ser.h] = ["", "6 3", "2 2"][Object.keys(hDash).length % 3];
    });
    sec.series.forEach(function (ser) {
      const colour = opColour[ser.op];
      if (!hDash[ser.h]) items.push([colour, ser.op]);
      let d = "";
      ser.points.forEach(function (p) {
        d += (d ? " L" : "M") + x(p[0]) + " " + y(p[1]);
        tip(s.appendChild(svg("circle", { cx: x(p[0]), cy: y(p[1]), r: 3, fill: colour })),
            ser.name + ", B=" + p[0] + ": " + Math.round(p[1]) + " GB/s (" + (100 * p[1] / sec.ceiling_gbs).toFixed(1) +
            "% of copy), " + p[2].toFixed(1) + " us");
      });
      s.appendChild(svg("path", { d: d, fill: "none", stroke: colour, "stroke-width": 1.5, "stroke-dasharray": hDash[ser.h] }));
    });
    box.appendChild(s);
    box.appendChild(legend(items));
    box.appendChild(el("p", { class: "note" }, "Line style by h mode: " + Object.keys(hDash).map(function (h, i) {
      return h + " " + ["solid", "dashed", "dotted"][i % 3]; }).join(", ") + ". Hover a point for its numbers."));
  }

  function drawText(sec, box) { box.appendChild(el("pre", {}, sec.text)); }

  const DRAW = { "divergence-map": drawDivergenceMap, "error-growth": drawErrorGrowth, "checks": drawChecks,
                 "coverage": drawCoverage, "bandwidth": drawBandwidth, "text": drawText };

  const data = JSON.parse(document.getElementById("ssmcheck-data").textContent);
  const main = document.getElementById("sections");
  let first = null;
  data.sections.forEach(function (sec, i) {
    const box = main.appendChild(el("section", { "data-kind": sec.kind, id: "section-" + i }));
    box.appendChild(el("h2", {}, sec.title || sec.kind));
    const draw = DRAW[sec.kind];
    if (!draw) { noteError("unknown section kind '" + sec.kind + "'"); return; }
    try {
      const f = draw(sec, box);
      if (f && !first) first = f;
    } catch (e) {
      noteError("section " + i + " (" + sec.kind + "): " + e.message);
    }
  });
  // the first divergence in view, and where it was drawn (viewport pixels), for the browser test
  if (first) {
    first.scrollIntoView({ block: "nearest", inline: "center" });
    const b = first.getBoundingClientRect();
    root.dataset.firstOp = first.getAttribute("data-op");
    root.dataset.firstLayer = first.getAttribute("data-layer");
    root.dataset.firstField = first.getAttribute("data-field");
    root.dataset.firstBox = [b.left, b.top, b.width, b.height].map(function (v) { return v.toFixed(1); }).join(",");
    root.dataset.scroll = window.scrollX + "," + window.scrollY;
  }
  root.dataset.sections = String(main.children.length);
  root.dataset.rendered = "ok";
})();
