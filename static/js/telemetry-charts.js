// Tandem live charts (uPlot): a time-series store fed by the history API and live snapshots,
// six charts with units on both axes, and deploy / role-change / alert markers on the time axis.
// build() also draws other chart sets from the same store (the gateway's traffic charts).
(function () {
  "use strict";
  const T = function () { return window.Tandem.telemetry; };
  // Series colours avoid green/amber/red, which mean state everywhere else.
  const COLORS = ["#2f5bd3", "#0f7b8a", "#6d4bd1", "#5d6878", "#a23b72"];
  const MARKER_COLORS = { deploy: "#1d2430", deployment: "#1d2430", role_change: "#6d4bd1", alert_raised: "#c62828", alert_resolved: "#1f8a4c" };

  function pick(path) {
    return function (s) {
      return path.split(".").reduce(function (o, k) { return o == null ? null : o[k]; }, s);
    };
  }
  function role(r, f) { return { name: "role." + r + "." + f, get: pick("roles." + r + "." + f) }; }
  function total(f) { return { name: "topology." + f, get: pick("totals." + f) }; }

  // Each chart: title, y unit, how a stored value becomes a plotted one, and its series.
  const CHARTS = [
    { id: "hit", title: "Prefix-cache hit rate per interval", unit: "%", k: 100, series: [
      Object.assign(total("hit_rate"), { label: "prefix cache" }),
      Object.assign(total("external_hit_rate"), { label: "connector (external)" })] },
    { id: "ttft", title: "Time to first token", unit: "ms", k: 1000, series: [
      Object.assign(total("ttft_p50"), { label: "p50" }), Object.assign(total("ttft_p95"), { label: "p95" }),
      Object.assign(total("ttft_p99"), { label: "p99" })] },
    { id: "itl", title: "Time between tokens (TBT)", unit: "ms", k: 1000, series: [
      Object.assign(total("tbt_p50"), { label: "p50" }), Object.assign(total("tbt_p95"), { label: "p95" }),
      Object.assign(total("tbt_p99"), { label: "p99" })] },
    { id: "tps", title: "Throughput", unit: "tok/s", k: 1, series: [
      Object.assign(total("prompt_tps"), { label: "prompt" }), Object.assign(total("gen_tps"), { label: "generated" })] },
    { id: "queue", title: "Queue depth", unit: "requests", k: 1, series: [
      Object.assign(total("waiting"), { label: "waiting" }), Object.assign(total("running"), { label: "running" })] },
    { id: "kv", title: "KV-cache usage", unit: "%", k: 100, series: [
      Object.assign(role("prefill", "kv_usage"), { label: "prefill" }),
      Object.assign(role("decode", "kv_usage"), { label: "decode" })] },
  ];

  function seriesNames() {
    const names = [];
    CHARTS.forEach(function (c) { c.series.forEach(function (s) { names.push(s.name); }); });
    return names;
  }

  // Store: series name -> Map(ts -> value), markers keyed so repeats collapse.
  function Store() { this.points = {}; this.markers = {}; }
  Store.prototype.put = function (name, ts, value) {
    if (!T().isNum(ts)) { return; }
    (this.points[name] = this.points[name] || new Map()).set(Math.round(ts * 1000) / 1000, T().isNum(value) ? value : null);
  };
  Store.prototype.addSnapshot = function (snapshot) {
    const self = this;
    CHARTS.forEach(function (c) { c.series.forEach(function (s) { self.put(s.name, snapshot.ts, s.get(snapshot)); }); });
    (snapshot.events || []).forEach(function (e) { self.addMarker(e.ts, e.kind, e.text); });
  };
  // One event is one marker: an alert reaches the page in the snapshot (its collection time), in the
  // history (the time it was recorded) and as a live message; the same kind and text within a minute is
  // the same event, kept once at its earliest time.
  const SAME_EVENT_SECONDS = 60;
  Store.prototype.addMarker = function (ts, kind, text) {
    if (!T().isNum(ts)) { return; }
    const self = this;
    const twin = Object.keys(this.markers).find(function (k) {
      const m = self.markers[k];
      return m.kind === kind && m.text === text && Math.abs(m.ts - ts) < SAME_EVENT_SECONDS;
    });
    if (twin !== undefined) {
      if (this.markers[twin].ts <= ts) { return; }
      delete this.markers[twin];
    }
    this.markers[kind + "|" + ts + "|" + text] = { ts: ts, kind: kind, text: text };
  };
  Store.prototype.markerList = function () {
    const self = this;
    return Object.keys(this.markers).map(function (k) { return self.markers[k]; }).sort(function (a, b) { return a.ts - b.ts; });
  };
  Store.prototype.trim = function (fromTs) {
    const self = this;
    Object.keys(this.points).forEach(function (name) {
      self.points[name].forEach(function (_, ts) { if (ts < fromTs) { self.points[name].delete(ts); } });
    });
  };
  // History API answer: {timestamps: [bucket starts], series: {name: [value | null per bucket]}, events}.
  // A bucket is drawn at its middle so live points (taken at collection time) line up with it.
  // keepGaps: a null bucket is kept as a point without a value, so the line breaks there instead of
  // joining its neighbours (a series that means "no value" there, not one whose nulls are just unknown).
  Store.prototype.addHistory = function (body, keepGaps) {
    const self = this;
    if (!body) { return; }
    const stamps = body.timestamps || [];
    const half = (body.step || 0) / 2;
    Object.keys(body.series || {}).forEach(function (name) {
      (body.series[name] || []).forEach(function (value, i) {
        if ((keepGaps || T().isNum(value)) && i < stamps.length) { self.put(name, stamps[i] + half, value); }
      });
    });
    (body.events || []).forEach(function (e) { self.addMarker(e.ts, e.kind, e.text); });
  };
  Store.prototype.firstTs = function (fromTs) {
    let first = null;
    const self = this;
    Object.keys(this.points).forEach(function (name) {
      self.points[name].forEach(function (v, ts) { if (v !== null && ts >= fromTs && (first === null || ts < first)) { first = ts; } });
    });
    return first;
  };
  Store.prototype.data = function (chart, fromTs) {
    const self = this;
    const stamps = new Set();
    chart.series.forEach(function (s) { (self.points[s.name] || new Map()).forEach(function (_, ts) { if (ts >= fromTs) { stamps.add(ts); } }); });
    const xs = Array.from(stamps).sort(function (a, b) { return a - b; });
    const out = [xs];
    chart.series.forEach(function (s) {
      const m = self.points[s.name] || new Map();
      out.push(xs.map(function (ts) { const v = m.get(ts); return T().isNum(v) ? v * chart.k : null; }));
    });
    return out;
  };

  function markerPlugin(store, colors) {
    return {
      hooks: {
        draw: [function (u) {
          const ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
          const min = u.scales.x.min, max = u.scales.x.max;
          store.markerList().forEach(function (m) {
            if (m.ts < min || m.ts > max) { return; }
            const x = Math.round(u.valToPos(m.ts, "x", true));
            ctx.save();
            ctx.strokeStyle = colors[m.kind] || "#5d6878";
            ctx.lineWidth = 2 * devicePixelRatio;
            ctx.setLineDash([5 * devicePixelRatio, 4 * devicePixelRatio]);
            ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + h); ctx.stroke();
            ctx.restore();
          });
        }],
      },
    };
  }

  function axisValues(unit) {
    return function (u, splits) {
      return splits.map(function (v) {
        if (v == null) { return ""; }
        const n = Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1).replace(/\.0$/, "") : String(+v.toFixed(2));
        return unit === "%" ? n + " %" : n;
      });
    };
  }

  // The time axis: ticks as far apart as their labels are wide (measured in the axis font), so labels
  // never collide at any width; a label says seconds only when ticks are less than a minute apart,
  // and the day when the window spans more than one.
  const AXIS_FONT = "12px system-ui, -apple-system, \"Segoe UI\", Roboto, \"Helvetica Neue\", Arial, sans-serif";
  const LABEL_GAP = 14;  // px of air between two neighbouring labels
  const TIME_INCRS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
    86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400];
  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  let measure = null;
  function textWidth(text) {
    measure = measure || document.createElement("canvas").getContext("2d");
    measure.font = AXIS_FONT;
    return measure.measureText(text).width;
  }
  function two(n) { return (n < 10 ? "0" : "") + n; }
  function timeLabel(ts, incr, span) {
    const d = new Date(ts * 1000);
    const hm = two(d.getHours()) + ":" + two(d.getMinutes());
    const day = d.getDate() + " " + MONTHS[d.getMonth()];
    if (incr < 60) { return hm + ":" + two(d.getSeconds()); }
    if (incr >= 86400) { return day; }
    return span > 86400 ? day + " " + hm : hm;
  }
  // The widest label a tick `incr` seconds apart can carry (a late-September evening: wide digits).
  function labelWidth(incr, span) { return textWidth(timeLabel(new Date(2026, 8, 28, 20, 48, 48).getTime() / 1000, incr, span)); }
  // uPlot takes the smallest increment whose ticks are at least this far apart: the first increment
  // whose ticks clear its own labels, and never one before it (a finer one may carry wider labels).
  function timeSpace(u, axisIdx, min, max, dim) {
    const span = max - min;
    let previous = 0;
    for (let i = 0; i < TIME_INCRS.length; i++) {
      const px = dim * TIME_INCRS[i] / span;
      const needed = labelWidth(TIME_INCRS[i], span) + LABEL_GAP;
      if (px >= needed) { return Math.max(needed, previous + 0.5); }
      previous = px;
    }
    return dim;
  }
  function timeValues(u, splits, axisIdx, space, incr) {
    const span = u.scales.x.max - u.scales.x.min;
    return splits.map(function (v) { return v == null ? "" : timeLabel(v, incr, span); });
  }

  // options.charts: chart definitions like CHARTS (a series may name its own stroke);
  // options.markerColors: marker kind -> colour. Both default to the telemetry panel's.
  function build(container, store, windowSeconds, options) {
    const charts = [];
    const defs = (options && options.charts) || CHARTS;
    const markerColors = (options && options.markerColors) || MARKER_COLORS;
    container.replaceChildren();
    const width = function (node) { return Math.max(280, node.clientWidth - 8); };
    defs.forEach(function (c) {
      const card = T().el("figure", { class: "chart-card", "data-chart": c.id });
      card.appendChild(T().el("figcaption", {}, c.title + " (" + c.unit + ")"));
      const host = T().el("div", { class: "chart-host" });
      card.appendChild(host);
      container.appendChild(card);
      const opts = {
        width: width(card), height: 210, cursor: { drag: { x: false, y: false } },
        legend: { live: true },
        scales: { x: { time: true }, y: { range: function (u, lo, hi) { return [Math.min(0, lo || 0), Math.max(hi || 1, c.unit === "%" ? 1 : 0.001)]; } } },
        axes: [
          { label: "time (local)", labelSize: 16, size: 58, labelGap: 4, font: AXIS_FONT,
            incrs: TIME_INCRS, space: timeSpace, values: timeValues },
          { label: c.unit, labelSize: 18, size: 58, values: axisValues(c.unit) },
        ],
        series: [{ label: "time" }].concat(c.series.map(function (s, i) {
          return { label: s.label, stroke: s.stroke || COLORS[i % COLORS.length], width: 2, spanGaps: false,
            value: function (u, v) { return v == null ? "—" : (Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(1)) + " " + c.unit; } };
        })),
        plugins: [markerPlugin(store, markerColors)],
      };
      const now = Date.now() / 1000;
      const plot = new window.uPlot(opts, store.data(c, now - windowSeconds), host);
      charts.push({ def: c, plot: plot, card: card });
    });
    return {
      update: function (windowSeconds) {
        const now = Date.now() / 1000;
        // A window longer than the data would squeeze every line against the right edge: start
        // the axis at the first point (but show at least a minute) until the window fills up.
        const first = store.firstTs(now - windowSeconds);
        const min = first === null ? now - windowSeconds : Math.max(now - windowSeconds, Math.min(first - 5, now - 60));
        charts.forEach(function (ch) {
          ch.plot.setData(store.data(ch.def, now - windowSeconds), false);
          ch.plot.setScale("x", { min: min, max: now });
        });
      },
      resize: function () { charts.forEach(function (ch) { ch.plot.setSize({ width: width(ch.card), height: 210 }); }); },
      plots: function () { return charts.map(function (ch) { return ch.plot; }); },
    };
  }

  window.Tandem = Object.assign(window.Tandem || {}, {
    telemetryCharts: { CHARTS: CHARTS, Store: Store, build: build, seriesNames: seriesNames, MARKER_COLORS: MARKER_COLORS },
  });
})();
