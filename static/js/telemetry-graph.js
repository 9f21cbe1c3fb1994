// Tandem P/D graph: prefill pods on the left, decode pods on the right, KV links as edges coloured
// by state (up green, degraded amber, down red, unknown grey) and labelled with the link's transfer p95;
// below it, a table of the links with where each state comes from and how fresh it is.
(function () {
  "use strict";
  const SVG = "http://www.w3.org/2000/svg";
  const NODE_W = 250, NODE_H = 46, GAP = 18, PAD = 16, COL_GAP = 300, NAME_CHARS = 30;

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) { node.textContent = text; }
    return node;
  }

  // Long pod names keep their start and their distinctive end: "deepseek-v2-l…-0-decode-0-0".
  function shortName(name) {
    if (name.length <= NAME_CHARS) { return name; }
    const tail = Math.ceil(NAME_CHARS * 0.55);
    return name.slice(0, NAME_CHARS - tail - 1) + "…" + name.slice(name.length - tail);
  }

  function podState(pod) {
    if (pod.stale) { return "stale"; }
    return pod.ready ? "ready" : "not-ready";
  }

  function podLine(pod) {
    const fmt = window.Tandem.telemetry.fmt;
    if (pod.stale) { return pod.error ? "no metrics: " + pod.error : "no metrics this interval"; }
    if (!pod.ready) { return (pod.phase || "not Ready") + " · not Ready"; }
    return "Ready · " + fmt.count(pod.running) + " running · " + fmt.count(pod.waiting) + " waiting";
  }

  // The label is the link's own KV transfer time: the exact mean of this interval's transfers (Δsum /
  // Δcount of the decode pod's connector histogram; "pod" when its links share it, as no connector
  // labels transfers by peer). A p95 interpolated inside a wide bucket reads the same for any series
  // whose values share that bucket (it once matched the decode TBT p95 to the digit), so it is shown
  // in the table, not as the label. Without transfer metrics: the probe's answer time.
  function linkLabel(link) {
    const fmt = window.Tandem.telemetry.fmt, isNum = window.Tandem.telemetry.isNum;
    if (link.state === "down") { return "down" + (link.status_code ? " · " + link.status_code : ""); }
    if (link.state === "unknown") { return "unknown"; }
    let text = "no transfers";
    const xfer = isNum(link.xfer_mean_ms) ? link.xfer_mean_ms : link.xfer_p95_ms;
    if (isNum(xfer)) { text = "xfer " + fmt.ms(xfer) + (link.shared ? " (pod)" : ""); }
    else if (isNum(link.probe_ms)) { text = "probe " + fmt.ms(link.probe_ms); }
    return link.state === "degraded" ? "degraded · " + text : text;
  }

  function age(seconds) {
    if (!window.Tandem.telemetry.isNum(seconds)) { return "—"; }
    return seconds < 1 ? "now" : seconds < 90 ? Math.round(seconds) + " s ago" : Math.round(seconds / 60) + " min ago";
  }

  const SOURCE_NAMES = { probe: "probe", metrics: "connector metrics", log: "engine log" };

  // One row per link: its state, figures, where each part of it comes from and how fresh, and what
  // its engine cannot show.
  function renderLinks(container, snapshot) {
    if (!container) { return; }
    const el = window.Tandem.telemetry.el, fmt = window.Tandem.telemetry.fmt;
    const links = snapshot.links || [];
    const body = el("tbody", {});
    links.forEach(function (link) {
      const row = el("tr", { "data-link-row": link.prefill + "->" + link.decode, "data-state": link.state });
      row.appendChild(el("td", {}, shortName(link.prefill) + " → " + shortName(link.decode)));
      row.appendChild(el("td", { class: "state-" + link.state }, link.state));
      row.appendChild(el("td", { "data-xfer": "" }, "mean " + fmt.ms(link.xfer_mean_ms) + " · p95 " +
        fmt.ms(link.xfer_p95_ms) + (link.shared ? " (decode pod)" : "")));
      row.appendChild(el("td", {}, fmt.ms(link.probe_ms)));
      const sources = el("td", { class: "link-sources" });
      (link.sources || []).forEach(function (src) {
        const when = window.Tandem.telemetry.isNum(src.ts) ? snapshot.ts - src.ts : null;
        sources.appendChild(el("div", { "data-source": src.kind, title: src.detail },
          SOURCE_NAMES[src.kind] + " · " + age(when) + ": " + src.detail));
      });
      if (!(link.sources || []).length) { sources.appendChild(el("div", { class: "muted" }, "no source reported in this interval")); }
      row.appendChild(sources);
      const blind = el("td", { class: "muted link-blind" });
      if (link.reason && link.state !== "up") { blind.appendChild(el("div", { class: "link-reason" }, link.reason)); }
      (link.blind || []).forEach(function (text) { blind.appendChild(el("div", { "data-blind": "" }, text)); });
      row.appendChild(blind);
      body.appendChild(row);
    });
    const table = el("table", { class: "links-table" });
    const head = el("tr", {});
    ["Link", "State", "KV transfer", "Probe", "From (freshness)", "Why · what Tandem cannot see"].forEach(function (h) {
      head.appendChild(el("th", {}, h));
    });
    const thead = el("thead", {});
    thead.appendChild(head);
    table.appendChild(thead);
    table.appendChild(body);
    container.replaceChildren(table);
    if (!links.length) {
      container.replaceChildren(el("p", { class: "muted" }, "No prefill → decode links: the topology has no KV connector or no pods yet."));
    }
  }

  function node(pod, x, y) {
    const g = svg("g", {
      class: "pd-node pd-" + podState(pod) + " role-" + pod.role,
      "data-pod": pod.name, "data-role": pod.role, "data-ready": pod.ready ? "true" : "false",
      "data-state": podState(pod), transform: "translate(" + x + "," + y + ")",
    });
    g.appendChild(svg("title", {}, pod.name + " (" + pod.role + "): " + podLine(pod)));
    g.appendChild(svg("rect", { class: "pd-box", width: NODE_W, height: NODE_H, rx: 7 }));
    g.appendChild(svg("rect", { class: "pd-stripe", width: 5, height: NODE_H, rx: 2 }));
    g.appendChild(svg("text", { class: "pd-name", x: 14, y: 19 }, shortName(pod.name)));
    g.appendChild(svg("text", { class: "pd-sub", x: 14, y: 36 }, podLine(pod)));
    return g;
  }

  // Draw (replace) the graph inside `container` for one snapshot.
  function render(container, snapshot) {
    const pods = (snapshot.pods || []).filter(function (p) { return p.role !== "router"; });
    const left = pods.filter(function (p) { return p.role === "prefill" || p.role === "both"; });
    const right = pods.filter(function (p) { return p.role === "decode"; });
    const links = snapshot.links || [];
    const rows = Math.max(left.length, right.length, 1);
    const width = PAD * 2 + NODE_W * 2 + COL_GAP;
    const height = PAD * 2 + 22 + rows * NODE_H + (rows - 1) * GAP;
    const root = svg("svg", {
      class: "pd-graph", viewBox: "0 0 " + width + " " + height, role: "img",
      "aria-label": "KV links between " + left.length + " prefill and " + right.length + " decode pods",
    });
    root.appendChild(svg("text", { class: "pd-col role-prefill", x: PAD, y: PAD + 8 }, "PREFILL"));
    root.appendChild(svg("text", { class: "pd-col role-decode", x: PAD + NODE_W + COL_GAP, y: PAD + 8 }, "DECODE"));
    const pos = {};
    function place(list, x) {
      const offset = (rows - list.length) * (NODE_H + GAP) / 2;
      list.forEach(function (pod, i) { pos[pod.name] = { x: x, y: PAD + 22 + offset + i * (NODE_H + GAP) }; });
    }
    place(left, PAD);
    place(right, PAD + NODE_W + COL_GAP);
    const edges = svg("g", { class: "pd-edges" });
    const labels = svg("g", { class: "pd-labels" });
    links.forEach(function (link, i) {
      const a = pos[link.prefill], b = pos[link.decode];
      if (!a || !b) { return; }
      const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2;
      const line = svg("line", {
        class: "pd-edge edge-" + link.state, x1: x1, y1: y1, x2: x2, y2: y2,
        "data-link": link.prefill + "->" + link.decode, "data-state": link.state,
      });
      const from = (link.sources || []).map(function (src) { return src.kind; }).join(", ") || "no source";
      line.appendChild(svg("title", {}, link.prefill + " → " + link.decode + ": " + link.state +
        (link.reason ? " — " + link.reason : "") + " (from: " + from + ")"));
      edges.appendChild(line);
      // Spread labels along their edges so crossing links don't stack their labels.
      const t = links.length > 1 ? 0.3 + 0.4 * ((i * 0.618) % 1) : 0.5;
      const lx = x1 + (x2 - x1) * t, ly = y1 + (y2 - y1) * t;
      const text = linkLabel(link);
      const w = text.length * 7.4 + 14;
      const label = svg("g", { class: "pd-label edge-" + link.state, "data-link-label": link.prefill + "->" + link.decode });
      label.appendChild(svg("rect", { x: lx - w / 2, y: ly - 10, width: w, height: 19, rx: 9 }));
      label.appendChild(svg("text", { x: lx, y: ly + 4, "text-anchor": "middle" }, text));
      labels.appendChild(label);
    });
    root.appendChild(edges);
    root.appendChild(labels);
    left.concat(right).forEach(function (pod) { root.appendChild(node(pod, pos[pod.name].x, pos[pod.name].y)); });
    container.replaceChildren(root);
    if (!pods.length) {
      container.appendChild(window.Tandem.telemetry.el("p", { class: "muted pd-empty" },
        "No pods found for this topology yet. Deploy it, then pods appear here within one collection interval."));
    }
  }

  window.Tandem = Object.assign(window.Tandem || {}, { pdGraph: { render: render, renderLinks: renderLinks } });
})();
