// The run page updates itself while the run is active: at most once per data-refresh-ms it
// fetches the same page and patches <main id="live"> in place: only the text and attributes
// that changed are written, nodes are added or removed only where the page's structure
// changed. The element that has focus, the scroll position and the <details> the user opened
// or closed therefore stay as they were. It stops when the fresh page no longer asks for
// refreshes (the run finished). No inline script anywhere: the CSP forbids it.
//
// Holding the refresh: while <body> has a data-paused attribute (document.body.dataset.paused
// = "1"), no fetch starts and the answer of one already under way is dropped unapplied, so the
// page stays exactly as it is (what a test running axe-core on the page needs); deleting the
// attribute resumes the refresh at the next tick.
//
// The graph: a step's box links to `#step-NAME`, whose <details> is opened when followed;
// the "fit" button scales a wide graph to the page's width and back (a flag on <body>, which
// the refresh leaves alone).
(function () {
  "use strict";
  function openStep() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (target && target.nodeName === "DETAILS") {
      target.open = true;
    }
  }
  window.addEventListener("hashchange", openStep);
  openStep();
  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("button.dag-fit")) {
      if (document.body.hasAttribute("data-dag-fit")) {
        document.body.removeAttribute("data-dag-fit");
      } else {
        document.body.setAttribute("data-dag-fit", "1");
      }
    }
  });
})();

(function () {
  "use strict";
  var ms = Number(document.body.dataset.refreshMs || 0);
  if (!ms) {
    return;
  }
  ms = Math.max(ms, 1000);
  var refreshed = 0;

  // Two nodes are "the same" (patched, not replaced) when kind, tag, id and step agree.
  function same(a, b) {
    if (a.nodeType !== b.nodeType || a.nodeName !== b.nodeName) {
      return false;
    }
    if (a.nodeType !== Node.ELEMENT_NODE) {
      return true;
    }
    return (a.id || "") === (b.id || "") &&
      (a.getAttribute("data-step") || "") === (b.getAttribute("data-step") || "");
  }

  function patchAttributes(cur, fresh) {
    var keepOpen = cur.nodeName === "DETAILS";  // the user's choice, not the server's
    Array.prototype.slice.call(cur.attributes).forEach(function (a) {
      if (!fresh.hasAttribute(a.name) && !(keepOpen && a.name === "open")) {
        cur.removeAttribute(a.name);
      }
    });
    Array.prototype.forEach.call(fresh.attributes, function (a) {
      if (keepOpen && a.name === "open") {
        return;
      }
      if (cur.getAttribute(a.name) !== a.value) {
        cur.setAttribute(a.name, a.value);
      }
    });
  }

  function patch(cur, fresh) {
    if (cur.nodeType !== Node.ELEMENT_NODE) {
      if (cur.nodeValue !== fresh.nodeValue) {
        cur.nodeValue = fresh.nodeValue;
      }
      return;
    }
    patchAttributes(cur, fresh);
    var mine = Array.prototype.slice.call(cur.childNodes);
    var theirs = Array.prototype.slice.call(fresh.childNodes);
    theirs.forEach(function (node, i) {
      if (i >= mine.length) {
        cur.appendChild(document.importNode(node, true));
      } else if (same(mine[i], node)) {
        patch(mine[i], node);
      } else {
        cur.replaceChild(document.importNode(node, true), mine[i]);
      }
    });
    for (var j = theirs.length; j < mine.length; j++) {
      cur.removeChild(mine[j]);
    }
  }

  function paused() {
    return document.body.hasAttribute("data-paused");
  }

  function tick() {
    if (paused()) {
      window.setTimeout(tick, ms);
      return;
    }
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (resp) {
        if (!resp.ok || resp.redirected) {
          throw new Error("refresh failed: " + resp.status);
        }
        return resp.text();
      })
      .then(function (html) {
        if (paused()) {  // held while the answer was on its way: leave the page as it is
          window.setTimeout(tick, ms);
          return;
        }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("live");
        var current = document.getElementById("live");
        if (fresh && current) {
          patch(current, fresh);
          document.title = doc.title;
        }
        refreshed += 1;
        document.body.dataset.refreshed = String(refreshed);  // how many patches so far
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
