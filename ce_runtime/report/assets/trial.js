// One trial's panel: criteria with evidence, arithmetic, command output, timeline, files.
"use strict";
window.CE_TRIAL = (function () {
  function render(root, d, h) {
    const { el, status, early, num, cost, dur, knownCost, knownTurns, knownToolCalls, knownTokens, judgeCalls } = h;
    const unknown = (v) => v === null || v === undefined;
    // unknown (no rate, none reported, no agent): said so, never $0
    const costText = unknown(knownCost) ? "cost unknown" + (d.cost_unknown ? " (" + d.cost_unknown + ")" : "") : cost(knownCost);
    const u = d.usage || {};
    // the prompt cache's tokens, as the run's Tokens row says them (report.md's fmt_tokens)
    const cached = u.cache_read_tokens || u.cache_write_tokens ? ` / ${(u.cache_read_tokens || 0).toLocaleString("en")} cache read / ${(u.cache_write_tokens || 0).toLocaleString("en")} cache write` : "";
    // turns, tool calls and tokens the trial did not measure (no agent ran, no token
    // reported: report/usage.py's rule, as the table's "—"): unknown, never 0
    const turnsText = unknown(knownTurns) ? "turns unknown" : `${knownTurns} turn(s)`;
    const toolsText = unknown(knownToolCalls) ? "tool calls unknown" : `${knownToolCalls} tool call(s)`;
    const tokensText = unknown(knownTokens) ? "tokens unknown" : `${(u.input_tokens || 0).toLocaleString("en")} in / ${(u.output_tokens || 0).toLocaleString("en")} out${cached} tokens`;
    root.append(el("h2", { id: "detail-title" }, d.trial_id),
      el("p", {}, status(d.status), d.stopped_early ? early() : null,
        ` · score ${num(d.weighted_score, 3)} · ${turnsText}, ${toolsText} · ${tokensText} · ${costText} · ${dur(d.duration_s)}`),
      judgeLine(d.judge_usage, el, cost, judgeCalls),
      el("p", { class: "muted" }, `agent ${d.agent || "?"}` + (d.model ? `, model ${d.model}` : "") + (d.started_at ? ` · started ${d.started_at}` : "") +
        (d.dir ? ` · the evaluation tree of every criterion: ce explain RUN/${d.dir}` : "")));
    for (const n of d.notes || []) root.append(el("p", { class: "note" }, n));
    if (d.prompt) root.append(el("details", { class: "prompt" }, el("summary", {}, "Prompt"), el("pre", {}, d.prompt)));
    if ((d.attempts || []).length) {
      root.append(el("h3", {}, `Earlier attempts (${d.attempts.length}): the run ran this trial again after an ERROR`));
      const ul = el("ul", { class: "attempts" });
      for (const a of d.attempts) ul.append(el("li", {}, `attempt ${a.n}: ${a.status || "record unreadable"}` + (a.error ? ` — ${a.error}` : "") + ` (kept in RUN/${a.dir})`));
      root.append(ul);
    }
    if (d.error) root.append(el("h3", {}, "Trial error"), el("pre", {}, d.error));
    const o = d.agent_outcome;
    if (o && o.reason && o.reason !== "finished") root.append(el("p", {}, `agent ended: ${o.reason}` + (o.detail ? `: ${o.detail}` : "")));
    if (d.stopped_early) {
      const es = d.early_stop || {};
      root.append(el("h3", {}, "Early stop"), el("p", { class: "early-stop" },
        `${d.early_stop_reason || "armed criteria decided"}` +
        (es.deciding_criterion ? `; decided by ${es.deciding_criterion} (${es.deciding_criterion_type || ""}: ${es.deciding_criterion_description || ""})` : "") +
        (es.rule ? `; rule ${es.rule}` : "") + (es.turn_index !== undefined ? `; at turn ${es.turn_index}` : "") +
        (es.turns_remaining_at_stop !== undefined ? `, ${es.turns_remaining_at_stop} turn(s) left` : "") +
        ". Non-armed criteria are advisory (reported, not gated)."));
    }

    root.append(el("h3", {}, "Criteria"));
    if (!(d.criteria || []).length) root.append(el("p", { class: "muted no-criteria" }, "no criterion was graded" + (d.weighted_score === null || d.weighted_score === undefined ? ": the trial never reached grading (ce explain grades its archived workspace for information)" : "")));
    for (const c of d.criteria || []) {
      const cls = c.disabled ? "off" : c.passed ? "pass" : "fail";
      const box = el("div", { class: "crit " + cls, "data-criterion": c.id });
      box.append(el("div", {}, el("b", {}, `${c.id} ${c.type}`), c.description ? `: ${c.description}` : "",
        c.advisory ? el("span", { class: "badge adv" }, "advisory — not gated") : null,
        c.disabled ? el("span", { class: "badge" }, "disabled") : null));
      // a failed score and its threshold as report.md says them (c.below: fmt_below)
      const [shownScore, shownThreshold] = c.below || [num(c.score, 3), num(c.pass_threshold, 2)];
      box.append(el("div", { class: "mono" }, `score ${shownScore} (${c.kind || "?"}) vs pass threshold ${shownThreshold} -> ${c.passed ? "PASS" : "FAIL"}; weight ${c.weight ?? "?"}` + (c.gating ? "" : " (not gated)")));
      const args = Object.entries(c.args || {});
      if (args.length) box.append(el("div", { class: "mono muted args" }, args.map(([k, v]) => `${k}: ${v}`).join("; ")));
      const outs = Object.entries(c.outputs || {});
      if (outs.length) box.append(el("div", { class: "mono" }, outs.map(([k, v]) => `${k} = ${v}`).join("; ")));
      if (c.error) box.append(el("div", { class: "bad" }, "error: "), el("pre", {}, c.error));
      for (const ev of c.evidence || []) box.append(evidence(ev, el));
      root.append(box);
    }
    if ((d.arithmetic || []).length) root.append(el("pre", { class: "arithmetic" }, d.arithmetic.join("\n")));

    if ((d.commands || []).length) {
      root.append(el("h3", {}, "Commands (pre_run / post_run)"));
      for (const c of d.commands) root.append(command(c, el, c.phase));
    }
    if ((d.setup || []).length) root.append(el("details", {}, el("summary", {}, "Set-up"), el("pre", {}, d.setup.join("\n"))));

    root.append(el("h3", {}, `Timeline (${(d.timeline || []).length} events)`));
    root.append(timeline(d.timeline || [], el, cost));

    root.append(el("h3", {}, "Workspace"));
    if (!d.files) root.append(el("p", { class: "muted" }, "no workspace snapshot"));
    else root.append(files(d.files, el));
  }

  // the judges' tokens and cost (task.json's judge_usage), apart from the agent's on the
  // line above, as report.md's Judge tokens and Judge cost rows say the run's
  function judgeLine(j, el, cost, judgeCalls) {
    if (!j) return null;
    const n = (v) => Number(v || 0).toLocaleString("en");
    const cached = j.cache_read_tokens || j.cache_write_tokens ? ` / ${n(j.cache_read_tokens)} cache read / ${n(j.cache_write_tokens)} cache write` : "";
    // a judge model without a rate, a verdict recorded without its usage: its part of the
    // cost is unknown, said with why (never counted as $0)
    const why = (j.cost_unknown || []).join("; ");
    const costText = !why ? cost(j.cost_usd) : j.cost_usd ? `${cost(j.cost_usd)} + unknown (${why})` : `cost unknown (${why})`;
    return el("p", { class: "judge-usage" }, `judges: ${n(j.input_tokens)} in / ${n(j.output_tokens)} out${cached} tokens, ${costText} ` +
      `(${judgeCalls(j)}, ${j.recorded || 0} reused from the cache) — not in the agent's tokens and cost above`);
  }

  function command(c, el, label) {
    const box = el("div", { class: "cmd" });
    box.append(el("div", { class: "mono" }, `${label ? label + ": " : ""}$ ${c.command || ""}  → exit ${c.exit_code ?? "?"}` + (c.timed_out ? " (timed out)" : "")));
    if (c.stdout) box.append(el("div", { class: "muted" }, "stdout"), el("pre", {}, c.stdout));
    if (c.stderr) box.append(el("div", { class: "muted" }, "stderr"), el("pre", {}, c.stderr));
    return box;
  }

  function evidence(ev, el) {
    if (ev.kind === "command") return command(ev, el, "ran");
    if (ev.kind === "found") {  // why it did not pass: what `ce explain` prints first
      return el("ul", { class: "found" }, (ev.lines || []).map((line) => el("li", { class: "mono" }, line)));
    }
    if (ev.kind === "judge") {  // `ce explain`'s lines (html_trial.py _judge: judge_lines)
      const s = ev.said || { head: "judge", parts: [] };
      const box = el("div", { class: "judge" }, el("div", { class: "mono" }, s.head));
      for (const p of s.parts) {
        if (!p.items.length) { box.append(el("div", { class: "mono said" }, p.text)); continue; }
        // the session's tool calls: listed when a few, else folded under its line
        const calls = el("ul", { class: "mono" }, p.items.map((t) => el("li", {}, t)));
        box.append(el("details", { class: "said", open: p.items.length <= 3 }, el("summary", { class: "mono" }, p.text), calls));
      }
      return box;
    }
    return el("pre", {}, JSON.stringify(ev, null, 1));
  }

  function timeline(events, el, cost) {
    const rows = events.map((e) => {
      let k = e.k, text = "";
      if (e.k === "message") { k = e.role; text = e.text; }
      else if (e.k === "tool") { k = `${e.tool}` + (e.raw_tool && e.raw_tool !== e.tool ? ` (${e.raw_tool})` : ""); text = e.params; }
      else if (e.k === "result") text = e.output;
      else if (e.k === "usage") {
        // tokens with thousands separators, as the panel's header and report.md say them
        const n = (v) => Number(v || 0).toLocaleString("en");
        const cached = (r, w) => r || w ? ` / ${n(r)} cache read / ${n(w)} cache write` : "";
        text = `+${n(e.in)} in / +${n(e.out)} out${cached(e.cache_read, e.cache_write)} tokens, ${cost(e.cost)} ` +
          `(so far ${n(e.total_in)} / ${n(e.total_out)}${cached(e.total_cache_read, e.total_cache_write)}, ${cost(e.total_cost)})`;
      }
      else if (e.k === "model_error") { k = "model error"; text = `the model call failed: ${e.text}`; }
      else if (e.k === "decision") text = `live monitor: ${e.criterion} decided ${e.verdict} (at event ${e.event})`;
      else if (e.k === "end") text = `agent ended: ${e.reason}` + (e.detail ? ` (${e.detail})` : "");
      else if (e.k === "run_end") text = `run ended: ${e.status}` + (e.error ? ` (${e.error})` : "");
      else if (e.k === "start") text = `agent ${e.agent}` + (e.model ? `, model ${e.model}` : "");
      const cell = el("td", {}, el("div", { class: "mono" }, text));
      if (e.k === "tool" && e.status !== undefined) {
        cell.append(el("div", { class: e.status === "ok" ? "muted" : "bad" }, `→ ${e.status}` + (e.ms ? ` in ${e.ms} ms` : "")));
        if (e.output) cell.append(el("pre", {}, e.output));
      }
      return el("tr", { class: e.k }, el("td", { class: "num" }, Number(e.t).toFixed(2) + "s"), el("td", { class: "num" }, e.turn || ""), el("td", { class: "k" }, k), cell);
    });
    return el("table", { class: "tl" }, el("thead", {}, el("tr", {}, ["t", "turn", "event", ""].map((x) => el("th", {}, x)))), el("tbody", {}, rows));
  }

  function diffPre(text, el) {
    const pre = el("pre", { class: "diff" });
    for (const line of text.split("\n")) {
      const cls = line.startsWith("@@") ? "hunk" : line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : "";
      pre.append(el("span", { class: cls }, line + "\n"));
    }
    return pre;
  }

  function files(list, el) {
    // .venv, node_modules, .git and __pycache__ are left out of the snapshot
    if (!list.length) return el("p", { class: "muted" }, "no file: the workspace was empty when the agent ended (its .venv, node_modules, .git and __pycache__ are not kept)");
    const counts = {};
    list.forEach((f) => { counts[f.status] = (counts[f.status] || 0) + 1; });
    const wrap = el("div", {}, el("p", { class: "muted" }, Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(", ") + " (against the template)"));
    const body = el("tbody", {});
    for (const f of list) {
      const content = f.diff ? diffPre(f.diff, el) : f.text !== undefined ? el("pre", {}, f.text) : f.binary ? el("span", { class: "muted" }, "binary or too large to show") : f.link ? el("span", { class: "mono" }, `→ ${f.link}`) : null;
      const row = el("tr", { class: "file", "data-path": f.path },
        el("td", { class: "mono" }, f.path), el("td", { class: "fs-" + f.status }, f.status),
        el("td", { class: "num" }, f.size === undefined ? "" : f.size.toLocaleString("en")));
      body.append(row);
      if (content) {
        const holder = el("tr", { hidden: f.status !== "modified" && f.status !== "added" }, el("td", { colspan: 3 }, content));
        row.style.cursor = "pointer";
        row.addEventListener("click", () => { holder.hidden = !holder.hidden; });
        // from the keyboard too: the row takes the focus, Enter or Space toggles it
        row.tabIndex = 0;
        row.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); holder.hidden = !holder.hidden; } });
        body.append(holder);
      }
    }
    wrap.append(el("table", { class: "file-list" }, el("thead", {}, el("tr", {}, ["File", "Status", "Bytes"].map((x) => el("th", {}, x)))), body));
    return wrap;
  }

  return { render };
})();
