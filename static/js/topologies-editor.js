// Topology editor: show only the connector fields that matter for the chosen connector.
(function () {
  "use strict";
  function sync(form) {
    const select = form.querySelector('[name="connector.type"]');
    if (!select) { return; }
    const chosen = select.value;
    form.querySelectorAll("[data-show-for]").forEach(function (field) {
      const wanted = field.getAttribute("data-show-for").split(" ");
      field.hidden = wanted.indexOf(chosen) === -1;
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    const form = document.getElementById("topology-form");
    if (!form) { return; }
    sync(form);
    form.addEventListener("change", function (event) {
      if (event.target && event.target.name === "connector.type") { sync(form); }
    });
  });
})();

// Accelerator fields offer what the chosen cluster's nodes advertise (free and total), under each field too.
(function () {
  "use strict";
  function offer(form) {
    const cluster = form.querySelector('[name="cluster"]');
    const id = cluster ? cluster.value : "";
    const summary = document.querySelector('template[data-accelerator-summary="' + id + '"]');
    form.querySelectorAll("[data-accelerator-field]").forEach(function (input) {
      input.setAttribute("list", "accelerators-" + id);
      let note = input.parentElement.querySelector(".accel-offers");
      if (!note) {
        note = document.createElement("p");
        note.className = "help accel-offers";
        input.insertAdjacentElement("afterend", note);
      }
      note.textContent = "";
      if (summary) { note.appendChild(summary.content.cloneNode(true)); }
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    const form = document.getElementById("topology-form");
    if (!form) { return; }
    offer(form);
    form.addEventListener("change", function (event) {
      if (event.target && event.target.name === "cluster") { offer(form); }
    });
  });
})();
