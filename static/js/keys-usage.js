// The key page's usage charts (uPlot): requests and tokens per hour, from the page's JSON data block.
(function () {
  "use strict";
  const SERIES = {
    requests: [{ label: "requests", stroke: "#2f5bd3", fill: "rgba(47, 91, 211, 0.18)" },
               { label: "refused", stroke: "#c62828", fill: "rgba(198, 40, 40, 0.18)", field: "denied" }],
    tokens: [{ label: "tokens", stroke: "#0f7b8a", fill: "rgba(15, 123, 138, 0.18)" }],
  };
  function start() {
    const block = document.getElementById("key-usage-data");
    if (!block || !window.uPlot) { return; }
    const data = JSON.parse(block.textContent);
    document.querySelectorAll(".usage-chart").forEach(function (el) {
      const defs = SERIES[el.dataset.series] || [];
      const bars = window.uPlot.paths.bars({ size: [0.7, 24] });
      const series = [{}].concat(defs.map(function (d) {
        return { label: d.label, stroke: d.stroke, fill: d.fill, width: 1, paths: bars, points: { show: false } };
      }));
      const values = [data.hours].concat(defs.map(function (d) { return data[d.field || el.dataset.series]; }));
      const opts = {
        title: el.dataset.title,
        width: Math.max(el.clientWidth, 280),
        height: 200,
        series: series,
        scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, Math.max(max, 1) * 1.1]; } } },
        axes: [{ label: "time (local)", labelSize: 16, size: 58, labelGap: 4 }, { size: 60 }],
      };
      new window.uPlot(opts, values, el);
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
