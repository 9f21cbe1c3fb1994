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
