// Gateway panel: re-fetched when a verification run or the circuit breaker changes (websocket), and every
// two seconds while a run is queued or running, so its progress shows without a reload. A breaker
// change also tells the traffic charts (gateway-charts.js) to re-read their series.
(function () {
  "use strict";

  function refresh(panel) {
    if (panel.dataset.refreshing) { return; }
    panel.dataset.refreshing = "1";
    window.fetch(panel.dataset.panelUrl, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        delete panel.dataset.refreshing;
        if (!html) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.querySelector(".gateway-panel");
        if (fresh) {
          // The charts stay (they re-read their own data); the parts around them are replaced.
          fresh.querySelectorAll("[data-refresh]").forEach(function (part) {
            var mine = panel.querySelector('[data-refresh="' + part.dataset.refresh + '"]');
            if (!mine) { return; }
            // A form's answer was shown once; the fresh copy has none, so it stays.
            part.querySelectorAll("[data-answer]").forEach(function (slot) {
              var kept = mine.querySelector('[data-answer="' + slot.dataset.answer + '"]');
              if (kept && !slot.children.length) { slot.innerHTML = kept.innerHTML; }
            });
            mine.innerHTML = part.innerHTML;
          });
          panel.dataset.running = fresh.dataset.running || "";
        }
      })
      .catch(function () { delete panel.dataset.refreshing; });
  }

  function init(panel) {
    if (window.Tandem && window.Tandem.live) {
      window.Tandem.live("/ws/topologies/" + panel.dataset.topology + "/", {
        onMessage: function (msg) {
          if (msg && (msg.kind === "gateway.probe" || msg.kind === "gateway.breaker")) { refresh(panel); }
          if (msg && msg.kind === "gateway.breaker") { document.dispatchEvent(new CustomEvent("gateway:changed")); }
        },
      });
    }
    window.setInterval(function () { if (panel.dataset.running) { refresh(panel); } }, 2000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".gateway-panel").forEach(init);
  });
})();
