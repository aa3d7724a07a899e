// The run page updates itself while the run is active: at most once per data-refresh-ms it
// fetches the same page and swaps <main id="live">. It stops when the fresh page no longer
// asks for refreshes (the run finished). No inline script anywhere: the CSP forbids it.
(function () {
  "use strict";
  var ms = Number(document.body.dataset.refreshMs || 0);
  if (!ms) {
    return;
  }
  ms = Math.max(ms, 1000);
  function tick() {
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (resp) {
        if (!resp.ok || resp.redirected) {
          throw new Error("refresh failed: " + resp.status);
        }
        return resp.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("live");
        var current = document.getElementById("live");
        if (fresh && current) {
          // keep the <details> the user opened or closed as they were
          var open = {};
          current.querySelectorAll("details[data-step]").forEach(function (d) {
            open[d.dataset.step] = d.open;
          });
          fresh.querySelectorAll("details[data-step]").forEach(function (d) {
            if (d.dataset.step in open) {
              d.open = open[d.dataset.step];
            }
          });
          current.replaceWith(document.importNode(fresh, true));
        }
        if (doc.body.dataset.refreshMs) {
          window.setTimeout(tick, ms);
        } else {
          delete document.body.dataset.refreshMs;
        }
      })
      .catch(function () {
        window.setTimeout(tick, ms * 5);
      });
  }
  window.setTimeout(tick, ms);
})();
