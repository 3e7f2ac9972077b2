// ce's HTML report: everything is drawn from the embedded JSON (no network, no framework).
// Text always goes in through textContent, never as markup.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("ce-data").textContent);
  const COL = {};
  D.columns.forEach((c, i) => { COL[c] = i; });
  const SVGNS = "http://www.w3.org/2000/svg";

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const kid of kids.flat()) {
      if (kid === null || kid === undefined || kid === false) continue;
      e.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  // v with d decimals as Python's format(v, ".<d>f") gives it, which report.md, JUnit and
  // `ce run` print: the double's exact value rounded, a tie to even. toFixed takes a tie
  // up (9 of 16 passing was 56.2% in report.md and 56.3% here).
  function fixed(v, d) {
    const x = Number(v), up = x.toFixed(d);
    const exact = Math.abs(x).toFixed(Math.min(100, d + 30)), dot = exact.indexOf(".");
    const next = dot + 1 + d;  // the first digit dropped
    if (exact[next] !== "5" || !/^0*$/.test(exact.slice(next + 1))) return up;
    const kept = exact.slice(0, d ? next : dot);
    if (Number(kept[kept.length - 1]) % 2) return up;
    return (x < 0 ? "-" : "") + kept;
  }
  const pct = (v) => (v === null || v === undefined) ? "—" : fixed(100 * v, 1) + "%";
  const num = (v, d) => (v === null || v === undefined) ? "—" : fixed(v, d);
  const cost = (v) => (v === null || v === undefined) ? "—" : "$" + fixed(v, 4);
  // a count the trial may not have measured (turns, tokens: report/usage.py): "—", never 0
  const known = (v) => (v === null || v === undefined) ? "—" : v.toLocaleString("en");
  // a summary's cost, as report.md's _cost: the sum over the trials whose cost is known
  // (cost_known_trials: report/usage.py's rule), over how many when not all, "—" (none:
  // "unknown" in a sentence) when none is, never $0; the unpriced trials' why (their model
  // has no rate: ce_runtime/pricing.py) in a tooltip. A block without the count (the
  // judges') is the sum and its unpriced trials.
  const costOf = (block, none = "—") => {
    const u = block.cost_unknown, known = block.cost_known_trials;
    if (known === undefined || known === null) {
      if (!u || !u.trials) return cost(block.cost_usd);
      return el("span", { title: (u.why || []).join("; ") }, `${cost(block.cost_usd)} + unknown for ${u.trials} trial(s)`);
    }
    const text = (known ? cost(block.cost_usd) : none) + (known && known < block.trials ? ` over ${known} of ${block.trials} trial(s)` : "");
    if (!u || !u.trials) return text;
    return el("span", { title: (u.why || []).join("; ") }, `${text}; ${u.trials} unpriced`);
  };
  const judgeCalls = (j) => {  // each kind of judge that was called (markdown's _judge_calls)
    const sessions = j.agent_sessions || 0, calls = j.calls - sessions;
    const parts = (calls || !sessions) ? [`${calls} llm_judge verdict(s)`] : [];
    return parts.concat(sessions ? [`${sessions} agent_judge session(s)`] : []).join(", ");
  };
  const turnsAvoided = (s) => {  // what the early stops saved at most (markdown's _turns_avoided)
    const a = s.turns_avoided;
    if (!a) return "";
    return `, <= ${a.at_most} turn(s) avoided` + (a.trials < s.stopped_early ? ` by the ${a.trials} with a max_turns` : "");
  };
  const signed = (v, d) => (v === null || v === undefined) ? "—" : (v >= 0 ? "+" : "") + fixed(v, d);
  function dur(s) {  // report/text.py's fmt_duration (119.5 s was "1m 60s" here)
    if (s === null || s === undefined) return "—";
    if (s < 60) return fixed(s, 1) + "s";
    const whole = Number(fixed(s, 0)), m = Math.floor(whole / 60), r = whole % 60;
    return m < 60 ? `${m}m ${String(r).padStart(2, "0")}s` : `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
  }
  // a table that may be wider than its section: it scrolls sideways in its own box, the
  // page never does (report.css's .wide)
  const wide = (table) => el("div", { class: "wide" }, table);
  // an id in a table's cell (a trial's, a task's, a variant's): it may wrap after a "/"
  // (a trial id's variant / task / row / repeat) and at a hyphen before anywhere else,
  // and its column keeps the width of its longest such part, up to 18% of the window
  // (report.css's td[data-fit]), so that an id that fits its line is never cut mid-word
  const idCell = (cls, id) => {
    const parts = String(id ?? "").split(/(?<=\/)/);
    return el("td", { class: cls, "data-fit": parts.join("\u200b") }, parts.flatMap((p, i) => i ? [el("wbr"), p] : [p]));
  };
  const status = (s) => el("span", { class: "st " + (s || "") }, s || "?");
  const early = () => el("span", { class: "badge early", title: "stopped early: gated on its armed criteria only" }, "stopped early");
  // what a click does, from the keyboard too (a row or a header has focus: Enter or Space)
  const onKeys = (fn) => (e) => { if (e.target === e.currentTarget && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); fn(e); } };
  const sortState = (th, col, st) => {
    th.classList.toggle("sorted-asc", col === st.sort && !st.desc);
    th.classList.toggle("sorted-desc", col === st.sort && st.desc);
    if (col === st.sort) th.setAttribute("aria-sort", st.desc ? "descending" : "ascending"); else th.removeAttribute("aria-sort");
  };

  // -- header and run summary ----------------------------------------------------------
  function header() {
    const s = D.summary, ok = s.exit_code === 0;
    const unfinished = D.status === "interrupted" || D.status === "incomplete";
    const top = document.getElementById("top");
    top.append(el("h1", {}, "ce run ", el("code", {}, D.run_id)),
      el("div", {},
        el("span", { class: "verdict " + (ok ? "pass" : "fail"), id: "verdict" }, ok ? "PASSED" : unfinished ? D.status.toUpperCase() : "FAILED"), " ",
        `${s.passed}/${s.graded} trials succeeded${(s.by_status || {}).NOT_GRADED ? ` (${s.by_status.NOT_GRADED} not graded, left out)` : ""} — pass rate `,
        el("b", { id: "pass-rate" }, pct(s.pass_rate)),
        s.pass_rate_ci95 ? ` (95% Wilson interval ${pct(s.pass_rate_ci95[0])}–${pct(s.pass_rate_ci95[1])})` : "",
        // the suite gates with thresholds, passed or not, as report.md's verdict line
        D.gates_passed ? el("span", { id: "gates-passed" }, ` · ${D.gates_passed}`) : "",
        s.min_pass_rate != null ? el("span", { id: "min-pass-rate" }, ` · at least ${pct(s.min_pass_rate)} of each variant's trials must succeed`) : "",
        (s.experiment_ids || []).length ? ` · experiment ${s.experiment_ids.join(", ")}` : "",
        D.status && D.status !== "complete" && !unfinished ? el("span", { class: "badge adv" }, D.status) : "",
        D.rescored_from ? el("span", { class: "muted" }, ` · re-scored from ${D.rescored_from}`) : ""));
  }

  function summary() {
    const s = D.summary, sec = document.getElementById("summary");
    sec.append(el("h2", {}, "Run summary"));
    if ((s.exit_reasons || []).length) sec.append(el("ul", {}, s.exit_reasons.map((r) => el("li", { class: "bad" }, r))));
    const rows = [
      ["Trials", `${s.trials} (` + Object.entries(s.by_status || {}).map(([k, n]) => `${n} ${k}`).join(", ") + ")"],
      ["Pass rate", `${pct(s.pass_rate)}` + (s.pass_rate_ci95 ? ` (95% CI ${pct(s.pass_rate_ci95[0])}–${pct(s.pass_rate_ci95[1])})` : "")],
      ["Mean score", num(s.mean_score, 2) + (s.unscored ? ` (over ${s.graded - s.unscored} of ${s.graded} graded trials: ${s.unscored} without a score)` : "")],
    ];
    const pak = s.pass_at_k || {};
    if (pak.tasks && pak.k_range && pak.k_range[1] > 1) rows.push(["pass@k", `${pak.passed}/${pak.tasks} tasks (${pct(pak.rate)}); every repeat passed: ${pak.passed_all}/${pak.tasks}`]);
    const w = s.within_expected_turns || {};
    if (w.budgeted) rows.push(["Within expected turns", `${w.within}/${w.budgeted} (${pct(w.share)})`]);
    if (s.stopped_early) rows.push(["Stopped early", `${s.stopped_early} trial(s)` + turnsAvoided(s)]);
    // as report.md's _tokens: over the trials whose tokens are known (tokens_known_trials:
    // report/usage.py's rule), over how many when not all, "—" when none is, never 0
    const t = s.tokens || {}, tknown = s.tokens_known_trials;
    const cache = t.cache_read || t.cache_write ? ` / ${(t.cache_read || 0).toLocaleString("en")} cache read / ${(t.cache_write || 0).toLocaleString("en")} cache write` : "";
    rows.push(["Tokens", tknown === 0 ? "—" : `${(t.input || 0).toLocaleString("en")} in / ${(t.output || 0).toLocaleString("en")} out${cache}` +
      (tknown !== null && tknown !== undefined && tknown < s.trials ? ` over ${tknown} of ${s.trials} trial(s)` : "")]);
    rows.push(["Cost", costOf(s)]);
    const j = s.judges;
    if (j) rows.push(["Judge tokens", `${j.input_tokens.toLocaleString("en")} in / ${j.output_tokens.toLocaleString("en")} out / ${j.cache_read_tokens.toLocaleString("en")} cache read / ${j.cache_write_tokens.toLocaleString("en")} cache write (${judgeCalls(j)}, ${j.recorded} reused from the cache)`],
      ["Judge cost", el("span", {}, costOf(j), " (not in the agent's cost)")]);
    // each trial's duration_s runs from its set-up to its grading (report.md says the same)
    rows.push(["Trial time", dur(s.duration_s) + " (sum over trials, set-up and grading included)"]);
    if (D.trials_planned && D.trials_planned !== s.trials) rows.push(["Planned", `${D.trials_planned} trials (${s.trials} recorded)`]);
    sec.append(wide(el("table", {}, el("tbody", {}, rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))))));
  }

  // -- variants --------------------------------------------------------------------------
  // a label's width in the charts' font (report.css: svg text, 12px system-ui)
  const labelWidth = (() => {
    const c = document.createElement("canvas").getContext("2d");
    if (c) c.font = "12px system-ui, sans-serif";
    return (text) => c ? c.measureText(text).width : 7 * text.length;
  })();
  const fitLabel = (text, room) => {  // shortened with "…" to `room` pixels (its <title> has it whole)
    if (labelWidth(text) <= room) return text;
    let n = text.length;
    while (n > 1 && labelWidth(text.slice(0, n) + "…") > room) n -= 1;
    return text.slice(0, n) + "…";
  };
  function intervalChart(items, opts) {
    // items: {label, value, low, high}; a horizontal bar per item on [min, max], drawn as
    // wide as its section (opts.room; 560 px at most, 300 at least: it shrinks with the
    // page after that). A label wider than 40% of that (a phone's width, a long variant
    // name) goes on its own line above its bar, never cut off at the chart's left edge
    const W = Math.max(300, Math.min(560, Math.floor(opts.room || 560))), R = 60;
    const widest = Math.max(0, ...items.map((it) => labelWidth(it.label)));
    const stacked = widest + 16 > 0.4 * W;
    const L = stacked ? 24 : Math.min(170, Math.max(60, Math.ceil(widest) + 16));
    const rowH = stacked ? 42 : 26, H = items.length * rowH + 30;
    const lo = opts.min, hi = opts.max, x = (v) => L + (W - L - R) * (v - lo) / (hi - lo);
    const g = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": opts.title, class: opts.cls || "" });
    for (let i = 0; i <= 4; i++) {
      const v = lo + (hi - lo) * i / 4;
      g.append(svg("line", { x1: x(v), x2: x(v), y1: 4, y2: H - 22, stroke: "#d0d7de" }),
        svg("text", { x: x(v), y: H - 8, "text-anchor": "middle", fill: "#57606a" }, opts.fmt(v)));
    }
    if (opts.zero !== undefined) g.append(svg("line", { x1: x(opts.zero), x2: x(opts.zero), y1: 4, y2: H - 22, stroke: "#57606a", "stroke-dasharray": "4 3" }));
    items.forEach((it, i) => {
      const y = 8 + i * rowH + (stacked ? 28 : rowH / 2);
      const label = stacked ? svg("text", { x: 8, y: y - 12, class: "label" }, fitLabel(it.label, W - 12))
        : svg("text", { x: L - 8, y: y + 4, "text-anchor": "end", class: "label" }, it.label);
      label.append(svg("title", {}, it.label));
      g.append(label);
      if (it.low !== null && it.low !== undefined) {
        g.append(svg("line", { x1: x(it.low), x2: x(it.high), y1: y, y2: y, stroke: "#0969da", "stroke-width": 3 }));
        g.append(svg("line", { x1: x(it.low), x2: x(it.low), y1: y - 6, y2: y + 6, stroke: "#0969da", "stroke-width": 2 }));
        g.append(svg("line", { x1: x(it.high), x2: x(it.high), y1: y - 6, y2: y + 6, stroke: "#0969da", "stroke-width": 2 }));
      }
      if (it.value !== null && it.value !== undefined) {
        g.append(svg("circle", { cx: x(it.value), cy: y, r: 5, fill: "#1f2328" }));
        g.append(svg("text", { x: W - R + 6, y: y + 4 }, opts.fmt(it.value)));
      }
    });
    return g;
  }

  function variants() {
    const sec = document.getElementById("variants");
    if (!D.variants.length) return;
    sec.append(el("h2", {}, D.variants.length > 1 ? "Variants side by side" : "Variant"));
    sec.append(wide(el("table", { id: "variant-table" },
      el("thead", {}, el("tr", {}, ["Variant", "Agent / model", "Trials", "Passed", "Pass rate", "95% CI", "Mean score", "pass@k", "Stopped early", "Cost"].map((h) => el("th", {}, h)))),
      el("tbody", {}, D.variants.map((v) => el("tr", {},
        el("td", {}, el("code", {}, v.id)),
        el("td", {}, [(v.agents || []).join(", "), (v.models || []).join(", ")].filter((s) => s).join(" / ") || "—"),
        el("td", { class: "num" }, v.trials), el("td", { class: "num" }, `${v.passed}/${v.graded}`),
        el("td", { class: "num" }, pct(v.pass_rate)),
        el("td", {}, v.pass_rate_ci95 ? `${pct(v.pass_rate_ci95[0])}–${pct(v.pass_rate_ci95[1])}` : "—"),
        el("td", { class: "num" }, num(v.mean_score, 2)),
        el("td", { class: "num" }, v.pass_at_k ? `${v.pass_at_k.passed}/${v.pass_at_k.tasks}` : "—"),
        el("td", { class: "num" }, v.stopped_early || 0), el("td", { class: "num" }, costOf(v))))))));
    // usage per trial: cells formatted as report.md's (report/usage_text.py)
    if ((D.usage_tables || []).length) sec.append(el("h3", {}, "Usage per trial"));
    (D.usage_tables || []).forEach(([title, head, rows], i) => {
      sec.append(el("p", { class: "muted" }, title + ":"),
        wide(el("table", { id: i ? "usage-change-table" : "usage-table" },
          el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
          el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c, j) => j ? el("td", { class: "num" }, c) : el("td", {}, el("code", {}, c)))))))));
    });
    sec.append(el("div", {}, el("h3", {}, "Pass rate with its 95% Wilson interval"),
      intervalChart(D.variants.map((v) => ({ label: v.id, value: v.pass_rate, low: v.pass_rate_ci95 && v.pass_rate_ci95[0], high: v.pass_rate_ci95 && v.pass_rate_ci95[1] })),
        { min: 0, max: 1, fmt: pct, title: "pass rate per variant", cls: "variant-chart", room: sec.clientWidth })));
    if (D.variants.length < 2) return;
    if (D.paired_note) sec.append(el("p", { class: "note" }, D.paired_note));
    if (!D.paired.length) return;
    sec.append(el("h3", {}, `Paired comparison against ${D.paired[0].baseline}`));
    sec.append(el("p", { class: "muted" }, "Over the tasks both variants ran: per task the mean weighted score (or pass rate) over its repeats; the difference is variant − baseline, with a paired bootstrap 95% interval and a two-sided sign-flip permutation test."));
    const rows = [];
    // each cell as report.md's "Paired statistics" writes it (report/text.py's fmt_paired,
    // carried in c.shown): a pass rate in percent and percentage points, a score with 2
    // decimals, p with 3 ("<0.001"); they read 0.750 → 0.875, Δ +0.125, p 1.00 here
    for (const p of D.paired) for (const m of ["score", "pass_rate"]) {
      const c = p[m], t = c.shown;
      rows.push(el("tr", { class: "paired-row", "data-metric": m },
        el("td", {}, el("code", {}, p.variant)), el("td", {}, m === "score" ? "mean score" : "pass rate"),
        el("td", { class: "num" }, c.n_tasks),
        el("td", { class: "num" }, t.means),
        el("td", { class: "num" + (c.significant ? (c.mean_diff > 0 ? " ok" : " bad") : "") }, t.diff),
        el("td", {}, c.ci_low === null ? "—" : `${t.low} … ${t.high}`),
        el("td", { class: "num" }, t.p),
        el("td", {}, c.test),
        el("td", { class: "num" }, `${c.wins} / ${c.losses} / ${c.ties}`)));
    }
    sec.append(wide(el("table", { id: "paired-table" }, el("thead", {}, el("tr", {}, ["Variant", "Metric", "Tasks", "Baseline → variant", "Δ", "95% interval", "p", "test", "wins / losses / ties"].map((h) => el("th", {}, h)))), el("tbody", {}, rows))));
    // a paired task with an early-stopped trial: report.md's note under its paired statistics
    if (D.paired_early_note) sec.append(el("p", { class: "note", id: "paired-early-note" }, D.paired_early_note));
    const items = D.paired.map((p) => ({ label: `${p.variant} − ${p.baseline}`, value: p.score.mean_diff, low: p.score.ci_low, high: p.score.ci_high }));
    sec.append(el("h3", {}, "Mean score difference with its bootstrap interval"),
      intervalChart(items, { min: -1, max: 1, zero: 0, fmt: (v) => signed(v, 2), title: "paired score difference", room: sec.clientWidth }));
    for (const p of D.paired) {
      const md = p.score.most_divergent || [];
      if (!md.length) continue;
      sec.append(el("h3", {}, `Most divergent tasks: ${p.variant} vs ${p.baseline} (mean score)`),
        wide(el("table", {}, el("thead", {}, el("tr", {}, ["Task", p.baseline, p.variant, "Δ"].map((h) => el("th", {}, h)))),
          el("tbody", {}, md.map((r) => el("tr", {}, el("td", {}, el("a", { href: "#", onclick: (e) => { e.preventDefault(); setFilter(r.task); } }, r.task)),
            el("td", { class: "num" }, num(r.a, 2)), el("td", { class: "num" }, num(r.b, 2)), el("td", { class: "num" }, signed(r.diff, 2))))))));
    }
  }

  // -- suite gates -------------------------------------------------------------------------
  function heatmap(g) {
    const n = g.labels.length, cell = 54, L = 110, T = 40, W = L + n * cell + 10, H = T + n * cell + 30;
    const s = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "confusion", role: "img", "aria-label": "confusion matrix" });
    let max = 1;
    g.confusion.forEach((row) => row.forEach((v) => { max = Math.max(max, v); }));
    s.append(svg("text", { x: L + n * cell / 2, y: 12, "text-anchor": "middle", fill: "#57606a" }, "observed →"));
    s.append(svg("text", { x: 8, y: T - 6, fill: "#57606a" }, "expected ↓"));
    g.labels.forEach((lab, j) => s.append(svg("text", { x: L + j * cell + cell / 2, y: T - 6, "text-anchor": "middle" }, lab)));
    g.confusion.forEach((row, i) => {
      s.append(svg("text", { x: L - 8, y: T + i * cell + cell / 2 + 4, "text-anchor": "end" }, g.labels[i]));
      row.forEach((v, j) => {
        const a = v / max, diag = i === j;
        const fill = diag ? `rgba(26,127,55,${0.08 + 0.8 * a})` : `rgba(207,34,46,${v ? 0.08 + 0.8 * a : 0.03})`;
        const grp = svg("g", { class: "cm-cell", "data-expected": g.labels[i], "data-observed": g.labels[j], "data-count": v });
        grp.append(svg("rect", { x: L + j * cell, y: T + i * cell, width: cell - 2, height: cell - 2, fill, stroke: "#d0d7de" }),
          svg("text", { x: L + j * cell + cell / 2, y: T + i * cell + cell / 2 + 4, "text-anchor": "middle", fill: a > 0.6 ? "#fff" : "#1f2328", "font-weight": 600 }, String(v)));
        grp.append(svg("title", {}, `expected ${g.labels[i]}, observed ${g.labels[j]}: ${v}`));
        s.append(grp);
      });
    });
    return s;
  }

  function gates() {
    const sec = document.getElementById("gates");
    if (!D.gates.length) return;
    sec.append(el("h2", {}, "Suite gates"));
    const word = (g) => !Object.keys(g.thresholds || {}).length ? el("span", { class: "muted" }, "no thresholds") : g.passed ? el("span", { class: "ok" }, "✓ passed") : el("span", { class: "bad" }, "✗ failed");
    for (const g of D.gates.filter((x) => x.kind === "classification")) {
      const box = el("div", { class: "gate", "data-gate": `${g.variant}/${g.suite_id}/${g.criterion}` });
      box.append(el("h3", {}, el("code", {}, g.variant), " · ", el("code", {}, g.suite_id), " · ", el("code", {}, g.criterion), " ", g.criterion_type || "", " — ", word(g)));
      box.append(el("p", {}, (g.description ? g.description + ". " : "") + `${g.n} labelled result(s)` + (g.missing ? `; ${g.missing} graded trial(s) without labels, left out` : "") + "."));
      const shown = ["accuracy", "macro_f1", "weighted_f1", "micro_f1", ...Object.keys(g.thresholds || {}).filter((m) => !["accuracy", "macro_f1", "weighted_f1", "micro_f1"].includes(m))];
      const metrics = el("table", { class: "metrics" }, el("thead", {}, el("tr", {}, ["Metric", "Value", "Minimum", ""].map((h) => el("th", {}, h)))),
        el("tbody", {}, shown.map((m) => { const lim = (g.thresholds || {})[m]; return el("tr", {}, el("td", {}, m), el("td", { class: "num" }, num(g.metrics[m], 3)), el("td", { class: "num" }, lim === undefined ? "—" : String(lim)), el("td", {}, lim === undefined ? "" : (g.failed || []).includes(m) ? el("span", { class: "bad" }, "✗ below") : el("span", { class: "ok" }, "✓"))); })));
      const labels = el("table", { class: "per-label" }, el("thead", {}, el("tr", {}, ["Label", "Precision", "Recall", "F1", "Support"].map((h) => el("th", {}, h)))),
        el("tbody", {}, g.labels.map((lab) => el("tr", {}, el("td", {}, lab), ...["precision", "recall", "f1"].map((m) => el("td", { class: "num" }, num(g.metrics[`${m}.${lab}`], 3))), el("td", { class: "num" }, (g.support || {})[lab] || 0)))));
      box.append(el("div", { class: "grid" }, el("div", {}, el("div", { class: "muted" }, "Confusion matrix (rows: expected, columns: observed)"), heatmap(g)), metrics, labels));
      sec.append(box);
    }
    const score = D.gates.filter((x) => x.kind !== "classification");
    if (score.length) {
      sec.append(el("h3", {}, "Criteria over dataset rows"), wide(el("table", {}, el("thead", {}, el("tr", {}, ["Variant", "Suite", "Criterion", "Results", "Pass rate", "Mean score", "Thresholds", "Gate"].map((h) => el("th", {}, h)))),
        el("tbody", {}, score.map((g) => el("tr", {}, el("td", {}, el("code", {}, g.variant)), el("td", {}, el("code", {}, g.suite_id)), el("td", {}, `${g.criterion} ${g.criterion_type || ""}`),
          el("td", { class: "num" }, g.n), el("td", { class: "num" }, pct(g.metrics.pass_rate)), el("td", { class: "num" }, num(g.metrics.mean_score, 2)),
          el("td", {}, Object.entries(g.thresholds || {}).map(([m, t]) => (g.failed || []).includes(m) ? `${m} ${num(g.metrics[m], 3)} < ${t} ✗` : `${m} ≥ ${t}`).join(", ") || "—"), el("td", {}, word(g))))))));
    }
  }

  // -- the trials table ------------------------------------------------------------------
  const PAGE = 100;
  // task: one task's trials exactly (a click in the tasks table); q: the filter box's text
  const state = { q: "", task: null, status: "", variant: "", earlyOnly: false, failedOnly: false, sort: null, desc: false, page: 0, selected: -1 };
  let view = [];
  const SHOWN = [["trial_id", "Trial"], ["variant", "Variant"], ["task", "Task"], ["repeat", "Rep"], ["status", "Status"], ["score", "Score"], ["turns", "Turns"], ["tool_calls", "Tools"], ["tokens", "Tokens"], ["cost", "Cost"], ["duration", "Time"], ["failed", "Failed criteria"]];
  const NUMERIC = new Set(["repeat", "score", "turns", "tool_calls", "tokens", "cost", "duration"]);

  function applyView() {
    const q = state.q.toLowerCase();
    view = [];
    D.trials.forEach((r, i) => {
      if (state.status && r[COL.status] !== state.status) return;
      if (state.variant && r[COL.variant] !== state.variant) return;
      if (state.task !== null && r[COL.task] !== state.task) return;
      if (state.earlyOnly && !r[COL.early]) return;
      if (state.failedOnly && r[COL.status] === "SUCCESS") return;
      if (q && state.task === null) {
        const hay = [r[COL.trial_id], r[COL.task], r[COL.status], r[COL.variant], (r[COL.failed] || []).join(" "), r[COL.error] || "", r[COL.suite] || ""].join(" ").toLowerCase();
        if (!hay.includes(q)) return;
      }
      view.push(i);
    });
    if (state.sort) {
      const c = COL[state.sort], sign = state.desc ? -1 : 1;
      view.sort((a, b) => {
        let x = D.trials[a][c], y = D.trials[b][c];
        if (Array.isArray(x)) { x = x.length; y = y.length; }
        if (x === y) return a - b;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * sign;
      });
    }
    state.page = Math.min(state.page, Math.max(0, Math.ceil(view.length / PAGE) - 1));
    drawTable();
  }

  // one task's trials, exactly (as a substring, rows/r1 showed rows/r10's trials too);
  // the box shows the task's id, and typing in it searches again
  function setFilter(task) {
    const box = document.getElementById("filter");
    box.value = task; state.q = task; state.task = task; state.page = 0; applyView();
    document.getElementById("trials").scrollIntoView();
  }

  // -- the tasks table: per task (dataset row included), each variant's pass count and
  //    mean score over its repeats; a click filters the trials to that task
  const tstate = { q: "", sort: "task", desc: false, page: 0 };
  let taskRows = [], taskView = [];
  function buildTasks() {
    const vs = [...new Set(D.trials.map((r) => r[COL.variant]))];
    const byTask = new Map();
    for (const r of D.trials) {
      const t = r[COL.task];
      if (!byTask.has(t)) byTask.set(t, { task: t, suite: r[COL.suite], early: 0, cells: {} });
      const row = byTask.get(t);
      const c = row.cells[r[COL.variant]] || (row.cells[r[COL.variant]] = { n: 0, ok: 0, score: 0, scored: 0 });
      c.n += 1; c.ok += r[COL.status] === "SUCCESS" ? 1 : 0;
      if (r[COL.score] !== null && r[COL.score] !== undefined) { c.score += r[COL.score]; c.scored += 1; }
      if (r[COL.early]) row.early += 1;
    }
    taskRows = [...byTask.values()].map((row) => {
      let n = 0, ok = 0;
      for (const c of Object.values(row.cells)) { n += c.n; ok += c.ok; }
      return { ...row, n, rate: n ? ok / n : null };
    });
    return vs;
  }
  function tasksSection() {
    const vs = buildTasks();
    const sec = document.getElementById("tasks");
    sec.append(el("h2", {}, `Tasks (${taskRows.length})`));
    sec.append(el("div", { class: "controls" },
      el("input", { type: "search", id: "task-filter", placeholder: "filter tasks…", "aria-label": "filter tasks", oninput: (e) => { tstate.q = e.target.value.toLowerCase(); tstate.page = 0; drawTasks(vs); } }),
      el("span", { id: "task-count", class: "muted" })));
    const cols = [["task", "Task"], ["n", "Trials"], ["rate", "Pass rate"], ...vs.map((v) => ["v:" + v, v]), ["early", "Stopped early"]];
    sec.append(wide(el("table", { id: "task-table" }, el("thead", {}, el("tr", {}, cols.map(([k, label]) => { const sort = () => { if (tstate.sort === k) tstate.desc = !tstate.desc; else { tstate.sort = k; tstate.desc = false; } drawTasks(vs); }; return el("th", { "data-col": k, tabindex: 0, onclick: sort, onkeydown: onKeys(sort) }, label); }))), el("tbody", {}))));
    sec.append(el("div", { class: "pager controls" },
      el("button", { id: "task-prev", onclick: () => { tstate.page = Math.max(0, tstate.page - 1); drawTasks(vs); } }, "‹ previous"),
      el("span", { id: "task-page-info" }),
      el("button", { id: "task-next", onclick: () => { tstate.page += 1; drawTasks(vs); } }, "next ›")));
    drawTasks(vs);
  }
  function drawTasks(vs) {
    const key = (r) => tstate.sort.startsWith("v:") ? (r.cells[tstate.sort.slice(2)] ? r.cells[tstate.sort.slice(2)].ok / r.cells[tstate.sort.slice(2)].n : null) : r[tstate.sort];
    taskView = taskRows.filter((r) => !tstate.q || r.task.toLowerCase().includes(tstate.q) || (r.suite || "").toLowerCase().includes(tstate.q));
    const sign = tstate.desc ? -1 : 1;
    taskView.sort((a, b) => { const x = key(a), y = key(b); if (x === y) return a.task < b.task ? -1 : 1; if (x === null) return 1; if (y === null) return -1; return (x < y ? -1 : 1) * sign; });
    const pages = Math.max(1, Math.ceil(taskView.length / PAGE));
    tstate.page = Math.min(tstate.page, pages - 1);
    const rows = taskView.slice(tstate.page * PAGE, (tstate.page + 1) * PAGE).map((r) => el("tr", { "data-task": r.task, tabindex: 0, onclick: () => setFilter(r.task), onkeydown: onKeys(() => setFilter(r.task)) },
      idCell("mono", r.task), el("td", { class: "num" }, r.n), el("td", { class: "num" }, pct(r.rate)),
      vs.map((v) => { const c = r.cells[v]; return el("td", { class: "num" + (c ? (c.ok === c.n ? " ok" : c.ok ? "" : " bad") : "") }, c ? `${c.ok}/${c.n}` + (c.scored ? ` · ${num(c.score / c.scored, 2)}` : "") : "—"); }),
      el("td", { class: "num" }, r.early ? el("span", { class: "badge early" }, String(r.early)) : "")));
    document.querySelector("#task-table tbody").replaceChildren(...rows);
    document.getElementById("task-count").textContent = `${taskView.length} of ${taskRows.length} tasks; a click shows its trials`;
    document.getElementById("task-page-info").textContent = `page ${tstate.page + 1} of ${pages}`;
    document.getElementById("task-prev").disabled = tstate.page === 0;
    document.getElementById("task-next").disabled = tstate.page >= pages - 1;
    document.querySelectorAll("#task-table th").forEach((th) => sortState(th, th.dataset.col, tstate));
  }

  function trialsSection() {
    const sec = document.getElementById("trials");
    sec.append(el("h2", {}, `Trials (${D.trials.length})`));
    const statuses = [...new Set(D.trials.map((r) => r[COL.status]))].sort();
    const variantsSeen = [...new Set(D.trials.map((r) => r[COL.variant]))];
    const nEarly = D.trials.filter((r) => r[COL.early]).length;
    sec.append(el("div", { class: "controls" },
      el("input", { type: "search", id: "filter", placeholder: "filter: trial, task, status, criterion, error…", "aria-label": "filter trials", oninput: (e) => { state.q = e.target.value; state.task = null; state.page = 0; applyView(); } }),
      el("select", { id: "status-filter", "aria-label": "status", onchange: (e) => { state.status = e.target.value; state.page = 0; applyView(); } }, el("option", { value: "" }, "every status"), statuses.map((s) => el("option", { value: s }, s))),
      variantsSeen.length > 1 ? el("select", { id: "variant-filter", "aria-label": "variant", onchange: (e) => { state.variant = e.target.value; state.page = 0; applyView(); } }, el("option", { value: "" }, "every variant"), variantsSeen.map((s) => el("option", { value: s }, s))) : null,
      el("label", {}, el("input", { type: "checkbox", id: "failed-only", onchange: (e) => { state.failedOnly = e.target.checked; state.page = 0; applyView(); } }), " not succeeded"),
      nEarly ? el("label", {}, el("input", { type: "checkbox", id: "early-only", onchange: (e) => { state.earlyOnly = e.target.checked; state.page = 0; applyView(); } }), ` stopped early (${nEarly})`) : null,
      el("span", { id: "count", class: "muted" })));
    const head = el("tr", {}, SHOWN.map(([k, label]) => { const sort = () => { if (state.sort === k) state.desc = !state.desc; else { state.sort = k; state.desc = false; } applyView(); }; return el("th", { "data-col": k, class: NUMERIC.has(k) ? "num" : "", tabindex: 0, onclick: sort, onkeydown: onKeys(sort) }, label); }));
    sec.append(wide(el("table", { id: "trial-table" }, el("thead", {}, head), el("tbody", {}))));
    sec.append(el("div", { class: "pager controls" },
      el("button", { id: "prev", onclick: () => { state.page = Math.max(0, state.page - 1); drawTable(); } }, "‹ previous"),
      el("span", { id: "page-info" }),
      el("button", { id: "next", onclick: () => { state.page += 1; drawTable(); } }, "next ›")));
  }

  function drawTable() {
    const pages = Math.max(1, Math.ceil(view.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const body = document.querySelector("#trial-table tbody");
    const rows = view.slice(state.page * PAGE, (state.page + 1) * PAGE).map((i) => {
      const r = D.trials[i];
      const failed = r[COL.failed] || [];
      return el("tr", { "data-index": i, class: i === state.selected ? "sel" : "", tabindex: 0, onclick: () => openTrial(i), onkeydown: onKeys(() => openTrial(i)) },
        idCell("mono", r[COL.trial_id]), idCell("id", r[COL.variant]), idCell("id", r[COL.task]),
        el("td", { class: "num" }, r[COL.repeat]),
        el("td", {}, status(r[COL.status]), r[COL.early] ? early() : null),
        el("td", { class: "num" }, num(r[COL.score], 2)), el("td", { class: "num" }, known(r[COL.turns])), el("td", { class: "num" }, known(r[COL.tool_calls])),
        el("td", { class: "num" }, known(r[COL.tokens])), el("td", { class: "num" }, r[COL.cost_unknown] ? el("span", { title: r[COL.cost_unknown] }, cost(r[COL.cost])) : cost(r[COL.cost])),
        el("td", { class: "num" }, dur(r[COL.duration])),
        el("td", {}, failed.join(", "), r[COL.error] ? el("span", { class: "bad", title: r[COL.error] }, (failed.length ? " · " : "") + "error: " + (r[COL.error].length > 80 ? r[COL.error].slice(0, 79) + "…" : r[COL.error])) : null,
          !failed.length && r[COL.limit] ? el("span", { class: "muted", title: r[COL.limit] }, r[COL.limit]) : null));
    });
    body.replaceChildren(...rows);
    document.getElementById("count").textContent = `${view.length} of ${D.trials.length} trials` + (state.task !== null ? ` (task ${state.task})` : "");
    document.getElementById("page-info").textContent = `page ${state.page + 1} of ${pages}`;
    document.getElementById("prev").disabled = state.page === 0;
    document.getElementById("next").disabled = state.page >= pages - 1;
    document.querySelectorAll("#trial-table th").forEach((th) => sortState(th, th.dataset.col, state));
  }

  // -- one trial -------------------------------------------------------------------------
  function openTrial(i) {
    state.selected = i;
    document.querySelectorAll("#trial-table tbody tr").forEach((tr) => tr.classList.toggle("sel", Number(tr.dataset.index) === i));
    const aside = document.getElementById("detail");
    aside.replaceChildren(el("button", { class: "close", title: "close (Esc)", onclick: closeTrial }, "×"));
    const node = document.getElementById("ce-d" + i);
    if (!node) {
      const r = D.trials[i];
      aside.append(el("h2", {}, r[COL.trial_id]), el("p", { class: "note" }, D.detail_note || "This report was made without per-trial detail."));
    } else {
      // the row's turns, tool calls, tokens and cost: null when unknown (report/usage.py's
      // rule), as the table shows them
      const r = D.trials[i];
      window.CE_TRIAL.render(aside, JSON.parse(node.textContent), { el, status, early, num, pct, cost, dur, judgeCalls, knownCost: r[COL.cost],
        knownTurns: r[COL.turns], knownToolCalls: r[COL.tool_calls], knownTokens: r[COL.tokens] });
    }
    aside.hidden = false;
    aside.scrollTop = 0;
    aside.querySelector("button.close").focus();  // the panel takes the focus (Esc closes it)
  }
  function closeTrial() {
    const aside = document.getElementById("detail");
    if (aside.hidden) return;
    const hadFocus = aside.contains(document.activeElement);
    aside.hidden = true;
    const row = document.querySelector(`#trial-table tbody tr[data-index="${state.selected}"]`);
    state.selected = -1;
    document.querySelectorAll("#trial-table tbody tr.sel").forEach((tr) => tr.classList.remove("sel"));
    if (hadFocus && row) row.focus();  // back to the row that opened it
  }
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") closeTrial(); });

  window.CE_REPORT = { data: D, openTrial, setFilter };
  // the trial panel's renderer is defined below (same file), then the page is drawn
  window.addEventListener("DOMContentLoaded", () => {
    header(); summary(); variants(); gates(); tasksSection(); trialsSection(); applyView();
    // report.html#trial=ID (ce compare's page links a flipped trial so) opens its panel
    const m = /^#trial=(.+)$/.exec(location.hash);
    if (m) {
      let id = null;
      try { id = decodeURIComponent(m[1]); } catch (e) { id = null; }
      const i = D.trials.findIndex((r) => r[COL.trial_id] === id);
      if (i >= 0) openTrial(i);
    }
    document.body.dataset.ready = "1";
  });
})();
