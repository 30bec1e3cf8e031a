// The create-assignment form: the title field follows the chosen spec's title (blank for a spec
// file, whose own title the server uses) until staff type a title of their own; the backend's
// warning shows when no worker serves its queue.
(function () {
  var spec = document.querySelector("[data-spec-select]");
  var title = document.querySelector("form [name=title]");
  if (spec && title) {
    var titles = JSON.parse(spec.getAttribute("data-titles") || "{}");
    var specTitle = function () { return titles[spec.value] || ""; };
    var last = specTitle();
    // a spec file of the course's own: left blank, the title is that file's (the server reads it)
    var file = document.querySelector("[data-spec-file]");
    var fileChosen = function () { return !!(file && file.files && file.files.length > 0); };
    spec.addEventListener("change", function () {
      if (fileChosen()) return;            // the bundled spec is not used
      if (title.value === last || title.value === "") title.value = specTitle();
      last = specTitle();
    });
    if (file) {
      file.addEventListener("change", function () {
        var chosen = fileChosen();
        if (chosen && title.value === last) { title.value = ""; last = ""; }
        if (!chosen && title.value === "") { title.value = specTitle(); last = specTitle(); }
        title.placeholder = chosen ? "the spec file's title" : "";
      });
    }
  }
  var backend = document.querySelector("[data-backend-select]");
  if (backend) {
    var show = function () {
      document.querySelectorAll("[data-no-worker-for]").forEach(function (warning) {
        warning.hidden = warning.getAttribute("data-no-worker-for") !== backend.value;
      });
    };
    backend.addEventListener("change", show);
    show();
  }
})();
