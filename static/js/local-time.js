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
