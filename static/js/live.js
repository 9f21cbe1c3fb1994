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
