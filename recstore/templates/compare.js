"use strict";
// The comparison report's pair table: filter, search, sort and page every pair in the page's
// inline data, and open one pair's drill-down. All text goes in through textContent, never as
// markup. The view state lives in the URL hash (q, cls, order, signal, slice, sort, page, pair),
// so clicking and following a link are one code path.
(function () {
  const DATA = JSON.parse(document.getElementById("report-data").textContent);
  const F = {};
  DATA.fields.forEach((name, i) => { F[name] = i; });
  const PAGE = 50;
  const MATCHED_RUN = 5; // longer runs of matched calls fold into one row
  const rows = DATA.rows;
  const byPair = new Map(rows.map((r) => [r[F.pair], r]));
  const state = {q: "", cls: "", order: "", signal: "", slice: "", sort: "", page: 0, pair: null};

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") node.textContent = v;
      else if (k === "on") node.addEventListener("click", v);
      else node.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c);
    return node;
  }
  const show = (v) => (v === null || v === undefined ? "—" : String(v));
  // A run key as text, or a link to its run page when the report is served (DATA.runLink).
  const runKey = (tag, attrs, key) => {
    if (!DATA.runLink || key === null || key === undefined) return el(tag, {...attrs, text: show(key)});
    return el(tag, attrs, el("a", {href: DATA.runLink + encodeURIComponent(key), text: key}));
  };

  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    for (const k of Object.keys(state)) state[k] = p.get(k) || "";
    state.page = Math.max(0, parseInt(state.page || "0", 10) || 0);
    state.pair = state.pair === "" ? null : parseInt(state.pair, 10);
  }
  function writeHash() {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(state)) if (v !== "" && v !== null && v !== 0) p.set(k, v);
    const text = p.toString();
    if (location.hash.slice(1) !== text) history.replaceState(null, "", text ? "#" + text : location.pathname);
  }

  function matches(r) {
    if (state.cls && r[F.classification] !== state.cls) return false;
    if (state.order !== "" && r[F.rank] !== Number(state.order)) return false;
    if (state.signal !== "" && !(r[F.signals] & (1 << Number(state.signal)))) return false;
    if (state.slice) {
      const [d, v] = state.slice.split(":").map(Number);
      if (r[F.slices][d] !== v) return false;
    }
    if (state.q) {
      const q = state.q.toLowerCase();
      const hay = [r[F.key], r[F.baseline], r[F.candidate]].map((x) => show(x).toLowerCase());
      if (!hay.some((h) => h.includes(q)) && !r[F.tools].some((t) => DATA.tools[t].toLowerCase().includes(q))) return false;
    }
    return true;
  }
  function sorted(list) {
    const out = list.slice();
    if (state.sort === "differences") out.sort((a, b) => b[F.differences] - a[F.differences] || a[F.pair] - b[F.pair]);
    else if (state.sort === "key") out.sort((a, b) => show(a[F.key]).localeCompare(show(b[F.key])) || a[F.pair] - b[F.pair]);
    else if (state.sort === "pair") out.sort((a, b) => a[F.pair] - b[F.pair]);
    return out;
  }
  function signalNames(mask) {
    return DATA.signals.filter((_, i) => mask & (1 << i));
  }

  function render() {
    const shown = sorted(rows.filter(matches));
    if (state.pair !== null) {
      const at = shown.findIndex((r) => r[F.pair] === state.pair);
      if (at >= 0) state.page = Math.floor(at / PAGE);
    }
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const start = state.page * PAGE;
    const page = shown.slice(start, start + PAGE);
    const body = document.querySelector("#pairs tbody");
    body.replaceChildren();
    for (const r of page) {
      const open = r[F.pair] === state.pair;
      body.append(el("tr", {class: "row" + (open ? " open" : ""), "data-pair": r[F.pair],
                            on: () => { state.pair = open ? null : r[F.pair]; update(); }},
        el("td", {class: "n", text: r[F.pair]}),
        el("td", {text: show(r[F.key])}),
        el("td", {class: "group-" + DATA.order[r[F.rank]], text: DATA.order[r[F.rank]]}),
        el("td", {}, el("span", {class: "pill " + r[F.classification], text: r[F.classification]})),
        el("td", {text: show(r[F.status_a]) + " → " + show(r[F.status_b])}),
        el("td", {}, ...signalNames(r[F.signals]).map((s) => el("span", {class: "sig", text: s}))),
        el("td", {class: "n", text: r[F.differences]}),
        runKey("td", {class: "mono"}, r[F.baseline]),
        runKey("td", {class: "mono"}, r[F.candidate])));
      if (open) body.append(el("tr", {class: "detail-row"}, el("td", {class: "detail", colspan: "9"}, detail(r))));
    }
    if (state.pair !== null && !page.some((r) => r[F.pair] === state.pair) && byPair.has(state.pair)) {
      const r = byPair.get(state.pair);  // opened by link but filtered out: show it above the rows
      body.prepend(el("tr", {class: "detail-row"}, el("td", {class: "detail", colspan: "9"},
        el("p", {class: "meta", text: "pair " + r[F.pair] + " (not in the filtered rows)"}), detail(r))));
    }
    const total = rows.length;
    document.getElementById("count").textContent = shown.length
      ? `showing ${start + 1}–${start + page.length} of ${shown.length} pairs` + (shown.length < total ? ` (filtered from ${total})` : "")
      : `no pair matches (of ${total})`;
    document.getElementById("prev").disabled = state.page === 0;
    document.getElementById("next").disabled = state.page >= pages - 1;
  }

  function responseSides(segments) {
    const left = el("div", {class: "side", "data-side": "baseline"});
    const right = el("div", {class: "side", "data-side": "candidate"});
    if (!segments.length) {
      left.append(el("span", {class: "meta", text: "(no response)"}));
      right.append(el("span", {class: "meta", text: "(no response)"}));
    }
    for (const [op, text] of segments) {
      if (op === "equal") { left.append(text); right.append(text); }
      else if (op === "delete") left.append(el("del", {text}));
      else right.append(el("ins", {text}));
    }
    return el("div", {class: "sides"}, left, right);
  }

  function callCell(side, call) {
    if (!call) return el("td", {class: side});
    return el("td", {class: side + " args"}, el("b", {text: show(call.name)}),
              " #" + show(call.turn) + " ", call.args);
  }
  function diffList(rows) {
    return el("ul", {class: "argdiff"}, ...rows.map(([path, kind, a, b]) =>
      el("li", {}, el("code", {text: path}), " " + kind + ": ",
         a === null ? "" : el("del", {text: a}), a !== null && b !== null ? " → " : "",
         b === null ? "" : el("ins", {text: b}))));
  }
  function stepRow(step, index) {
    const op = el("td", {class: "op", text: step.op});
    const row = el("tr", {class: "step-" + step.op}, el("td", {class: "n", text: index + 1}), op,
                   callCell("a", step.a), callCell("b", step.b));
    const notes = [];
    if (step.diff && step.diff.length) notes.push(el("div", {}, "arguments:", diffList(step.diff)));
    if (step.output) notes.push(el("div", {}, "output changed:", diffList(step.output)));
    if (!notes.length) return [row];
    return [row, el("tr", {class: "step-" + step.op + " step-note"}, el("td"), el("td"), el("td", {colspan: "2"}, ...notes))];
  }
  function callsTable(steps) {
    const body = el("tbody");
    let i = 0;
    while (i < steps.length) {
      let j = i;
      while (j < steps.length && steps[j].op === "matched" && !steps[j].output) j++;
      if (j - i > MATCHED_RUN) {
        const folded = steps.slice(i, j).map((s, k) => stepRow(s, i + k)).flat();
        const toggle = el("tr", {class: "step-fold"}, el("td"), el("td", {colspan: "3"},
          el("button", {type: "button", class: "expand", text: `… ${j - i} matched calls (show)`,
                        on: (ev) => { ev.stopPropagation(); toggle.replaceWith(...folded); }})));
        body.append(toggle);
        i = j;
        continue;
      }
      for (const node of stepRow(steps[i], i)) body.append(node);
      i++;
    }
    const counts = {};
    for (const s of steps) counts[s.op] = (counts[s.op] || 0) + 1;
    const summary = ["matched", "changed", "added", "removed"].map((k) => `${counts[k] || 0} ${k}`).join(", ");
    return [el("p", {class: "meta", text: summary}),
            el("table", {class: "calls"}, el("thead", {}, el("tr", {}, el("th", {class: "n", text: "step"}),
              el("th", {text: "change"}), el("th", {text: "baseline call"}), el("th", {text: "candidate call"}))), body)];
  }

  function detail(r) {
    const d = DATA.details[String(r[F.pair])];
    const head = el("div", {},
      el("p", {}, "case ", el("b", {text: show(r[F.key])}), " · baseline ", runKey("code", {}, r[F.baseline]),
         " (" + show(r[F.status_a]) + ") → candidate ", runKey("code", {}, r[F.candidate]),
         " (" + show(r[F.status_b]) + ")"));
    if (!d) {
      const why = r[F.rank] === 3 ? "The two runs are equal in every compared section."
        : `This report embeds the drill-down of the first ${DATA.detailLimit} changed pairs.`;
      head.append(el("p", {class: "meta", text: why + " Full comparison: "}),
                  el("pre", {text: `recstore compare ${r[F.baseline]} ${r[F.candidate]}`}));
      return head;
    }
    const parts = [head];
    if (d.error[0] !== null || d.error[1] !== null) {
      parts.push(el("h4", {text: "Errors"}), el("div", {class: "sides"},
        el("div", {class: "side", text: show(d.error[0])}), el("div", {class: "side", text: show(d.error[1])})));
    }
    parts.push(el("h4", {text: "Response (baseline | candidate)" + (d.responseCut ? " — first 20,000 characters" : "")}),
               responseSides(d.response));
    parts.push(el("h4", {text: "Tool calls, aligned"}));
    if (d.calls.length) parts.push(...callsTable(d.calls));
    else parts.push(el("p", {class: "meta", text: "Neither run called a tool."}));
    parts.push(el("h4", {text: "Policy and guardrail decision changes"}));
    const outcome = d.decisions.filter((c) => c.a !== c.b);
    const fieldsOnly = d.decisions.filter((c) => c.a === c.b);
    const decisionRow = (c) => el("tr", {}, el("td", {text: c.section}), el("td", {class: "n", text: c.index}),
      el("td", {text: show(c.a)}), el("td", {text: show(c.b)}), el("td", {}, diffList(c.diff)));
    if (d.decisions.length) {
      const table = el("table", {class: "decisions"},
        el("tr", {}, ...["section", "#", "baseline", "candidate", "fields"].map((h) => el("th", {text: h}))),
        ...outcome.map(decisionRow));
      if (fieldsOnly.length) {
        const toggle = el("tr", {}, el("td", {colspan: "5"}, el("button", {type: "button", class: "expand",
          text: `… ${fieldsOnly.length} decisions with the same outcome and other fields (show)`,
          on: () => toggle.replaceWith(...fieldsOnly.map(decisionRow))})));
        table.append(toggle);
      }
      parts.push(el("p", {class: "meta", text: `${outcome.length} outcome changes, ${fieldsOnly.length} with other fields only`}), table);
    } else parts.push(el("p", {class: "meta", text: "none"}));
    const box = el("div", {class: "pair-detail", "data-pair": r[F.pair]});
    box.append(...parts);
    box.addEventListener("click", (ev) => ev.stopPropagation());
    return box;
  }

  function update() { writeHash(); render(); }
  const controls = {q: "input", cls: "change", order: "change", signal: "change", slice: "change", sort: "change"};
  for (const [id, event] of Object.entries(controls)) {
    document.getElementById(id).addEventListener(event, (ev) => {
      state[id] = ev.target.value; state.page = 0; state.pair = null; update();
    });
  }
  document.getElementById("prev").addEventListener("click", () => { state.page--; state.pair = null; update(); });
  document.getElementById("next").addEventListener("click", () => { state.page++; state.pair = null; update(); });
  function load() {
    readHash();
    for (const id of Object.keys(controls)) document.getElementById(id).value = state[id];
    render();
    if (state.pair !== null) {
      const open = document.querySelector(".pair-detail");
      if (open) open.scrollIntoView({block: "start"});
    }
  }
  window.addEventListener("hashchange", load);
  load();
})();
