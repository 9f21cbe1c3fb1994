// Topology page: after a deploy, rollback, scale or failure (the deployments panel says so with a
// "tandem:topology-changed" event) every other part that names a revision is re-read from the server,
// so the header, summary, roles and revisions list agree with the deployments card without a reload. The
// card's own revision line is one of those parts: the panel re-reads itself on its own, a moment apart
// from the page, and its line must come from the same answer as the summary's or the two can disagree.
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

// The section bar marks the section being read (the last one whose top has passed under the bar).
(function () {
  "use strict";
  var bar = document.querySelector("[data-section-bar]");
  if (!bar) { return; }
  var links = Array.prototype.slice.call(bar.querySelectorAll("a[data-section]"));
  function mark() {
    var current = links[0];
    links.forEach(function (a) {
      var target = document.getElementById(a.dataset.section);
      if (target && target.getBoundingClientRect().top <= bar.offsetHeight + 24) { current = a; }
    });
    if (current.getAttribute("aria-current") === "true") { return; }
    links.forEach(function (a) {
      if (a === current) { a.setAttribute("aria-current", "true"); } else { a.removeAttribute("aria-current"); }
    });
    // On a phone the bar scrolls sideways: keep the marked section in sight.
    var left = current.offsetLeft;
    if (left < bar.scrollLeft || left + current.offsetWidth > bar.scrollLeft + bar.clientWidth) {
      bar.scrollLeft = Math.max(0, left - 12);
    }
  }
  var queued = false;
  window.addEventListener("scroll", function () {
    if (queued) { return; }
    queued = true;
    window.requestAnimationFrame(function () { queued = false; mark(); });
  }, { passive: true });
  window.addEventListener("hashchange", mark);
  mark();
})();
