// Removal progress: reads the delete job from the API every second until it has finished.
(function () {
  "use strict";
  var box = document.getElementById("removal");
  if (!box) { return; }
  var FINAL = { succeeded: true, failed: true, rolled_back: true };
  var LABEL = { queued: "Queued", preflight: "Preflight", applying: "Applying", waiting: "Waiting for ready", succeeded: "Succeeded", failed: "Failed", rolled_back: "Rolled back" };

  function render(job) {
    var state = box.querySelector("[data-role=state]");
    state.className = "state state-" + job.state;
    state.textContent = LABEL[job.state] || job.state;
    box.dataset.state = job.state;
    var list = box.querySelector("[data-role=steps]");
    list.textContent = "";
    (job.steps || []).forEach(function (s) {
      var li = document.createElement("li");
      li.className = "step";
      var t = document.createElement("time");
      t.dateTime = s.time;
      t.textContent = new Date(s.time).toLocaleTimeString();
      var badge = document.createElement("span");
      badge.className = "state state-" + s.state;
      badge.textContent = LABEL[s.state] || s.state;
      li.appendChild(t);
      li.appendChild(document.createTextNode(" "));
      li.appendChild(badge);
      li.appendChild(document.createTextNode(" " + s.message));
      list.appendChild(li);
    });
    box.querySelector("[data-role=done]").hidden = job.state !== "succeeded";
    box.querySelector("[data-role=failed]").hidden = job.state !== "failed";
  }

  function poll() {
    if (FINAL[box.dataset.state]) { return; }
    window.fetch(box.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (job) { if (job) { render(job); } window.setTimeout(poll, 1000); })
      .catch(function () { window.setTimeout(poll, 2000); });
  }
  poll();
})();
