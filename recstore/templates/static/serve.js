"use strict";
// Small conveniences for the served pages (they work without it): Ctrl/Cmd-Enter runs the SQL
// console, and "/" focuses the runs filter box. No data is read or written here.
document.addEventListener("keydown", (ev) => {
  const sql = document.getElementById("sql");
  if (sql && ev.target === sql && ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) sql.form.submit();
  const filter = document.getElementById("filter");
  if (filter && ev.key === "/" && document.activeElement !== filter && document.activeElement.tagName !== "TEXTAREA") {
    ev.preventDefault();
    filter.focus();
  }
});
