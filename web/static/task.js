// Follows a staff task (rescore, regrade, export, problem check): polls its status until it is done or failed.
(function () {
  var box = document.querySelector("[data-task-status]");
  if (!box) return;
  var url = box.getAttribute("data-task-status");
  function field(name) { return box.querySelector("[data-field=" + name + "]"); }
  function show(s) {
    field("status").textContent = s.status;
    field("progress").textContent = s.progress ? "(" + s.progress + ")" : "";
    var bar = field("bar");
    bar.max = s.total || 1;
    bar.value = s.done;
    field("summary").textContent = s.summary || "";
    field("error").textContent = s.error || "";
    var idle = box.querySelector("[data-no-worker]");     // said while the task waited for a worker
    if (idle && !s.waiting) idle.remove();
    var dl = field("download");
    if (s.download && !dl.querySelector("a")) {
      var a = document.createElement("a");
      a.href = s.download;
      a.textContent = "Download";
      dl.appendChild(a);
    }
    return s.final;                       // the server's vocabulary says when a task has finished
  }
  function poll() {
    fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) { return r.json(); })
      .then(function (s) {
        if (!show(s)) setTimeout(poll, 1000);
        // a page with more to show once the task is done (a problem check's table) is drawn again
        else if (box.hasAttribute("data-reload-when-final")) window.location.reload();
      })
      .catch(function () { setTimeout(poll, 3000); });
  }
  poll();
})();
