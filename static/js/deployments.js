// Deployments panel: live progress from /ws/topologies/<id>/ ("kind": "deployment" / "drift" messages);
// when a deployment finishes or drift changes, the panel is re-fetched from the server.
(function () {
  "use strict";
  var FINAL = { succeeded: true, failed: true, rolled_back: true };
  var STATES = ["queued", "preflight", "applying", "waiting", "succeeded", "failed", "rolled_back"];

  function setState(el, state, label) {
    if (!el) { return; }
    STATES.forEach(function (s) { el.classList.remove("state-" + s); });
    el.classList.add("state-" + state);
    if (label !== undefined) { el.textContent = label; }
  }

  function refresh(panel) {
    if (panel.dataset.refreshing) { return; }
    panel.dataset.refreshing = "1";
    window.fetch(panel.dataset.panelUrl, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        delete panel.dataset.refreshing;
        if (!html) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.querySelector(".deploy-panel");
        if (fresh) { panel.innerHTML = fresh.innerHTML; }
      })
      .catch(function () { delete panel.dataset.refreshing; });
  }

  function update(panel, msg) {
    var current = panel.querySelector(".deploy-current");
    if (!current || String(current.dataset.deployment) !== String(msg.id)) { refresh(panel); return; }
    current.dataset.state = msg.state;
    setState(current.querySelector("[data-role=state]"), msg.state, msg.state_label);
    var bar = current.querySelector("[data-role=progress]");
    if (bar) { bar.value = msg.percent; setState(bar, msg.state); }
    var count = current.querySelector("[data-role=count]");
    if (count) { count.textContent = msg.ready + "/" + msg.total + " pods ready"; }
    var text = current.querySelector("[data-role=message]");
    if (text && msg.message) { text.textContent = msg.message; }
    if (FINAL[msg.state]) { refresh(panel); }
  }

  function init(panel) {
    if (!window.Tandem || !window.Tandem.live) { return; }
    window.Tandem.live("/ws/topologies/" + panel.dataset.topology + "/", {
      onMessage: function (msg) {
        if (!msg) { return; }
        if (msg.kind === "deployment") { update(panel, msg); }
        else if (msg.kind === "drift") { refresh(panel); }
      },
      onState: function (state, info) { if (state === "live" && info && info.reconnected) { refresh(panel); } },
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".deploy-panel").forEach(init);
  });
})();
