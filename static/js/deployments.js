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

  // A step's message as the server writes it (plain_words): `quoted` names as code, never backticks.
  function setWords(el, text) {
    el.textContent = "";
    String(text).split("`").forEach(function (part, i) {
      if (!part) { return; }
      if (i % 2) { var code = document.createElement("code"); code.textContent = part; el.appendChild(code); }
      else { el.appendChild(document.createTextNode(part)); }
    });
  }

  // What a person typed or chose in the panel's forms and has not sent yet survives a refresh.
  function typedValues(panel) {
    var typed = [];
    panel.querySelectorAll("input[id], select[id], textarea[id]").forEach(function (el) {
      var changed = el.tagName === "SELECT"
        ? el.selectedIndex !== defaultIndex(el)
        : (el.type === "checkbox" || el.type === "radio") ? el.checked !== el.defaultChecked : el.value !== el.defaultValue;
      if (changed || el === document.activeElement) {
        typed.push({ id: el.id, value: el.value, checked: el.checked, focused: el === document.activeElement });
      }
    });
    return typed;
  }

  // The option a select shows before anyone chooses: the last one marked selected, else the first.
  function defaultIndex(select) {
    var index = 0;
    Array.prototype.forEach.call(select.options, function (o, i) { if (o.defaultSelected) { index = i; } });
    return index;
  }

  function restoreTyped(panel, typed) {
    typed.forEach(function (t) {
      var el = document.getElementById(t.id);
      if (!el || !panel.contains(el)) { return; }
      // A choice the fresh panel no longer offers (a revision that now runs) is not forced: the select
      // would show nothing.
      if (el.tagName === "SELECT" && !Array.prototype.some.call(el.options, function (o) { return o.value === t.value; })) { return; }
      if (el.type === "checkbox" || el.type === "radio") { el.checked = t.checked; } else { el.value = t.value; }
      if (t.focused) { el.focus(); }
    });
  }

  // One fetch at a time; a request that arrives meanwhile runs once the current one is done, so the
  // last state of a fast deployment is never lost.
  function refresh(panel) {
    if (panel.dataset.refreshing) { panel.dataset.again = "1"; return; }
    panel.dataset.refreshing = "1";
    function done() {
      delete panel.dataset.refreshing;
      if (panel.dataset.again) { delete panel.dataset.again; refresh(panel); }
    }
    window.fetch(panel.dataset.panelUrl, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        // A message that asked for another read arrived meanwhile: this answer is older than what the
        // panel already shows (a finished job would flash back to running), so only the next one is used.
        if (html && !panel.dataset.again) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          var fresh = doc.querySelector(".deploy-panel");
          if (fresh) {
            // The answer of the form sent last stays (the fresh copy has none: it was shown once).
            var answer = panel.querySelector("[data-answer]");
            var slot = fresh.querySelector("[data-answer]");
            if (answer && slot && !slot.children.length) { slot.innerHTML = answer.innerHTML; }
            var typed = typedValues(panel);
            panel.innerHTML = fresh.innerHTML;
            restoreTyped(panel, typed);
          }
        }
        document.dispatchEvent(new CustomEvent("tandem:topology-changed", { detail: { topology: panel.dataset.topology } }));
        done();
      })
      .catch(done);
  }

  function update(panel, msg) {
    var current = panel.querySelector(".deploy-current");
    if (!current || String(current.dataset.deployment) !== String(msg.id)) { refresh(panel); return; }
    current.dataset.state = msg.state;
    setState(current.querySelector("[data-role=state]"), msg.state, msg.state_label);
    var bar = current.querySelector("[data-role=progress]");
    if (bar) { bar.value = msg.percent; setState(bar, msg.state); }
    var count = current.querySelector("[data-role=count]");
    var counted = count ? count.textContent : "";
    if (count) { count.textContent = msg.ready + "/" + msg.total + " pods ready"; }
    var text = current.querySelector("[data-role=message]");
    if (text && msg.message) { setWords(text, msg.message); }
    if (FINAL[msg.state]) {
      // A finished job has nothing to cancel: the button goes now, not when the fresh panel arrives.
      var cancel = current.querySelector("form[action$='/cancel/']");
      if (cancel) { cancel.remove(); }
      refresh(panel);
    } else if (count && count.textContent !== counted) {
      refresh(panel);  // the pod rows follow the count ("Ready" as soon as it says so)
    }
  }

  function init(panel) {
    if (!window.Tandem || !window.Tandem.live) { return; }
    window.Tandem.live("/ws/topologies/" + panel.dataset.topology + "/", {
      onMessage: function (msg) {
        if (!msg) { return; }
        if (msg.kind === "deployment") { update(panel, msg); }
        else if (msg.kind === "drift") { refresh(panel); }
      },
      // Events sent before the socket joined are lost: catch up once it is live (after a reconnect, or
      // when the page was rendered while a deployment was still running).
      onState: function (state, info) {
        if (state !== "live") { return; }
        var current = panel.querySelector(".deploy-current");
        var running = current && !FINAL[current.dataset.state];
        if (running || (info && info.reconnected)) { refresh(panel); }
      },
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".deploy-panel").forEach(init);
  });
})();
