// rlserver's status page: polls /v1/stats and draws what it says. Every
// figure shown is a field of the JSON; nothing here comes from outside
// the node. Text from the server (keys, identifiers, reasons) is set with
// textContent, never as HTML.
"use strict";

const SPAN_S = 300;      // seconds of history the charts show
const POLL_MS = 1000;    // how often the page asks
const W = 600, H = 140;  // the charts' viewBox
const SVG = "http://www.w3.org/2000/svg";
let token = sessionStorage.getItem("rlserver-token") || "";
let lastOK = 0;

function $(id) { return document.getElementById(id); }

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = String(text);
  return e;
}

function fmt(n) { return Number(n).toLocaleString("en-US"); }

function duration(s) {
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  if (d > 0) return d + "d " + h + "h";
  if (h > 0) return h + "h " + m + "m";
  if (m > 0) return m + "m " + (s % 60) + "s";
  return s + "s";
}

// row appends a table row of cells, each a value or [value, class].
function row(tbody, cells, attrs) {
  const tr = el("tr");
  for (const k in attrs || {}) tr.setAttribute(k, attrs[k]);
  for (const c of cells) {
    const [v, cls] = Array.isArray(c) ? c : [c, ""];
    tr.appendChild(el("td", cls, v));
  }
  tbody.appendChild(tr);
  return tr;
}

// fill replaces a table's rows with one per item, or a "none" row.
function fill(id, items, cols, each) {
  const tbody = $(id).tBodies[0];
  tbody.replaceChildren();
  if (!items || items.length === 0) {
    const tr = el("tr", "none");
    const td = el("td", "", "none");
    td.colSpan = cols;
    tr.appendChild(td);
    tbody.appendChild(tr);
    return;
  }
  for (const it of items) each(tbody, it);
}

// niceTop returns the top of a chart's scale: the peak rounded up to 1, 2,
// 2.5 or 5 times a power of ten, so that its quarters read as round
// numbers (at least 4, one a quarter).
function niceTop(peak) {
  if (peak <= 4) return 4;
  const p = Math.pow(10, Math.floor(Math.log10(peak)));
  for (const m of [1, 2, 2.5, 5, 10]) {
    if (m * p >= peak) return m * p;
  }
  return 10 * p;
}

// yaxis writes the scale of a chart beside it: top, its quarters and 0,
// per second, level with the grid lines.
function yaxis(id, top) {
  const axis = $(id);
  axis.replaceChildren();
  for (let i = 0; i <= 4; i++) {
    const v = top * (4 - i) / 4;
    const t = el("span", "tick", fmt(Math.round(v * 100) / 100));
    t.setAttribute("data-value", v);
    t.style.top = (i * 25) + "%";
    axis.appendChild(t);
  }
}

// chart draws one series as a polyline over the last SPAN_S seconds,
// ending at the right edge with the newest second, on a scale from 0 to
// niceTop(peak), written beside it.
function chart(id, series, values, nowId, maxId) {
  const svg = $(id);
  svg.replaceChildren();
  for (let i = 1; i < 4; i++) {
    const g = document.createElementNS(SVG, "line");
    g.setAttribute("class", "grid");
    g.setAttribute("x1", 0); g.setAttribute("x2", W);
    g.setAttribute("y1", i * H / 4); g.setAttribute("y2", i * H / 4);
    svg.appendChild(g);
  }
  const n = values.length;
  const peak = n ? Math.max(...values) : 0;
  const top = niceTop(peak);
  yaxis(id.replace("chart-", "y-"), top);
  const end = series.start_unix_ms + n * series.interval_ms;
  const pts = [];
  for (let i = 0; i < n; i++) {
    const t = series.start_unix_ms + (i + 1) * series.interval_ms;
    const x = W - (end - t) / (SPAN_S * 1000) * W;
    if (x < 0) continue;
    const y = H - values[i] / top * H;
    pts.push(x.toFixed(1) + "," + y.toFixed(1));
  }
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("class", "line");
  line.setAttribute("points", pts.join(" "));
  line.setAttribute("data-points", pts.length);
  svg.appendChild(line);
  $(nowId).textContent = n ? fmt(values[n - 1]) : "–";
  $(maxId).textContent = fmt(peak);
}

function rules(list) {
  fill("rules", list, 5, (tb, r) => {
    row(tb, [r.id, r.shadow ? "shadow" : "enforced", [fmt(r.checks), "num checks"],
      [fmt(r.denied), "num denied"], [fmt(r.shadow_denied), "num shadow-denied"]], {"data-rule": r.id});
  });
}

function hotkeys(list) {
  fill("hotkeys", list, 3, (tb, k) => {
    row(tb, [[k.key, "key"], [fmt(k.checks), "num checks"], [fmt(k.denied), "num denied"]], {"data-key": k.key});
  });
}

// blocks shows the newest blocks and the summary of all of them: a node
// may hold a million, of which /v1/stats sends the newest few.
function blocks(list, sum) {
  let text = fmt(sum.active) + " blocked";
  if (sum.hidden) text += "; their identifiers and reasons need the admin token";
  else if (sum.active > sum.shown) text += "; the newest " + fmt(sum.shown) + " shown";
  if (sum.dropped) text += "; " + fmt(sum.dropped) + " dropped to keep within --max-blocks";
  $("blocks-summary").textContent = text;
  fill("blocks", list, 4, (tb, b) => {
    row(tb, [[b.identifier, "identifier"], [duration(Math.ceil(b.ttl_ms / 1000)), "num ttl"],
      b.reason || "–", b.rule || "by hand"], {"data-identifier": b.identifier});
  });
}

function cluster(c) {
  const single = c === null;
  $("single").hidden = !single;
  $("nodes").hidden = single;
  $("groups").hidden = single;
  $("cluster-ok").textContent = single ? "" : (c.ok ? "every slot has a leader" : "some slots have no leader");
  $("cluster-ok").className = single || c.ok ? "muted" : "bad";
  if (single) return;
  const errors = c.errors || {};
  fill("nodes", c.nodes, 6, (tb, n) => {
    const state = n.up ? (n.stopping ? ["stopping", "bad"] : ["up", "good"]) :
      ["down" + (errors[n.id] ? ": " + errors[n.id] : ""), "bad"];
    row(tb, [n.id + (n.self ? " (this node)" : ""), n.resp, n.http || "–", state, [n.leads, "num leads"],
      n.disk_low ? ["low: refusing writes", "bad"] : "ok"], {"data-node": n.id});
  });
  fill("groups", c.groups, 5, (tb, g) => {
    const reps = g.replicas.map(r => r.node + (r.state === "Leader" ? "★" : "") +
      " " + fmt(r.applied) + (r.lag ? " (lag " + fmt(r.lag) + ")" : "")).join(", ");
    row(tb, [[g.id, "num"], g.slots[0] + "–" + g.slots[1], [g.leader || "none", g.leader ? "leader" : "leader bad"],
      [g.log, g.log === "ok" ? "log" : "log bad"], [reps, "replicas"]], {"data-group": g.id});
  });
}

// scopes says, on a cluster node, which figures are this node's own (its
// checks, denials and rules' counts) and which the whole cluster's (hot
// keys, summed over every node; blocks, which every node shares).
function scopes(s) {
  const own = s.cluster ? "node " + s.node + " only" : "this node";
  const all = s.cluster ? "whole cluster" : "this node";
  for (const id of ["scope-totals", "scope-checks", "scope-denied", "scope-rules"]) $(id).textContent = own;
  for (const id of ["scope-hotkeys", "scope-blocks"]) $(id).textContent = all;
}

function show(s) {
  document.title = "rlserver " + s.node + " status";
  scopes(s);
  $("node").textContent = s.node;
  $("mode").textContent = s.mode;
  $("version").textContent = s.version;
  $("uptime").textContent = duration(s.uptime_s);
  $("writes").textContent = s.writes;
  $("writes").className = s.writes === "ok" ? "good" : "bad";
  $("total-checks").textContent = fmt(s.totals.checks);
  $("total-denied").textContent = fmt(s.totals.denied);
  chart("chart-checks", s.series, s.series.checks, "checks-now", "checks-max");
  chart("chart-denied", s.series, s.series.denied, "denied-now", "denied-max");
  rules(s.rules);
  hotkeys(s.hotkeys);
  blocks(s.blocks, s.block_summary);
  cluster(s.cluster);
  lastOK = Date.now();
  $("updated").textContent = "updated " + new Date(s.time_unix_ms).toLocaleTimeString();
  $("updated").className = "muted";
}

async function poll() {
  try {
    const headers = token ? {"Authorization": "Bearer " + token} : {};
    const r = await fetch("v1/stats", {headers: headers, cache: "no-store"});
    if (r.status === 401) {
      $("auth").hidden = false;
      $("updated").textContent = "this node asks for a token";
    } else if (!r.ok) {
      throw new Error("HTTP " + r.status);
    } else {
      $("auth").hidden = true;
      show(await r.json());
    }
  } catch (e) {
    const ago = lastOK ? Math.round((Date.now() - lastOK) / 1000) + " s ago" : "never";
    $("updated").textContent = "no answer from the node (" + e.message + "); last update " + ago;
    $("updated").className = "stale";
  }
  setTimeout(poll, POLL_MS);
}

$("auth").addEventListener("submit", ev => {
  ev.preventDefault();
  token = $("token").value;
  sessionStorage.setItem("rlserver-token", token);
});

// The figures the page was served with are drawn at once, before the
// first poll answers: the first paint has data.
const initial = $("initial-stats").textContent;
if (initial) {
  try { show(JSON.parse(initial)); } catch (e) { /* the poll draws it */ }
}
poll();
