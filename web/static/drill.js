// Switchyard console: live progress of a drill run. While the run is in
// progress (#run[data-drill-live]) the page fetches itself every second and
// swaps the run's region; the event stream of app.js announces only the
// override and audit changes, not the evidence a run gathers between them.
(function () {
  "use strict";
  function tick() {
    var el = document.querySelector("[data-drill-live]");
    if (!el) return;
    fetch(location.href, { headers: { "X-Live": "1" }, credentials: "same-origin" })
      .then(function (res) { if (!res.ok || res.redirected) throw new Error(res.status); return res.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("run");
        var cur = document.getElementById("run");
        if (fresh && cur) cur.replaceWith(document.importNode(fresh, true));
      })
      .catch(function () {})
      .then(function () { setTimeout(tick, 1000); });
  }
  setTimeout(tick, 1000);
})();
