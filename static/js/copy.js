// Copy buttons: <button data-copy="ELEMENT_ID"> copies that element's text and says so for a moment.
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
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    const label = button.textContent;
    button.addEventListener("click", function () {
      const source = document.getElementById(button.dataset.copy);
      if (!source) { return; }
      copyText(source.textContent).then(function () {
        button.textContent = "Copied";
      }, function () {
        button.textContent = "Select and copy by hand";
      });
      setTimeout(function () { button.textContent = label; }, 2000);
    });
  });
})();
