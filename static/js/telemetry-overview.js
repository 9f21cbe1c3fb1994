// Tandem overview: every topology's health, SLO, hit rate (30 s), TTFT and TBT p95, tokens/s, updated live from
// /ws/overview/, problems sorted to the top. Rows are server-rendered; this only keeps them fresh.
(function () {
  "use strict";
  const T = window.Tandem.telemetry;
  const table = document.getElementById("overview-table");
  if (!table) { return; }
  const body = table.querySelector("tbody");
  const staleAfter = parseFloat(table.dataset.staleAfter) || 8;
  const RANK = { down: 0, unreachable: 0, degraded: 1, violated: 1, stale: 2, unknown: 3, healthy: 4, ok: 4, undeployed: 5 };
  const seen = {};

  function rank(tr) {
    const health = RANK[tr.dataset.health] !== undefined ? RANK[tr.dataset.health] : 3;
    const slo = tr.dataset.slo === "violated" ? 1 : 4;
    // A failed last deploy, or a running revision other than the desired one, is a problem whatever
    // the live figures say (deployments.rollout).
    const rollout = tr.dataset.rollout === "failed" || tr.dataset.rollout === "behind" ? 1 : 5;
    if (tr.dataset.deployed === "0") { return rollout; }
    return Math.min(health, slo, rollout);
  }

  function resort() {
    const rows = Array.from(body.querySelectorAll("tr[data-row]"));
    const sorted = rows.slice().sort(function (a, b) {
      return rank(a) - rank(b) || a.dataset.sortName.localeCompare(b.dataset.sortName);
    });
    if (sorted.some(function (tr, i) { return tr !== rows[i]; })) { sorted.forEach(function (tr) { body.appendChild(tr); }); }
    const problems = sorted.filter(function (tr) { return rank(tr) <= 1; }).length;
    const counter = document.querySelector("[data-problem-count]");
    if (counter) {
      T.tween(counter, problems, "count");
      // Red while anything is wrong, like every other tile that counts trouble.
      const tile = counter.closest("[data-problems-tile]");
      if (tile) { tile.classList.toggle("kpi-violated", problems > 0); }
    }
  }

  function paint(tr) {
    const r = rank(tr);
    tr.classList.toggle("problem", r === 0);
    tr.classList.toggle("warning", r === 1);
  }

  function badge(cell, state, text) {
    const span = cell.querySelector(".state");
    T.setState(span, "state-", state);
    span.textContent = text;
  }

  function apply(m) {
    const tr = body.querySelector('tr[data-topology-id="' + m.topology_id + '"]');
    if (!tr) { return; }
    // A never-deployed topology keeps saying "not deployed" until it has pods.
    if (tr.dataset.deployed === "0" && !(T.isNum(m.pods) && m.pods > 0)) { return; }
    tr.dataset.deployed = "1";
    seen[m.topology_id] = Date.now();
    const health = (m.health && m.health.state) || "unknown";
    const slo = (m.slo && m.slo.state) || "unknown";
    tr.dataset.health = health;
    tr.dataset.slo = slo;
    badge(tr.querySelector('[data-cell="health"]'), health, health);
    badge(tr.querySelector('[data-cell="slo"]'), slo === "violated" ? "bad" : slo === "ok" ? "ok" : "unknown", slo);
    T.tween(tr.querySelector('[data-cell="hit_rate"]'), m.hit_rate, "percent");
    T.tween(tr.querySelector('[data-cell="ttft_p95"]'), m.ttft_p95, "seconds");
    T.tween(tr.querySelector('[data-cell="tbt_p95"]'), m.tbt_p95, "seconds");
    T.tween(tr.querySelector('[data-cell="gen_tps"]'), m.gen_tps, "rate");
    // Every summary (opening and live) carries the pod and link counts.
    if (T.isNum(m.pods) && T.isNum(m.ready)) { tr.querySelector('[data-cell="pods"]').textContent = m.ready + " / " + m.pods; }
    if (T.isNum(m.links_down)) { tr.querySelector('[data-cell="links_down"]').textContent = String(m.links_down); }
    const reasons = (m.health && m.health.reasons) || [];
    const reasonCell = tr.querySelector('[data-cell="reason"]');
    reasonCell.querySelector('[data-cell="health-reason"]').textContent = reasons.length ? reasons[0] + (reasons.length > 1 ? " (+" + (reasons.length - 1) + " more)" : "") : "";
    reasonCell.title = reasons.join("; ");
    paint(tr);
    resort();
  }

  // A deploy, rollback or scale finished: the row's rollout state (failed, behind, in sync) follows.
  function applyRollout(m) {
    const tr = body.querySelector('tr[data-topology-id="' + m.topology_id + '"]');
    if (!tr) { return; }
    tr.dataset.rollout = m.state;
    if (T.isNum(m.running)) { tr.dataset.deployed = "1"; }
    const cell = tr.querySelector('[data-cell="rollout"]');
    cell.textContent = "";
    if (m.problem) {
      const span = document.createElement("span");
      span.className = "state state-" + m.state;
      span.textContent = m.message;
      cell.appendChild(span);
      cell.appendChild(document.createTextNode(" "));
    }
    paint(tr);
    resort();
  }

  // Rows that stop receiving updates turn grey: their numbers are no longer current.
  window.setInterval(function () {
    const now = Date.now();
    body.querySelectorAll("tr[data-topology-id]").forEach(function (tr) {
      const last = seen[tr.dataset.topologyId];
      // A topology that never deployed has no data to go stale: it stays "not deployed".
      if (tr.dataset.deployed === "0") { return; }
      if (last && now - last > staleAfter * 1000 && tr.dataset.health !== "stale") {
        tr.dataset.health = "stale";
        badge(tr.querySelector('[data-cell="health"]'), "stale", "stale");
        tr.querySelector('[data-cell="health-reason"]').textContent = "No data for " + Math.round((now - last) / 1000) + " s";
        paint(tr);
        resort();
      }
    });
  }, 1000);

  body.querySelectorAll("tr[data-row]").forEach(paint);
  resort();
  const status = document.querySelector("[data-live-text]");
  const dot = document.querySelector("[data-live-dot]");
  window.Tandem.live("/ws/overview/", {
    onMessage: function (m) {
      if (m.kind === "overview") { apply(m); }
      else if (m.kind === "rollout") { applyRollout(m); }
    },
    onState: function (state) {
      if (status) { status.textContent = state === "live" ? "Live" : state === "offline" ? "Connection lost — reconnecting" : "Connecting…"; }
      if (dot) { dot.className = "live-dot " + (state === "live" ? "live" : state === "offline" ? "offline" : ""); }
    },
  });
})();
