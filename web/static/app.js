// Switchyard console: live regions, small form helpers. No build step.
(function () {
  "use strict";

  // ---- Live updates: an event stream says "something changed"; the page
  // fetches itself and swaps every [data-live] region that is not in use.
  // Pages that show fleet data ask for a stream with "fleet" events too
  // (instance acks and reports, at most one a second); others never get them.
  var liveURL = document.body.getAttribute("data-live-url");
  var statusEl = document.getElementById("live-status");
  var pending = false, inflight = false, last = 0;

  function setStatus(ok) {
    if (!statusEl) return;
    statusEl.textContent = ok ? "● live" : "○ reconnecting";
    statusEl.className = ok ? "live" : "live off";
  }

  // busy: the user is typing in, or has opened a form inside, the region.
  function busy(el) {
    var a = document.activeElement;
    if (a && a !== document.body && el.contains(a) && a.matches("input, textarea, select")) return true;
    return el.querySelector("details[open]") !== null;
  }

  function refresh() {
    if (inflight) { pending = true; return; }
    inflight = true; pending = false; last = Date.now();
    fetch(location.href, { headers: { "X-Live": "1" }, credentials: "same-origin" })
      .then(function (res) {
        if (res.redirected || !res.ok) throw new Error("status " + res.status);
        return res.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (!fresh) return;
          if (busy(el)) { pending = true; return; }
          el.replaceWith(document.importNode(fresh, true));
        });
        document.dispatchEvent(new CustomEvent("sy:refreshed"));
      })
      .catch(function () {})
      .then(function () {
        inflight = false;
        if (pending) setTimeout(refresh, 300);
      });
  }

  function schedule() {
    // At most one refresh per 250 ms, so a burst of acks costs one fetch.
    var wait = Math.max(0, 250 - (Date.now() - last));
    if (!schedule.timer) schedule.timer = setTimeout(function () { schedule.timer = null; refresh(); }, wait);
  }

  // The browser retries a dropped stream by itself, but gives up for good
  // when a retry gets an error status (a load balancer's 502 while a
  // console restarts, a 503 while the database is away). Then open a new
  // stream, backing off to 30 s, and refresh once it is back: changes made
  // meanwhile were not announced.
  var retry = 1000, lost = false;
  function connect() {
    var es = new EventSource(liveURL);
    es.addEventListener("change", schedule);
    es.addEventListener("fleet", schedule);
    es.onopen = function () {
      setStatus(true);
      retry = 1000;
      if (lost) { lost = false; schedule(); }
    };
    es.onerror = function () {
      setStatus(false);
      lost = true;
      if (es.readyState !== EventSource.CLOSED) return;
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 30000);
    };
  }

  if (liveURL && window.EventSource) {
    connect();
    // A region showing something in motion that no event announces (the
    // time left in a rollout's hold, a job's progress between its audited
    // changes) asks with data-live-every="<seconds>" to be refreshed that
    // often too.
    setInterval(function () {
      var el = document.querySelector("[data-live][data-live-every]");
      if (el && Date.now() - last >= 1000 * parseInt(el.getAttribute("data-live-every"), 10)) schedule();
    }, 1000);
    // A region skipped while busy is refreshed once the user leaves it.
    document.addEventListener("focusout", function () { if (pending) setTimeout(refresh, 200); });
    document.addEventListener("toggle", function (e) {
      if (pending && e.target.tagName === "DETAILS" && !e.target.open) refresh();
    }, true);
  }

  // ---- Opening a quick form puts the cursor in its first field to type:
  // the one marked data-focus, else the reason.
  document.addEventListener("toggle", function (e) {
    var d = e.target;
    if (d.tagName !== "DETAILS" || !d.open) return;
    var input = d.querySelector("[data-focus]") || d.querySelector("input[name=reason]");
    if (input) input.focus();
  }, true);

  // ---- JSON editor: say at once whether the fallback parses.
  function checkJSON(ta) {
    var msg = "";
    if (ta.value.trim() !== "") {
      try { JSON.parse(ta.value); } catch (err) { msg = "Not valid JSON: " + err.message; }
    }
    ta.setCustomValidity(msg);
    ta.setAttribute("aria-invalid", msg ? "true" : "false");
    var out = ta.closest("label").nextElementSibling;
    if (out && out.classList.contains("json-error")) { out.textContent = msg; out.hidden = !msg; }
  }
  document.addEventListener("input", function (e) {
    if (e.target.matches("textarea[data-json]")) checkJSON(e.target);
  });

  // ---- Show only the fields that apply: per level, per limit kind.
  function syncLevel(form) {
    var sel = form.querySelector("select.level-select");
    if (!sel) return;
    form.querySelectorAll("[data-level]").forEach(function (el) {
      if (el.tagName === "FORM") return;
      el.hidden = el.getAttribute("data-level") !== sel.value;
    });
  }
  function syncKind(form) {
    var sel = form.querySelector("select#kind");
    if (!sel) return;
    form.querySelectorAll("fieldset.kind-params").forEach(function (fs) {
      var on = fs.getAttribute("data-kind") === sel.value;
      fs.hidden = !on;
      fs.disabled = !on;
    });
  }
  // Key parameters apply only when the rule keys by something; hidden ones
  // are disabled, so they are not submitted.
  function syncKeyBy(form) {
    var sel = form.querySelector("select#key-by-source");
    if (!sel) return;
    form.querySelectorAll("[data-keyby]").forEach(function (el) {
      var on = el.getAttribute("data-keyby").split(" ").indexOf(sel.value) >= 0;
      el.hidden = !on;
      el.querySelectorAll("input").forEach(function (i) { i.disabled = !on; });
    });
  }
  function syncAll() {
    document.querySelectorAll("form").forEach(function (f) { syncLevel(f); syncKind(f); syncKeyBy(f); });
  }
  document.addEventListener("change", function (e) {
    var f = e.target.form;
    if (!f) return;
    if (e.target.matches("select.level-select")) syncLevel(f);
    if (e.target.matches("select#kind")) syncKind(f);
    if (e.target.matches("select#key-by-source")) syncKeyBy(f);
  });
  syncAll();
  document.addEventListener("sy:refreshed", syncAll);
})();
