// Live status of one grading run: polls the JSON API and updates the page in place until the
// run is finished, then offers (and follows) the link to the report.
(function () {
  var box = document.querySelector("[data-run-status]");
  if (!box) return;
  var url = box.getAttribute("data-run-status");
  var finished = ["done", "failed", "infra_error", "cancelled"];
  function set(name, text) {
    var el = box.querySelector("[data-field=" + name + "]");
    if (el) el.textContent = text;
  }
  function poll() {
    fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (run) {
        set("status", run.status);
        box.querySelector("[data-field=status]").className = "status " + run.status;
        set("queue_position", run.queue_position == null ? "-" : String(run.queue_position));
        set("progress", run.total ? run.done + " of " + run.total + " tests" : "-");
        set("score", run.score == null ? "-" : String(run.score));
        if (finished.indexOf(run.status) >= 0) {
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
