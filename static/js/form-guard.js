// Every form that posts text: a body larger than the server reads (DATA_UPLOAD_MAX_MEMORY_SIZE, on
// <body data-upload-limit>) is stopped before it is sent, with the reason next to the largest text field,
// so nothing typed or pasted is lost (the server would refuse it with a 400 page and the text gone).
(function () {
  "use strict";
  function bytes(text) { return new Blob([text]).size; }
  function mb(n) { return (n / 1048576).toFixed(1) + " MB"; }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var limit = parseInt(document.body.dataset.uploadLimit || "0", 10);
    if (!limit || !form || (form.method || "").toLowerCase() !== "post") { return; }
    var total = 0;
    var largest = null;
    var largestSize = -1;
    form.querySelectorAll("textarea, input:not([type=file]):not([type=checkbox]):not([type=radio])").forEach(function (el) {
      if (!el.name) { return; }
      var size = bytes(el.value);
      total += size;
      if (size > largestSize) { largest = el; largestSize = size; }
    });
    var old = form.querySelector("[data-too-large]");
    if (old) { old.remove(); }
    if (total <= limit - 4096) { return; }  // room for the field names and the CSRF token
    event.preventDefault();
    event.stopImmediatePropagation();
    var note = document.createElement("div");
    note.className = "alert alert-error";
    note.setAttribute("role", "alert");
    note.setAttribute("data-too-large", "");
    note.textContent = "Not sent: this form holds " + mb(total) + " of text and Tandem reads at most " +
      mb(limit) + " in one form. Nothing was lost: shorten it (for YAML, " +
      "import fewer objects at a time) and send again.";
    (largest || form).insertAdjacentElement("beforebegin", note);
    note.scrollIntoView({ block: "center" });
  }, true);
})();
