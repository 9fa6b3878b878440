// redcron dashboard: live refresh of #live, times in the browser's zone,
// confirmations and "select all".  Plain JavaScript, no dependencies.
(function () {
  "use strict";

  var LIVE_HEADER = "X-Redcron-Live";

  function localTimes(root) {
    var nodes = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < nodes.length; i++) {
      var t = nodes[i];
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d.getTime())) continue;
      t.textContent = d.toLocaleString(undefined, {
        year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", second: "2-digit"
      });
    }
  }

  // what the user did inside #live that a refresh must not undo
  function remember(live) {
    var state = { checked: [], open: [], scroll: [] };
    var boxes = live.querySelectorAll("input[type=checkbox]");
    for (var i = 0; i < boxes.length; i++) {
      if (boxes[i].checked) state.checked.push(boxes[i].name + "=" + boxes[i].value);
    }
    var details = live.querySelectorAll("details[id]");
    for (var j = 0; j < details.length; j++) {
      if (details[j].open) state.open.push(details[j].id);
    }
    var panes = live.querySelectorAll("[data-keep-scroll][id]");
    for (var k = 0; k < panes.length; k++) {
      state.scroll.push([panes[k].id, panes[k].scrollTop]);
    }
    return state;
  }

  function restore(live, state) {
    var boxes = live.querySelectorAll("input[type=checkbox]");
    for (var i = 0; i < boxes.length; i++) {
      boxes[i].checked = state.checked.indexOf(boxes[i].name + "=" + boxes[i].value) >= 0;
    }
    for (var j = 0; j < state.open.length; j++) {
      var d = document.getElementById(state.open[j]);
      if (d) d.open = true;
    }
    for (var k = 0; k < state.scroll.length; k++) {
      var pane = document.getElementById(state.scroll[k][0]);
      if (pane) pane.scrollTop = state.scroll[k][1];
    }
  }

  function busy(live) {
    var el = document.activeElement;
    return el && live.contains(el) && /^(INPUT|SELECT|TEXTAREA)$/.test(el.tagName) &&
      el.type !== "checkbox" && el.type !== "submit";
  }

  function startLive() {
    var live = document.getElementById("live");
    if (!live || !window.fetch) return;
    var every = parseInt(live.getAttribute("data-refresh-ms"), 10) || 1500;
    var done = 0;
    function next() { window.setTimeout(tick, every); }
    function tick() {
      if (document.hidden || busy(live)) return next();
      var headers = {};
      headers[LIVE_HEADER] = "1";
      fetch(window.location.href, { headers: headers, credentials: "same-origin", cache: "no-store" })
        .then(function (r) {
          if (r.status === 401) { window.location.reload(); return null; }
          return r.ok ? r.text() : null;
        })
        .then(function (html) {
          if (html === null) return;
          var state = remember(live);
          live.innerHTML = html;
          restore(live, state);
          localTimes(live);
          done += 1;
          document.body.setAttribute("data-refreshes", String(done));
        })
        .catch(function () { /* the server is restarting: try again next time */ })
        .then(next);
    }
    document.body.setAttribute("data-refreshes", "0");
    next();
  }

  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    var text = (button && button.getAttribute("data-confirm")) ||
      event.target.getAttribute("data-confirm");
    if (text && !window.confirm(text)) event.preventDefault();
  });

  document.addEventListener("change", function (event) {
    var all = event.target;
    if (!all.matches || !all.matches("input[data-select-all]")) return;
    var form = all.form || document;
    var boxes = form.querySelectorAll("input[type=checkbox][name='" + all.getAttribute("data-select-all") + "']");
    for (var i = 0; i < boxes.length; i++) boxes[i].checked = all.checked;
  });

  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    startLive();
  });
})();
