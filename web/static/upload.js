// Drag-and-drop onto the upload form: the dropped file is put into the form's own file input,
// so the form posts exactly as with the file picker (same CSRF token, same server checks).
(function () {
  var zone = document.querySelector("[data-dropzone]");
  if (!zone) return;
  var input = zone.querySelector("input[type=file]");
  var chosen = zone.querySelector("[data-chosen]");
  function show() { chosen.textContent = input.files.length ? input.files[0].name : ""; }
  input.addEventListener("change", show);
  ["dragenter", "dragover"].forEach(function (name) {
    zone.addEventListener(name, function (e) { e.preventDefault(); zone.classList.add("over"); });
  });
  ["dragleave", "drop"].forEach(function (name) {
    zone.addEventListener(name, function (e) { e.preventDefault(); zone.classList.remove("over"); });
  });
  zone.addEventListener("drop", function (e) {
    if (!e.dataTransfer.files.length) return;
    input.files = e.dataTransfer.files;
    show();
  });
})();
