// What-if page: live progress of the shown run from the topology's websocket ("whatif" events); the page
// reloads when the run finishes, so the result table is rendered by the server. A poll of the API every
// 3 s covers a socket that cannot connect.
(function () {
  "use strict";
  function start() {
    const section = document.querySelector("[data-whatif-run]");
    if (!section || !window.Tandem) { return; }
    const id = Number(section.dataset.whatifRun);
    const active = section.dataset.state === "queued" || section.dataset.state === "running";
    if (!active) { return; }
    const bar = section.querySelector("[data-progress]");
    const step = section.querySelector("[data-step]");
    const badge = section.querySelector("[data-run-state]");
    let done = false;
    function show(ev) {
      if (done) { return; }
      if (bar) { bar.value = ev.progress; }
      if (step) { step.textContent = ev.step; }
      if (badge) { badge.textContent = ev.state.charAt(0).toUpperCase() + ev.state.slice(1); badge.className = "state state-" + ev.state; }
      if (ev.state !== "queued" && ev.state !== "running") { done = true; window.location.reload(); }
    }
    window.Tandem.live(section.dataset.ws, {
      onMessage: function (data) { if (data.kind === "whatif" && data.id === id) { show(data); } },
    });
    const poll = window.setInterval(function () {
      if (done) { window.clearInterval(poll); return; }
      fetch("/api/v1/what-if-runs/" + id + "/", { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (run) { if (run) { show(run); } })
        .catch(function () {});
    }, 3000);
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
