// The run report's plots: uPlot charts of the arrays embedded in #report-data.
// Time plots zoom together (drag to zoom, double-click for the whole run) and are re-decimated
// for the visible window: per pixel the min and the max of the stored samples, so peaks survive.
// document.body.dataset.rendered / .errors / .renderMs tell a headless browser how many plots were
// drawn, how many failed and how long decoding and drawing took; each plot's element keeps the tick
// labels of its log axes (data-xticks, data-yticks) and the marker labels it drew, with their extents
// (data-vlabels: "label@left:right:row;..."), for the same purpose.
(function () {
  "use strict";
  const errors = [];
  let rendered = 0;
  const started = performance.now();
  function mark() {
    document.body.dataset.renderMs = String(Math.round(performance.now() - started));
    document.body.dataset.rendered = String(rendered);
    document.body.dataset.errors = String(errors.length);
    if (errors.length) document.body.dataset.firstError = errors[0];
  }
  window.addEventListener("error", function (e) { errors.push(String(e.message)); mark(); });

  const data = JSON.parse(document.getElementById("report-data").textContent);
  const cache = {};
  function arr(key) {
    if (!(key in cache)) {
      const a = data.arrays[key];
      const bin = atob(a.b64);
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      cache[key] = a.dtype === "f8" ? new Float64Array(bytes.buffer) : new Float32Array(bytes.buffer);
    }
    return cache[key];
  }

  const PALETTE = ["#1f6fd1", "#e0701a", "#2a9d3f", "#b4328f", "#6b6b6b", "#c23b22", "#00a0b0", "#8c6d1f"];
  const EVENT_COLORS = {inject: "#c23b22", clear: "#2a9d3f", watchdog_tripped: "#b4328f", watchdog_cleared: "#6b6b6b"};

  function lowerBound(x, v) {
    let lo = 0, hi = x.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (x[m] < v) lo = m + 1; else hi = m; }
    return lo;
  }
  function clean(v, log) { return (Number.isFinite(v) && (!log || v > 0)) ? v : null; }

  // a log axis' tick: three significant digits, powers of ten outside 1e-3 .. 1e5 (never a rounded "0")
  function tickLabel(v) {
    if (v == null) return "";
    const a = Math.abs(v);
    if (a === 0) return "0";
    if (a < 1e-3 || a >= 1e5) return v.toExponential(0).replace("e+", "e");
    return String(+v.toPrecision(3));
  }
  function logTicks(el, which) {
    return function (u, ticks) {
      const labels = ticks.map(tickLabel);
      el.dataset[which] = labels.filter(function (l) { return l; }).join(" ");
      return labels;
    };
  }

  // [x, y1, y2, ...] for the window [x0, x1]: the stored points, or min/max pairs per bucket
  function view(x, ys, x0, x1, buckets, logy) {
    const i0 = Math.max(0, lowerBound(x, x0) - 1);
    const i1 = Math.min(x.length, lowerBound(x, x1) + 1);
    const n = i1 - i0;
    const out = [[]].concat(ys.map(() => []));
    if (n <= 2 * buckets) {
      for (let i = i0; i < i1; i++) {
        out[0].push(x[i]);
        for (let s = 0; s < ys.length; s++) out[s + 1].push(clean(ys[s][i], logy));
      }
      return out;
    }
    const size = n / buckets;
    for (let b = 0; b < buckets; b++) {
      const a = i0 + Math.floor(b * size), e = Math.min(i1, i0 + Math.floor((b + 1) * size));
      if (e <= a) continue;
      out[0].push(x[a], x[Math.min(e - 1, a + ((e - a) >> 1))]);
      for (let s = 0; s < ys.length; s++) {
        const y = ys[s];
        let lo = Infinity, hi = -Infinity, ilo = a, ihi = a, gap = false;
        for (let i = a; i < e; i++) {
          const v = y[i];
          if (Number.isNaN(v)) { gap = true; continue; }
          if (v < lo) { lo = v; ilo = i; }
          if (v > hi) { hi = v; ihi = i; }
        }
        if (gap && lo === Infinity) { out[s + 1].push(null, null); continue; }
        const first = ilo <= ihi ? lo : hi, second = ilo <= ihi ? hi : lo;
        out[s + 1].push(clean(first, logy), clean(second, logy));
      }
    }
    return out;
  }

  function drawLines(u, p, el) {
    const ctx = u.ctx, left = u.bbox.left, top = u.bbox.top, w = u.bbox.width, h = u.bbox.height;
    const dpr = window.devicePixelRatio || 1;
    ctx.save();
    ctx.beginPath(); ctx.rect(left, top, w, h); ctx.clip();
    ctx.font = (10 * dpr) + "px sans-serif";
    ctx.lineWidth = dpr;
    // a marker's label goes in the first of four rows where it clears the labels left of it, else it
    // is left out (the line stays; the legend and the hover name it)
    const rowEnds = [-Infinity, -Infinity, -Infinity, -Infinity], drawn = [];
    function vline(xv, color, label) {
      const px = u.valToPos(xv, "x", true);
      if (!(px >= left && px <= left + w)) return;
      ctx.strokeStyle = color; ctx.fillStyle = color; ctx.setLineDash([4 * dpr, 3 * dpr]);
      ctx.beginPath(); ctx.moveTo(px, top); ctx.lineTo(px, top + h); ctx.stroke();
      if (!label) return;
      const x0 = px + 3 * dpr, x1 = x0 + ctx.measureText(label).width;
      const row = rowEnds.findIndex(function (end) { return x0 > end + 4 * dpr; });
      if (row < 0) return;
      ctx.fillText(label, x0, top + (12 + 11 * row) * dpr);
      rowEnds[row] = x1;
      drawn.push(label + "@" + Math.round(x0) + ":" + Math.round(x1) + ":" + row);
    }
    if (p.events) data.events.forEach(function (e) { vline(e.t, EVENT_COLORS[e.event] || "#999", ""); });
    p.vlines.slice().sort(function (a, b) { return a[0] - b[0]; }).forEach(function (v) { vline(v[0], "#888", v[1]); });
    el.dataset.vlabels = drawn.join(";");
    p.hlines.forEach(function (hl) {
      const py = u.valToPos(hl[0], "y", true);
      if (!(py >= top && py <= top + h)) return;
      ctx.strokeStyle = "#c23b22"; ctx.fillStyle = "#c23b22"; ctx.setLineDash([6 * dpr, 4 * dpr]);
      ctx.beginPath(); ctx.moveTo(left, py); ctx.lineTo(left + w, py); ctx.stroke();
      ctx.fillText(hl[1], left + 4 * dpr, py - top < 14 * dpr ? py + 11 * dpr : py - 3 * dpr);
    });
    ctx.restore();
  }

  const timePlots = [];
  let syncing = false;

  function rewindow(u, x0, x1) {
    const v = view(u._x, u._ys, x0, x1, u._buckets, u._logy);
    u.setData(v, true);
    u.setScale("x", {min: x0, max: x1});
  }

  function makePlot(p, el) {
    const x = arr(p.x), ys = p.series.map(function (s) { return arr(s.key); });
    const width = Math.max(300, el.clientWidth || 900);
    const buckets = Math.max(200, Math.round(width));
    const series = [{label: p.xlabel}].concat(p.series.map(function (s, i) {
      const color = s.color || PALETTE[i % PALETTE.length];
      const o = {label: s.label, stroke: color, width: 1.25, spanGaps: false, points: {show: false}};
      if (s.dash) o.dash = [6, 4];
      if (s.points) { o.paths = function () { return null; }; o.points = {show: true, size: 8, fill: color, stroke: color}; }
      if (s.bars) { o.paths = uPlot.paths.bars({size: [0.95, Infinity], align: 1}); o.fill = color + "99"; }
      return o;
    }));
    const isTime = p.x === "t";
    const yScale = {distr: p.logy ? 3 : 1};
    const yAxis = {label: p.ylabel, size: 72};
    const xAxis = {label: p.xlabel};
    if (p.logx) xAxis.values = logTicks(el, "xticks");
    if (p.logy) yAxis.values = logTicks(el, "yticks");
    if (p.hlines.length && !p.logy && !p.lanes.length) {
      // the limits and targets stay in view: the data range widened to them, 5 % padding
      yScale.range = function (u, lo, hi) {
        p.hlines.forEach(function (h) { lo = Math.min(lo, h[0]); hi = Math.max(hi, h[0]); });
        const pad = 0.05 * ((hi - lo) || Math.abs(hi) || 1);
        return [lo - pad, hi + pad];
      };
    }
    if (p.lanes.length) {
      yScale.range = [-0.5, p.lanes.length - 0.5];
      yAxis.splits = function () { return p.lanes.map(function (_, k) { return k; }); };
      yAxis.values = function (u, ticks) { return ticks.map(function (t) { return p.lanes[t] || ""; }); };
      yAxis.size = 150;
    }
    const opts = {
      title: p.title, width: width, height: p.lanes.length ? 60 + 28 * p.lanes.length : 250, series: series,
      scales: {x: {time: false, distr: p.logx ? 3 : 1}, y: yScale},
      axes: [xAxis, yAxis],
      legend: {live: true},
      cursor: isTime ? {sync: {key: "time"}, bind: {dblclick: function () { return null; }}} : {},
      hooks: {draw: [function (u) { drawLines(u, p, el); }]},
    };
    let initial;
    if (isTime) {
      initial = view(x, ys, x[0], x[x.length - 1], buckets, p.logy);
      opts.hooks.setScale = [function (u, key) {
        if (key !== "x" || u._busy) return;
        const x0 = u.scales.x.min, x1 = u.scales.x.max;
        u._busy = true;
        rewindow(u, x0, x1);
        u._busy = false;
        if (syncing) return;
        syncing = true;
        timePlots.forEach(function (o) { if (o !== u) { o._busy = true; rewindow(o, x0, x1); o._busy = false; } });
        syncing = false;
      }];
    } else {
      initial = [Array.from(x)].concat(ys.map(function (y) {
        return Array.from(y, function (v) { return clean(v, p.logy); });
      }));
    }
    const u = new uPlot(opts, initial, el);
    if (isTime) {
      u._x = x; u._ys = ys; u._buckets = buckets; u._logy = p.logy;
      timePlots.push(u);
      u.over.addEventListener("dblclick", function () { u.setScale("x", {min: x[0], max: x[x.length - 1]}); });
    }
    el.dataset.drawn = "1";
    rendered += 1;
  }

  data.plots.forEach(function (p) {
    const el = document.getElementById("plot-" + p.id);
    try { makePlot(p, el); } catch (err) { errors.push(p.id + ": " + err); el.textContent = "plot failed: " + err; }
  });
  window.addEventListener("resize", function () {
    timePlots.forEach(function (u) { u.setSize({width: Math.max(300, u.root.parentNode.clientWidth), height: u.height}); });
  });
  mark();
})();
