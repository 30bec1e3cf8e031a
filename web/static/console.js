// The create-assignment form: the title field follows the chosen spec's title until staff type
// a title of their own; the backend's warning shows when no worker serves its queue.
(function () {
  var spec = document.querySelector("[data-spec-select]");
  var title = document.querySelector("form [name=title]");
  if (spec && title) {
    var titles = JSON.parse(spec.getAttribute("data-titles") || "{}");
    var specTitle = function () { return titles[spec.value] || ""; };
    var last = specTitle();
    spec.addEventListener("change", function () {
      if (title.value === last || title.value === "") title.value = specTitle();
      last = specTitle();
    });
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
