// Notifications for the logged-in user on every page: budget alerts of their keys arrive on
// /ws/notifications/ and show as a toast that links to the key.
(function () {
  "use strict";
  const SHOWN_MS = 30000;
  function stack() {
    let el = document.getElementById("toasts");
    if (!el) {
      el = document.createElement("div");
      el.id = "toasts";
      el.className = "toasts";
      el.setAttribute("aria-live", "polite");
      document.body.appendChild(el);
    }
    return el;
  }
  function part(tag, cls, text) {
    const el = document.createElement(tag);
    el.className = cls;
    if (text) { el.textContent = text; }
    return el;
  }
  function budgetToast(msg) {
    const toast = part("div", "toast toast-budget", "");
    toast.setAttribute("role", "status");
    toast.dataset.key = msg.key || "";
    toast.appendChild(part("p", "toast-title", "Budget alert: " + (msg.percent || "?") + " % used"));
    toast.appendChild(part("p", "toast-body", msg.message || ""));
    const foot = part("div", "toast-foot", "");
    if (msg.key) {
      const link = part("a", "", "Open key " + (msg.name || ""));
      link.href = "/keys/" + encodeURIComponent(msg.key) + "/";
      foot.appendChild(link);
    }
    const close = part("button", "link", "Dismiss");
    close.type = "button";
    close.addEventListener("click", function () { toast.remove(); });
    foot.appendChild(close);
    toast.appendChild(foot);
    stack().appendChild(toast);
    window.setTimeout(function () { toast.remove(); }, SHOWN_MS);
  }
  function start() {
    const path = document.body.dataset.notifications;
    if (!path || !window.Tandem || !window.Tandem.live) { return; }
    window.Tandem.live(path, {
      onMessage: function (msg) { if (msg.type === "key.budget_alert") { budgetToast(msg); } },
      onState: function (state) { document.body.dataset.notificationsState = state; },
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
