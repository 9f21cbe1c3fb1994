// Rebalancing panel: while a rebalance runs, re-fetch the panel every 2 s so each move shows as it happens.
(function () {
  "use strict";
  function refresh() {
    const panel = document.getElementById("rebalancing");
    if (!panel || (panel.dataset.active !== "true" && (panel.dataset.planner || "off") === "off")) return;
    fetch(panel.dataset.panelUrl, { headers: { "X-Requested-With": "fetch" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        const holder = document.createElement("div");
        holder.innerHTML = html;
        const fresh = holder.querySelector("#rebalancing");
        if (fresh) panel.replaceWith(fresh);
      })
      .catch(function () {});
  }
  setInterval(refresh, 2000);
})();
