// <time data-local datetime="ISO">: shown in the browser's time zone, with UTC on hover, so every time on
// a page reads in one zone (the charts' axes are local too). data-local="minutes" leaves out the seconds.
// [data-local-title="ISO"]: the same for a hover title (a countdown whose date is on hover).
(function () {
  "use strict";
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function utc(when) { return when.toISOString().replace("T", " ").replace(/:\d\d\.\d+Z$/, "") + " UTC"; }
  document.querySelectorAll("[data-local-title]").forEach(function (el) {
    var when = new Date(el.getAttribute("data-local-title"));
    if (isNaN(when.getTime())) { return; }
    el.title = when.getFullYear() + "-" + pad(when.getMonth() + 1) + "-" + pad(when.getDate()) + " " +
      pad(when.getHours()) + ":" + pad(when.getMinutes()) + " your time (" + utc(when) + ")";
  });
  document.querySelectorAll("time[data-local]").forEach(function (el) {
    var when = new Date(el.getAttribute("datetime"));
    if (isNaN(when.getTime())) { return; }
    el.textContent = when.getFullYear() + "-" + pad(when.getMonth() + 1) + "-" + pad(when.getDate()) + " " +
      pad(when.getHours()) + ":" + pad(when.getMinutes()) +
      (el.getAttribute("data-local") === "minutes" ? "" : ":" + pad(when.getSeconds()));
    el.title = when.toISOString().replace("T", " ").replace(/\.\d+Z$/, "") + " UTC";
  });
})();

// Filters in the same zone as the times shown: <input type=datetime-local data-utc-input> holds UTC in the
// page (what the server filters on); here it shows and takes the browser's time, and is sent as UTC with
// its offset. [data-tz-name] says which zone that is (it reads "(UTC)" without script, and so does all).
(function () {
  "use strict";
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function localValue(d) {
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" + pad(d.getHours()) + ":" + pad(d.getMinutes());
  }
  function zoneName(short) {
    var minutes = -new Date().getTimezoneOffset();
    var offset = "UTC" + (minutes >= 0 ? "+" : "-") + pad(Math.floor(Math.abs(minutes) / 60)) + ":" + pad(Math.abs(minutes) % 60);
    var name = "";
    try { name = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { name = ""; }
    return "(your time, " + (name && name !== "UTC" && !short ? name + ", " : "") + offset + ")";
  }
  var inputs = document.querySelectorAll("input[data-utc-input]");
  if (!inputs.length && !document.querySelector("time[data-local]")) { return; }
  document.querySelectorAll("[data-tz-name]").forEach(function (el) {
    el.textContent = zoneName(el.getAttribute("data-tz-name") === "short");
    el.title = "Times are shown and filtered in this zone; hover a time for UTC";
  });
  inputs.forEach(function (input) {
    var raw = input.getAttribute("value");
    if (!raw) { return; }
    var when = new Date(/(Z|[+-]\d\d:?\d\d)$/.test(raw) ? raw : raw + "Z");
    if (!isNaN(when.getTime())) { input.value = localValue(when); }
  });
  document.querySelectorAll("form").forEach(function (form) {
    var mine = form.querySelectorAll("input[data-utc-input]");
    if (!mine.length) { return; }
    form.addEventListener("submit", function () {
      form.querySelectorAll("input[data-utc-sent]").forEach(function (el) { el.remove(); });
      mine.forEach(function (input) {
        if (!input.value || !input.name) { return; }
        var when = new Date(input.value);  // a datetime-local value is read in the browser's zone
        if (isNaN(when.getTime())) { return; }
        var sent = document.createElement("input");
        sent.type = "hidden";
        sent.name = input.name;
        sent.value = when.toISOString().replace(/\.\d+Z$/, "Z");
        sent.setAttribute("data-utc-sent", "");
        input.dataset.name = input.name;
        input.removeAttribute("name");
        form.appendChild(sent);
      });
    });
    window.addEventListener("pageshow", function () {
      mine.forEach(function (input) { if (input.dataset.name) { input.name = input.dataset.name; } });
      form.querySelectorAll("input[data-utc-sent]").forEach(function (el) { el.remove(); });
    });
  });
})();
