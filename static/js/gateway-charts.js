// Gateway traffic charts (topology page and key page): requests/s by backend and the verification
// probes' own, error share, TTFT (streamed requests) and latency p50/p95 from the gateway's per-request records, with fallback runs and circuit-breaker
// changes marked on the time axis. Drawn by the telemetry panel's chart code (telemetry-charts.js)
// from GET .../gateway-series/, re-read every bucket width (10-60 s) and when the breaker changes.
(function () {
  "use strict";
  const FALLBACK = "#a23b72";
  const VERIFICATION = "#6d4bd1";  // the topology's verification probes
  const CHARTS = [
    { id: "gw-rps", title: "Requests per second", unit: "req/s", k: 1, series: [
      { name: "rps.cluster", label: "cluster", stroke: "#2f5bd3" },
      { name: "rps.fallback", label: "fallback", stroke: FALLBACK },
      { name: "rps.none", label: "refused before dispatch", stroke: "#5d6878" },
      { name: "rps.verification", label: "verification", stroke: VERIFICATION }] },
    { id: "gw-errors", title: "Errors", unit: "%", k: 100, series: [
      { name: "share.errors", label: "5xx (failed)", stroke: "#c62828" },
      { name: "share.refused", label: "4xx (key, limit, model)", stroke: "#5d6878" }] },
    { id: "gw-ttft", title: "Time to first token, streamed requests", unit: "ms", k: 1, series: [
      { name: "ttft.p50", label: "p50", stroke: "#2f5bd3" }, { name: "ttft.p95", label: "p95", stroke: "#0f7b8a" }] },
    { id: "gw-latency", title: "Request latency", unit: "ms", k: 1, series: [
      { name: "latency.p50", label: "p50", stroke: "#2f5bd3" }, { name: "latency.p95", label: "p95", stroke: "#0f7b8a" }] },
  ];
  const MARKERS = { fallback: FALLBACK, breaker_open: "#c62828", breaker_half_open: "#b26a00", breaker_closed: "#1f8a4c" };
  // Re-read every bucket width, between 10 s and 60 s: a 24-hour window (15-minute buckets) costs the
  // database a few seconds per read over millions of records, and gains nothing from faster polling.
  function refreshMs(step) { return Math.min(60, Math.max(10, step || 10)) * 1000; }

  function percent(v) { return (v * 100).toFixed(v >= 0.1 || v === 0 ? 0 : 1) + " %"; }

  function summary(totals) {
    if (!totals || !totals.requests) { return "no requests in this window"; }
    const n = Math.round(totals.requests);
    const parts = [n.toLocaleString("en-US") + " request" + (n === 1 ? "" : "s")];
    if (totals.verification) { parts[0] += " incl. " + Math.round(totals.verification).toLocaleString("en-US") + " verification"; }
    if (totals.fallback) { parts.push(percent(totals.fallback / totals.requests) + " by the fallback"); }
    if (totals.errors) { parts.push(percent(totals.error_share) + " failed (5xx)"); }
    if (totals.refused) { parts.push(percent(totals.refused / totals.requests) + " refused (4xx)"); }
    return parts.join(" · ");
  }

  // Buckets before the window's first request are left out of the drawing, so a window longer than
  // the traffic does not squeeze every line against the right edge (the axis still shows a minute).
  function withoutLeadingQuiet(body) {
    const rps = ["rps.cluster", "rps.fallback", "rps.none", "rps.verification"];
    const n = (body.timestamps || []).length;
    let first = 0;
    while (first < n && rps.every(function (name) { return !body.series[name][first]; })) { first += 1; }
    const series = {};
    Object.keys(body.series).forEach(function (name) { series[name] = body.series[name].slice(first); });
    return Object.assign({}, body, { timestamps: body.timestamps.slice(first), series: series });
  }

  function init(root) {
    const store = new window.Tandem.telemetryCharts.Store();
    let windowSeconds = parseInt(root.dataset.window, 10) || 3600;
    let charts = null;
    let seq = 0;  // a window picked while a read is under way wins over that read
    let step = 0;
    let timer = null;

    function later() {
      window.clearTimeout(timer);
      timer = window.setTimeout(function () { if (document.hidden) { later(); } else { load(); } }, refreshMs(step));
    }

    function load() {
      const mine = ++seq;
      const end = Date.now() / 1000;
      const url = root.dataset.seriesUrl + "?start=" + (end - windowSeconds).toFixed(3) + "&end=" + end.toFixed(3);
      window.fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (body) {
          if (mine !== seq) { return; }
          if (body) { step = body.step; }
          later();
          if (!body) { return; }
          store.points = {};
          store.markers = {};
          store.addHistory(withoutLeadingQuiet(body), true);  // an empty bucket: rates 0, the rest a gap
          root.dataset.requests = String(body.totals.requests || 0);
          root.dataset.loadedAt = String(end);
          root.querySelector("[data-gw-summary]").textContent = summary(body.totals);
          charts.update(windowSeconds);
        })
        .catch(function () { if (mine === seq) { later(); } });
    }

    root.querySelectorAll("[data-window]").forEach(function (button) {
      button.addEventListener("click", function () {
        windowSeconds = parseInt(button.dataset.window, 10);
        root.querySelectorAll("[data-window]").forEach(function (b) { b.setAttribute("aria-pressed", b === button ? "true" : "false"); });
        load();
      });
    });
    // A key's page: verification probes never use a person's key, so their line would always read 0.
    const shown = root.dataset.probes === "off" ? CHARTS.map(function (chart) {
      return Object.assign({}, chart, { series: chart.series.filter(function (s) { return s.name !== "rps.verification"; }) });
    }) : CHARTS;
    charts = window.Tandem.telemetryCharts.build(root.querySelector("[data-charts]"), store, windowSeconds,
      { charts: shown, markerColors: MARKERS });
    window.addEventListener("resize", function () { charts.resize(); });
    root.tandemCharts = charts;  // the plots, for whoever inspects the page (the browser tests)
    document.addEventListener("gateway:changed", load);
    load();
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-gateway-charts]").forEach(init);
  });
})();
