// Tandem live helper: a websocket that reconnects with capped, jittered exponential backoff.
// Usage: const sock = Tandem.live("/ws/topologies/7/", {onMessage, onState});
(function () {
  "use strict";
  function live(path, opts) {
    const options = Object.assign({ minDelay: 500, maxDelay: 15000, onMessage: function () {}, onState: function () {} }, opts || {});
    let socket = null, attempt = 0, closedByUser = false, timer = null;
    const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    function connect() {
      options.onState(attempt === 0 ? "connecting" : "reconnecting");
      socket = new WebSocket(scheme + window.location.host + path);
      socket.onopen = function () { const wasReconnect = attempt > 0; attempt = 0; options.onState("live", { reconnected: wasReconnect }); };
      socket.onmessage = function (event) {
        let data; try { data = JSON.parse(event.data); } catch (e) { return; }
        options.onMessage(data);
      };
      socket.onclose = function (event) {
        if (closedByUser) { return; }
        options.onState("offline", { code: event.code });
        if (event.code === 4403 || event.code === 4401) { return; } // refused: retrying cannot help
        const delay = Math.min(options.maxDelay, options.minDelay * Math.pow(2, attempt));
        attempt += 1;
        timer = window.setTimeout(connect, delay / 2 + Math.random() * delay / 2);
      };
    }
    connect();
    return {
      send: function (obj) { if (socket && socket.readyState === 1) { socket.send(JSON.stringify(obj)); } },
      close: function () { closedByUser = true; window.clearTimeout(timer); if (socket) { socket.close(); } },
    };
  }
  window.Tandem = Object.assign(window.Tandem || {}, { live: live });
})();

// The live indicator in the top bar: heartbeats from the background worker arrive on /ws/system/.
// live = a heartbeat arrived within three intervals; stale = connected but the worker or scheduler
// is silent; offline = no connection to the server.
(function () {
  "use strict";
  function start() {
    const el = document.getElementById("live-indicator");
    if (!el || !window.Tandem) { return; }
    const label = el.querySelector(".live-label");
    let lastBeat = 0, intervalMs = 5000, connected = false;
    const words = {
      connecting: ["connecting", "Connecting to the live stream…"],
      live: ["live", "Background worker and scheduler are running; pages update live."],
      stale: ["no heartbeat", "Connected, but no heartbeat from the background worker or scheduler: live data and deploys are paused until they run again."],
      offline: ["offline", "No connection to the server; retrying."],
    };
    function show(state) {
      el.dataset.state = state;
      label.textContent = words[state][0];
      el.title = words[state][1];
    }
    function evaluate() {
      if (!connected) { return; }
      show(Date.now() - lastBeat <= intervalMs * 3 ? "live" : "stale");
    }
    window.Tandem.live(el.dataset.ws, {
      onState: function (state) {
        connected = state === "live";
        if (state === "offline" || state === "reconnecting") { show("offline"); } else if (connected) { evaluate(); }
      },
      onMessage: function (msg) {
        if (msg.kind !== "heartbeat") { return; }
        lastBeat = Date.now();
        if (msg.interval) { intervalMs = msg.interval * 1000; }
        el.dataset.lastBeat = msg.time;
        evaluate();
      },
    });
    window.setInterval(evaluate, 1000);
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
