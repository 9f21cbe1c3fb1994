// Keys pages: copy buttons (the shown-once dialog), and the create form's scopes follow the chosen kind.
(function () {
  "use strict";
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) { return navigator.clipboard.writeText(text); }
    return new Promise(function (resolve, reject) {
      const area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.className = "offscreen";
      document.body.appendChild(area);
      area.select();
      const ok = document.execCommand("copy");
      document.body.removeChild(area);
      if (ok) { resolve(); } else { reject(new Error("copy refused")); }
    });
  }
  function selectText(el) {
    const range = document.createRange();
    range.selectNodeContents(el);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }
  function wireCopy(button) {
    const label = button.textContent;
    button.addEventListener("click", function () {
      const source = document.getElementById(button.dataset.copy);
      if (!source) { return; }
      copyText(source.textContent).then(function () {
        button.textContent = "Copied";
        button.classList.add("copied");
        window.setTimeout(function () { button.textContent = label; button.classList.remove("copied"); }, 2500);
      }, function () {
        selectText(source);
        button.textContent = "Selected: press Ctrl+C";
      });
    });
  }
  // An inference key holds only `inference`; a management key anything else its owner's role allows.
  function wireKind(select) {
    const boxes = document.querySelectorAll("#field-scopes input[type=checkbox]");
    function fit() {
      const inference = select.value === "inference";
      let any = false;
      boxes.forEach(function (box) {
        const fits = inference ? box.value === "inference" : box.value !== "inference";
        box.disabled = !fits;
        if (!fits) { box.checked = false; }
        box.closest("label").classList.toggle("unfit", !fits);
        any = any || box.checked;
      });
      if (inference && !any) {
        boxes.forEach(function (box) { if (box.value === "inference") { box.checked = true; } });
      }
    }
    select.addEventListener("change", fit);
    fit();
  }
  function start() {
    document.querySelectorAll("button[data-copy]").forEach(wireCopy);
    const kind = document.getElementById("id_kind");
    if (kind) { wireKind(kind); }
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
