// Tandem telemetry helpers shared by the overview and the topology live panel:
// number formats with units, smooth number tweening, and the "stale" watchdog.
(function () {
  "use strict";
  const DASH = "—";

  function isNum(v) { return typeof v === "number" && isFinite(v); }

  // Formatters take the value in the snapshot's unit (seconds, ratio 0..1, per second, count).
  const fmt = {
    percent: function (v) { return isNum(v) ? (v * 100).toFixed(1) + " %" : DASH; },
    seconds: function (v) {
      if (!isNum(v)) { return DASH; }
      const ms = v * 1000;
      if (ms >= 10000) { return (ms / 1000).toFixed(1) + " s"; }
      if (ms >= 1000) { return (ms / 1000).toFixed(2) + " s"; }
      return ms >= 100 ? ms.toFixed(0) + " ms" : ms.toFixed(1) + " ms";
    },
    ms: function (v) { return isNum(v) ? (v >= 100 ? v.toFixed(0) : v.toFixed(1)) + " ms" : DASH; },
    rate: function (v) { return isNum(v) ? Math.round(v).toLocaleString("en-US") + " tok/s" : DASH; },
    count: function (v) { return isNum(v) ? Math.round(v).toLocaleString("en-US") : DASH; },
    bytes: function (v) {
      if (!isNum(v)) { return DASH; }
      const units = ["B/s", "KB/s", "MB/s", "GB/s"];
      let i = 0;
      while (v >= 1000 && i < units.length - 1) { v /= 1000; i += 1; }
      return v.toFixed(v >= 100 ? 0 : 1) + " " + units[i];
    },
  };

  // Tween the number shown in `el` towards `target` (no flicker: tabular digits, eased over 450 ms).
  function tween(el, target, format) {
    const formatter = fmt[format] || fmt.count;
    if (el._tween) { window.cancelAnimationFrame(el._tween); el._tween = null; }
    const from = el._value;
    el.dataset.value = isNum(target) ? String(target) : "";
    if (!isNum(target) || !isNum(from) || from === target || document.hidden) {
      el._value = target;
      el.textContent = formatter(target);
      return;
    }
    const start = performance.now();
    const duration = 450;
    function step(now) {
      const t = Math.min(1, (now - start) / duration);
      const eased = 1 - Math.pow(1 - t, 3);
      el._value = from + (target - from) * eased;
      el.textContent = formatter(el._value);
      if (t < 1) { el._tween = window.requestAnimationFrame(step); } else { el._value = target; el._tween = null; }
    }
    el._tween = window.requestAnimationFrame(step);
  }

  // Calls onChange(isStale, secondsSinceLastData) when data stops (or resumes) arriving.
  function watchdog(staleAfterSeconds, onChange) {
    let last = Date.now();
    let stale = false;
    const timer = window.setInterval(function () {
      const age = (Date.now() - last) / 1000;
      const nowStale = age >= staleAfterSeconds;
      if (nowStale || nowStale !== stale) { onChange(nowStale, age); }
      stale = nowStale;
    }, 1000);
    return {
      beat: function () { last = Date.now(); if (stale) { stale = false; onChange(false, 0); } },
      stop: function () { window.clearInterval(timer); },
    };
  }

  function setState(el, prefix, state) {
    Array.from(el.classList).forEach(function (c) { if (c.indexOf(prefix) === 0) { el.classList.remove(c); } });
    el.classList.add(prefix + state);
  }

  function readJson(id) {
    const node = document.getElementById(id);
    if (!node) { return null; }
    try { return JSON.parse(node.textContent); } catch (e) { return null; }
  }

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) { node.textContent = text; }
    return node;
  }

  window.Tandem = Object.assign(window.Tandem || {}, {
    telemetry: { fmt: fmt, tween: tween, watchdog: watchdog, setState: setState, readJson: readJson, el: el, isNum: isNum },
  });
})();
