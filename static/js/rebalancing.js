// Rebalancing panel: while a rebalance runs or the planner is on, re-read the panel every 2 s so each move
// and decision shows as it happens. Only its status parts ([data-refresh]) are replaced: the forms, with
// what a person is typing, and the answer of the last form sent stay as they are.
(function () {
  "use strict";
  function refresh() {
    const panel = document.getElementById("rebalancing");
    if (!panel || (panel.dataset.active !== "true" && (panel.dataset.planner || "off") === "off")) return;
    fetch(panel.dataset.panelUrl, { headers: { "X-Requested-With": "fetch" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        const fresh = new DOMParser().parseFromString(html, "text/html").querySelector("#rebalancing");
        if (!fresh) return;
        fresh.querySelectorAll("[data-refresh]").forEach(function (part) {
          const mine = panel.querySelector('[data-refresh="' + part.dataset.refresh + '"]');
          if (mine) mine.innerHTML = part.innerHTML;
        });
        panel.dataset.planner = fresh.dataset.planner || "off";
        if (fresh.dataset.active) panel.dataset.active = fresh.dataset.active; else delete panel.dataset.active;
      })
      .catch(function () {});
  }
  setInterval(refresh, 2000);

  // Switching a pod means to the other role: choosing a pod proposes the role it does not serve.
  document.addEventListener("change", function (event) {
    const pod = event.target;
    if (!pod.matches || !pod.matches("#rebalancing select[name=instance]")) return;
    const chosen = pod.options[pod.selectedIndex];
    const target = pod.form && pod.form.querySelector("[data-switch-target]");
    if (chosen && target && chosen.dataset.serving) {
      target.value = chosen.dataset.serving === "prefill" ? "decode" : "prefill";
    }
  });
})();
