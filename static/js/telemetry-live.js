// Tandem topology live panel: health banner, KPI tiles, P/D graph, charts with markers, per-pod table.
// Fed by /ws/topologies/<id>/ (Tandem.live, reconnect with backoff) and the history API, which also
// back-fills the gap after a reconnect. Configuration comes from data-* attributes on #telemetry-live.
(function () {
  "use strict";
  const T = window.Tandem.telemetry;
  const root = document.getElementById("telemetry-live");
  if (!root) { return; }
  const cfg = {
    wsPath: root.dataset.wsPath,
    historyUrl: root.dataset.historyUrl,
    interval: parseFloat(root.dataset.interval) || 2,
    staleAfter: parseFloat(root.dataset.staleAfter) || 8,
  };
  const store = new window.Tandem.telemetryCharts.Store();
  const q = function (sel) { return root.querySelector(sel); };
  let windowSeconds = parseInt(root.dataset.window, 10) || 900;
  let charts = null, lastTs = null, latest = null;
  let sortKey = root.dataset.sortKey || "name", sortDir = 1;

  // ---- health banner -------------------------------------------------------------------------
  const HEADLINES = { healthy: "Healthy", degraded: "Degraded", down: "Down", stale: "Stale", unknown: "No data yet" };
  function renderHealth(snapshot) {
    const banner = q("[data-health]");
    const health = snapshot.health || { state: "unknown", reasons: [] };
    banner.dataset.state = health.state;
    T.setState(banner, "state-", health.state);
    const totals = snapshot.totals || {};
    let summary = "";
    if (T.isNum(totals.pods)) {
      summary = totals.ready + " of " + totals.pods + " pods Ready";
      const unknown = totals.links_unknown || 0;
      const links = (totals.links_up || 0) + (totals.links_degraded || 0) + (totals.links_down || 0) + unknown;
      if (links) {
        summary += " · KV links: " + totals.links_up + " up, " + totals.links_degraded + " degraded, " + totals.links_down + " down" +
          (unknown ? ", " + unknown + " unknown" : "");
      }
    }
    q("[data-health-title]").textContent = HEADLINES[health.state] || health.state;
    q("[data-health-summary]").textContent = summary;
    const list = q("[data-health-reasons]");
    list.replaceChildren.apply(list, (health.reasons || []).map(function (r) { return T.el("li", {}, r); }));
  }

  // ---- KPI tiles -----------------------------------------------------------------------------
  function renderKpis(snapshot) {
    const t = snapshot.totals || {};
    const slo = snapshot.slo || {};
    const values = {
      // The tile reads the last 30 s (stable); the chart plots every interval.
      hit_rate: T.isNum(t.hit_rate_30s) ? t.hit_rate_30s : t.hit_rate, ttft_p95: t.ttft_p95, tbt_p95: t.tbt_p95,
      tps: T.isNum(t.prompt_tps) || T.isNum(t.gen_tps) ? (t.prompt_tps || 0) + (t.gen_tps || 0) : null,
      waiting: t.waiting, kv_usage: t.kv_usage,
    };
    root.querySelectorAll("[data-kpi]").forEach(function (tile) {
      const key = tile.dataset.kpi;
      T.tween(tile.querySelector(".kpi"), values[key], tile.dataset.format);
      const target = key === "ttft_p95" ? slo.ttft_ms : key === "tbt_p95" ? slo.tbt_ms : null;
      const sub = tile.querySelector(".kpi-sub");
      if (sub && T.isNum(target)) {
        const over = T.isNum(values[key]) && values[key] * 1000 > target;
        sub.textContent = "SLO target " + T.fmt.ms(target) + (over ? " · violated" : "");
        tile.classList.toggle("kpi-violated", over);
      }
    });
    const sloBadge = q("[data-slo]");
    sloBadge.textContent = "SLO " + (slo.state || "unknown");
    sloBadge.dataset.state = slo.state || "unknown";
    T.setState(sloBadge, "state-", slo.state === "violated" ? "bad" : slo.state === "ok" ? "ok" : "unknown");
  }

  // ---- per-pod table -------------------------------------------------------------------------
  const COLUMNS = [
    ["name", "text"], ["role", "text"], ["ready", "ready"], ["hit_rate", "percent"], ["ttft_p95", "seconds"],
    ["tbt_p95", "seconds"], ["prompt_tps", "rate"], ["gen_tps", "rate"], ["running", "count"],
    ["waiting", "count"], ["kv_usage", "percent"], ["error_rate", "percent"],
    ["client_error_rate", "percent"],
  ];
  function sortValue(pod, key) {
    if (key === "ready") { return pod.stale ? 0 : pod.ready ? 2 : 1; }
    const v = pod[key];
    return v === null || v === undefined ? -Infinity : v;
  }
  function renderTable(snapshot) {
    const body = q("[data-pods] tbody");
    const pods = (snapshot.pods || []).slice().sort(function (a, b) {
      const x = sortValue(a, sortKey), y = sortValue(b, sortKey);
      if (x === y) { return a.name < b.name ? -1 : 1; }
      return (x < y ? -1 : 1) * sortDir;
    });
    const existing = {};
    body.querySelectorAll("tr[data-pod]").forEach(function (tr) { existing[tr.dataset.pod] = tr; });
    pods.forEach(function (pod) {
      let tr = existing[pod.name];
      if (!tr) {
        tr = T.el("tr", { "data-pod": pod.name });
        COLUMNS.forEach(function (col) { tr.appendChild(T.el("td", { "data-col": col[0], class: col[1] === "text" || col[1] === "ready" ? "" : "num" })); });
      }
      delete existing[pod.name];
      COLUMNS.forEach(function (col) {
        const td = tr.querySelector('[data-col="' + col[0] + '"]');
        if (col[1] === "text") {
          td.textContent = pod[col[0]];
          if (col[0] === "role") { td.className = "role-" + pod.role; }
        } else if (col[1] === "ready") {
          const state = pod.stale ? "stale" : pod.ready ? "ready" : "down";
          const badge = T.el("span", { class: "state state-" + state, title: pod.error || pod.phase || "" },
            pod.stale ? "no metrics" : pod.ready ? "Ready" : (pod.phase || "not Ready"));
          td.replaceChildren(badge);
        } else {
          T.tween(td, pod[col[0]], col[1]);
        }
      });
      body.appendChild(tr);
    });
    Object.keys(existing).forEach(function (name) { existing[name].remove(); });
    q("[data-pods-empty]").hidden = pods.length > 0;
  }
  function bindSorting() {
    root.querySelectorAll("[data-pods] th[data-sort]").forEach(function (th) {
      const button = th.querySelector("button");
      button.addEventListener("click", function () {
        const key = th.dataset.sort;
        sortDir = key === sortKey ? -sortDir : (key === "name" || key === "role" ? 1 : -1);
        sortKey = key;
        root.querySelectorAll("[data-pods] th[data-sort]").forEach(function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", sortDir === 1 ? "ascending" : "descending");
        if (latest) { renderTable(latest); }
      });
    });
  }

  // ---- events list (the same markers as on the charts) ----------------------------------------
  function renderEvents() {
    const list = q("[data-events]");
    const since = Date.now() / 1000 - windowSeconds;
    const items = store.markerList().filter(function (m) { return m.ts >= since; }).slice(-8).reverse();
    list.replaceChildren.apply(list, items.map(function (m) {
      const li = T.el("li", { "data-kind": m.kind });
      li.appendChild(T.el("span", { class: "marker-swatch marker-" + m.kind }));
      li.appendChild(T.el("time", { datetime: new Date(m.ts * 1000).toISOString() }, new Date(m.ts * 1000).toLocaleTimeString()));
      li.appendChild(T.el("span", {}, " " + m.text));
      return li;
    }));
    q("[data-events-empty]").hidden = items.length > 0;
  }

  // ---- data in -------------------------------------------------------------------------------
  function applySnapshot(snapshot, fromSocket) {
    if (lastTs !== null && snapshot.ts < lastTs) { return; }
    latest = snapshot;
    lastTs = snapshot.ts;
    store.addSnapshot(snapshot);
    renderHealth(snapshot);
    renderKpis(snapshot);
    window.Tandem.pdGraph.render(q("[data-graph]"), snapshot);
    window.Tandem.pdGraph.renderLinks(q("[data-links]"), snapshot);
    renderTable(snapshot);
    renderEvents();
    if (charts) { charts.update(windowSeconds); }
    q("[data-updated]").textContent = new Date(snapshot.ts * 1000).toLocaleTimeString();
    root.dataset.snapshotTs = String(snapshot.ts);
    if (fromSocket) { dog.beat(); }
  }

  // Deployment progress arrives many times per deployment; one marker per (deployment, state).
  const deployStates = {};
  function deploymentMarker(message) {
    const key = message.id + "|" + message.state;
    if (deployStates[key]) { return; }
    deployStates[key] = true;
    const what = (message.deployment_kind || "deploy") + (message.revision ? " of revision " + message.revision : "");
    store.addMarker(Date.now() / 1000, "deploy", what + ": " + (message.state_label || message.state || "started"));
    renderEvents();
    if (charts) { charts.update(windowSeconds); }
  }

  function onMessage(message) {
    if (message.kind === "telemetry" && message.snapshot) { applySnapshot(message.snapshot, true); }
    else if (message.kind === "deployment") { deploymentMarker(message); }
    else if (message.kind === "alert" || message.kind === "alert_raised" || message.kind === "alert_resolved") {
      store.addMarker(T.isNum(message.ts) ? message.ts : Date.now() / 1000, message.kind === "alert" ? "alert_raised" : message.kind, message.text || "alert");
      renderEvents();
    }
  }

  function fetchHistory(start, end, step) {
    const params = new URLSearchParams({
      series: window.Tandem.telemetryCharts.seriesNames().join(","),
      start: String(Math.floor(start)), end: String(Math.ceil(end)), step: String(Math.max(1, Math.round(step))),
    });
    return fetch(cfg.historyUrl + "?" + params.toString(), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (body) {
        if (body) { store.addHistory(body); renderEvents(); if (charts) { charts.update(windowSeconds); } }
        return body;
      })
      .catch(function () { return null; });
  }

  function loadWindow() {
    const end = Date.now() / 1000;
    store.trim(end - 24 * 3600);
    // ~300 points per window: raw for short windows, the API switches to rollups for long ones.
    return fetchHistory(end - windowSeconds, end, Math.max(cfg.interval, windowSeconds / 300));
  }

  // ---- live state ----------------------------------------------------------------------------
  function setLiveState(state, text) {
    root.dataset.liveState = state;
    root.classList.toggle("is-stale", state === "stale" || state === "offline");
    const dot = q("[data-live-dot]");
    dot.className = "live-dot " + (state === "live" ? "live" : state === "stale" ? "stale" : state === "offline" ? "offline" : "");
    q("[data-live-text]").textContent = text;
  }
  const dog = T.watchdog(cfg.staleAfter, function (stale, age) {
    if (stale) { setLiveState("stale", "Stale — no data for " + Math.round(age) + " s"); }
    else { setLiveState("live", "Live"); }
  });

  function onState(state, info) {
    if (state === "live") {
      setLiveState("live", "Live");
      if (info && info.reconnected && lastTs !== null) {
        // Back-fill what happened while the socket was down; the panel records what it fetched.
        const from = lastTs, to = Date.now() / 1000;
        fetchHistory(from, to, cfg.interval).then(function (body) {
          if (!body) { return; }
          let points = 0;
          Object.keys(body.series || {}).forEach(function (n) { body.series[n].forEach(function (v) { if (T.isNum(v)) { points += 1; } }); });
          root.dataset.backfill = JSON.stringify({ from: from, to: to, points: points });
        });
      }
    } else if (state === "offline") {
      const refused = info && (info.code === 4401 || info.code === 4403);
      setLiveState("offline", refused ? (info.code === 4401 ? "Signed out — reload to log in" : "Not allowed to watch this topology")
        : "Connection lost — reconnecting");
    } else {
      setLiveState("connecting", state === "reconnecting" ? "Reconnecting…" : "Connecting…");
    }
  }

  // ---- start ---------------------------------------------------------------------------------
  bindSorting();
  root.querySelectorAll("[data-window]").forEach(function (button) {
    button.addEventListener("click", function () {
      windowSeconds = parseInt(button.dataset.window, 10);
      root.querySelectorAll("[data-window]").forEach(function (b) { b.setAttribute("aria-pressed", b === button ? "true" : "false"); });
      if (charts) { charts.update(windowSeconds); }
      renderEvents();
      loadWindow();
    });
  });
  charts = window.Tandem.telemetryCharts.build(q("[data-charts]"), store, windowSeconds);
  window.addEventListener("resize", function () { charts.resize(); });
  const initial = T.readJson("telemetry-initial-snapshot");
  if (initial) { applySnapshot(initial, false); }
  loadWindow();
  window.setInterval(function () { if (charts && !document.hidden) { charts.update(windowSeconds); } }, 5000);
  window.Tandem.live(cfg.wsPath, { onMessage: onMessage, onState: onState });
})();
