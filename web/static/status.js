// Live status of one grading run: polls the JSON API and updates the page in place until the
// run is finished, then offers (and follows) the link to the report.
(function () {
  var box = document.querySelector("[data-run-status]");
  if (!box) return;
  var url = box.getAttribute("data-run-status");
  function set(name, text) {
    var el = box.querySelector("[data-field=" + name + "]");
    if (el) el.textContent = text;
  }
  function duration(s) {
    s = Math.max(0, Math.round(s));
    if (s < 60) return "about " + s + " s";
    var sec = s % 60;
    return "about " + Math.floor(s / 60) + " min " + (sec < 10 ? "0" : "") + sec + " s";
  }
  function points(v) {
    if (v == null) return "-";
    return String(Math.round(v * 1000) / 1000);
  }
  function cell(row, text, cls) {
    var td = document.createElement("td");
    if (cls) {
      var span = document.createElement("span");
      span.className = "status " + cls;
      span.textContent = text;
      td.appendChild(span);
    } else {
      td.textContent = text;
    }
    row.appendChild(td);
  }
  // appends the rows of tests finished since the last poll (textContent only: titles are data)
  function showTests(tests) {
    var body = box.querySelector("[data-tests] tbody");
    if (!body) return;
    for (var i = body.rows.length; i < tests.length; i++) {
      var t = tests[i], row = document.createElement("tr");
      cell(row, String(i + 1));
      cell(row, t.title || t.name);
      cell(row, t.status, t.status);
      cell(row, points(t.points) + " / " + points(t.max_points));
      cell(row, t.p99_us == null ? "-" : t.p99_us.toFixed(1) + " us");
      body.appendChild(row);
    }
    var empty = box.querySelector("[data-no-tests]");
    if (empty) empty.hidden = tests.length > 0;
  }
  function poll() {
    fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (run) {
        set("status", run.status_title);
        box.querySelector("[data-field=status]").className = "status " + run.status;
        set("queue_position", run.queue_position == null ? "-" : String(run.queue_position));
        set("waiting", run.waiting || "");
        set("progress", run.total ? run.done + " of " + run.total + " tests" : "-");
        var bar = box.querySelector("[data-field=progress_bar]");
        if (bar) { bar.max = run.total || 1; bar.value = run.done || 0; }
        set("estimate", run.estimate_s == null ? "-" : duration(run.estimate_s));
        set("score", run.score_text || "-");
        showTests(run.tests || []);
        if (run.final) {                  // the server's vocabulary says when a run has finished
          var link = box.querySelector("[data-report-link]");
          if (link) link.hidden = false;
          return;
        }
        setTimeout(poll, 1000);
      })
      .catch(function () { setTimeout(poll, 3000); });
  }
  poll();
})();
