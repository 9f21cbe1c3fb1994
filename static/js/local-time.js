// <time data-local datetime="ISO">: shown in the browser's time zone, with UTC on hover, so every time on
// a page reads in one zone.
(function () {
  "use strict";
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  document.querySelectorAll("time[data-local]").forEach(function (el) {
    var when = new Date(el.getAttribute("datetime"));
    if (isNaN(when.getTime())) { return; }
    el.textContent = when.getFullYear() + "-" + pad(when.getMonth() + 1) + "-" + pad(when.getDate()) + " " +
      pad(when.getHours()) + ":" + pad(when.getMinutes()) + ":" + pad(when.getSeconds());
    el.title = when.toISOString().replace("T", " ").replace(/\.\d+Z$/, "") + " UTC";
  });
})();
