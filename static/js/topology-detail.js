// Topology page: after a deploy, rollback, scale or failure (the deployments panel says so with a
// "tandem:topology-changed" event) every other part that names a revision is re-read from the server,
// so the header, summary, roles and revisions list agree with the deployments card without a reload.
(function () {
  "use strict";
  var busy = false;
  var again = false;

  function reload() {
    if (busy) { again = true; return; }
    busy = true;
    function done() {
      busy = false;
      if (again) { again = false; reload(); }
    }
    window.fetch(window.location.pathname + window.location.search, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          document.querySelectorAll("[data-live-part]").forEach(function (el) {
            var fresh = doc.querySelector('[data-live-part="' + el.dataset.livePart + '"]');
            if (fresh) { el.innerHTML = fresh.innerHTML; }
          });
        }
        done();
      })
      .catch(done);
  }

  document.addEventListener("tandem:topology-changed", reload);
})();
