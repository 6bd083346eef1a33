// Sluice console: a single page with hash routes, reading /ui/api/*.
// Everything shown is set with textContent (never innerHTML), so record
// keys, values and names cannot inject markup.
"use strict";

const api = "api/";
let routeGen = 0;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const kid of kids) {
    if (kid === null || kid === undefined) continue;
    e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return e;
}

// put replaces node's children with kids, skipping null ones.
function put(node, ...kids) {
  node.replaceChildren(...kids.filter(k => k !== null && k !== undefined));
}

function table(id, heads, rows) {
  const thead = el("thead", {}, el("tr", {}, ...heads.map(h => {
    const [name, cls] = Array.isArray(h) ? h : [h, ""];
    return el("th", { class: cls || null, text: name });
  })));
  return el("table", { id }, thead, el("tbody", {}, ...rows));
}

function num(n) { return n === undefined || n === null || n < 0 ? "?" : n.toLocaleString("en-US"); }

function bytes(n) {
  if (n === undefined || n === null || n < 0) return "?";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + u[i];
}

function ids(a) { return a && a.length ? a.join(", ") : "–"; }

async function get(path) {
  const r = await fetch(api + path, { headers: { "Accept": "application/json" } });
  let body;
  try { body = await r.json(); } catch (e) { throw new Error("HTTP " + r.status); }
  if (!r.ok) throw new Error(body && body.error ? body.error : "HTTP " + r.status);
  return body;
}

function topicHref(name) { return "#/topics/" + encodeURIComponent(name); }
function groupHref(id) { return "#/groups/" + encodeURIComponent(id); }

// ---- banner, on every page

let bannerBusy = false;

async function refreshBanner() {
  if (bannerBusy) return; // a slow cluster: one request at a time
  bannerBusy = true;
  const b = document.getElementById("banner");
  try {
    const res = await get("alerts");
    put(b, ...res.alerts.map(a =>
      el("div", { class: "alert " + (a.severity === "critical" ? "critical" : "warning"), "data-title": a.title },
        el("b", { text: a.title }), a.detail ? el("span", { text: a.detail }) : null)));
  } catch (e) {
    put(b, el("div", { class: "alert critical" }, el("b", { text: "the console cannot reach its broker" }), el("span", { text: e.message })));
  }
  bannerBusy = false;
  b.dataset.loaded = "1";
}

// ---- charts

// niceMax is the chart's top: the least 1, 2 or 5 times a power of ten
// at or above v (at least 1).
function niceMax(v) {
  if (!(v > 1)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// short is a rate for an axis: 1.2k, 3M, 0.5.
function short(v) {
  if (v >= 1e6) return +(v / 1e6).toFixed(1) + "M";
  if (v >= 1e3) return +(v / 1e3).toFixed(1) + "k";
  return v < 10 ? String(+v.toFixed(1)) : String(Math.round(v));
}

// chart draws values (records/s, null unknown) over spanMs, with a scale:
// 0 and the top of the y axis in records/s, the time span on the x axis.
function chart(values, cls, spanMs) {
  const ns = "http://www.w3.org/2000/svg", W = 240, H = 58, L = 40, R = 236, T = 6, B = 44;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark " + cls);
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  const vs = values.map(v => (v === null ? 0 : v));
  const peak = Math.max(0, ...vs);
  const top = niceMax(peak);
  svg.dataset.max = String(peak);
  svg.dataset.top = String(top);
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  add("title", {}, "peak " + rateText(peak) + " · scale 0 to " + short(top) + " records/s");
  add("line", { class: "axis", x1: L, y1: T, x2: L, y2: B });
  add("line", { class: "axis", x1: L, y1: B, x2: R, y2: B });
  add("line", { class: "grid", x1: L, y1: T, x2: R, y2: T });
  add("text", { class: "tick y-top", x: L - 3, y: T + 4, "text-anchor": "end" }, short(top) + "/s");
  add("text", { class: "tick y-zero", x: L - 3, y: B + 3, "text-anchor": "end" }, "0");
  add("text", { class: "tick x-start", x: L, y: H - 2, "text-anchor": "start" }, "−" + Math.round(spanMs / 1000) + " s");
  add("text", { class: "tick x-end", x: R, y: H - 2, "text-anchor": "end" }, "now");
  if (vs.length > 1) {
    const pts = vs.map((v, i) => (L + i * (R - L) / (vs.length - 1)).toFixed(1) + "," + (B - v * (B - T) / top).toFixed(1));
    add("polyline", { class: cls, points: pts.join(" ") });
  }
  return svg;
}

function rateText(v) { return v === null || v === undefined ? "–" : (v < 10 ? v.toFixed(1) : Math.round(v).toLocaleString("en-US")) + "/s"; }

async function drawCharts(container, only) {
  let r;
  try { r = await get("rates"); } catch (e) { put(container, el("p", { class: "error", text: e.message })); return; }
  const series = r.topics.filter(s => !only || s.topic === only);
  if (r.times.length < 2) {
    put(container, el("p", { class: "muted", text: "Collecting samples (one every " + r.intervalMs / 1000 + " s)…" }));
    return;
  }
  const span = r.times[r.times.length - 1] - r.times[0];
  const nowTitle = "the average over the last " + r.nowMs / 1000 + " s";
  const now = v => el("td", { class: "num now", title: v === null ? "known once " + r.nowMs / 1000 + " s of samples are in" : nowTitle, text: rateText(v) });
  const rows = series.map(s => el("tr", { "data-topic": s.topic },
    el("td", {}, el("a", { href: topicHref(s.topic), text: s.topic })),
    el("td", {}, chart(s.produce, "produce", span)), now(s.produceNow),
    el("td", {}, chart(s.consume, "consume", span)), now(s.consumeNow)));
  put(container,
    el("p", { class: "muted" }, "Records/s, a point every " + r.intervalMs / 1000 + " s over the last " + Math.round(span / 1000) + " s (up to " + Math.round(r.windowMs / 60000) + " min); now: " + nowTitle + ". ",
      el("span", { class: "legend-p", text: "Produced" }), ": log end offsets. ",
      el("span", { class: "legend-c", text: "Consumed" }),
      r.consumeFrom === "fetch" ? ": records sent by this broker's Fetch responses (in a cluster, of the partitions it leads)." : ": offsets committed by groups."),
    table("charts", ["Topic", "Produce", ["now", "num"], "Consume", ["now", "num"]], rows));
}

// ---- pages

async function pageOverview(main) {
  const o = await get("overview");
  const brokers = o.brokers.map(b => el("tr", { "data-broker": b.id, class: b.down ? "bad" : "" },
    el("td", { text: b.id }), el("td", { text: b.down ? (b.port >= 0 ? b.host + ":" + b.port + " (down)" : "down") : b.host + ":" + b.port }), el("td", { text: b.rack || "–" }),
    el("td", { text: b.controller ? "controller" : "" }),
    el("td", { class: "num", text: num(b.leaders) }), el("td", { class: "num", text: num(b.replicas) }),
    el("td", { class: "num", text: bytes(b.bytes) })));
  const card = (k, v, cls, id) => el("div", { class: "card" }, el("div", { class: "v " + (cls || ""), id, text: v }), el("div", { class: "k", text: k }));
  const charts = el("div", { id: "charts-box" });
  put(main, 
    el("h1", { text: "Cluster overview" }),
    el("div", { class: "cards" },
      card("health", o.healthy ? "healthy" : "attention", o.healthy ? "ok" : "bad", "health"),
      card("brokers", o.brokers.some(b => b.down) ? o.brokers.filter(b => !b.down).length + " of " + o.brokers.length + " up" : o.brokers.length, o.brokers.some(b => b.down) ? "bad" : "", "broker-count"),
      card("controller", o.controller < 0 ? "none" : "broker " + o.controller, o.controller < 0 ? "bad" : "", "controller"),
      card("topics", o.topics), card("partitions", o.partitions),
      card("under-replicated", o.underReplicated, o.underReplicated ? "bad" : ""),
      card("offline", o.offline, o.offline ? "bad" : "")),
    el("p", { class: "muted", text: "Cluster id " + (o.cluster || "?") }),
    el("h2", { text: "Brokers" }),
    table("brokers", ["Id", "Address", "Rack", "Role", ["Leaders", "num"], ["Replicas", "num"], ["Log size", "num"]], brokers),
    el("h2", { text: "Throughput" }), charts);
  await drawCharts(charts);
  every(() => drawCharts(charts), 2000, charts);
}

async function pageTopics(main) {
  const ts = await get("topics");
  const rows = ts.map(t => el("tr", { "data-topic": t.name },
    el("td", {}, el("a", { href: topicHref(t.name), text: t.name }), t.internal ? el("span", { class: "muted", text: " internal" }) : null),
    el("td", { class: "num partitions", text: t.partitions }),
    el("td", { class: "num", text: t.replicationFactor }),
    el("td", { class: "num", text: num(t.records) }),
    el("td", { class: "num", text: bytes(t.bytes) }),
    el("td", { class: t.offline || t.underReplicated ? "bad" : "ok",
      text: t.offline ? t.offline + " offline" : t.underReplicated ? t.underReplicated + " under-replicated" : (t.error || "ok") })));
  const charts = el("div", { id: "charts-box" });
  put(main, el("h1", { text: "Topics" }),
    table("topics", ["Topic", ["Partitions", "num"], ["Replication", "num"], ["Records", "num"], ["Size", "num"], "Health"], rows),
    el("h2", { text: "Throughput" }), charts);
  await drawCharts(charts);
  every(() => drawCharts(charts), 2000, charts);
}

async function pageTopic(main, name) {
  const t = await get("topics/" + encodeURIComponent(name));
  const rows = t.partitions.map(p => el("tr", { "data-partition": p.partition },
    el("td", { class: "num", text: p.partition }),
    el("td", { class: p.leader < 0 ? "bad" : "", text: p.leader < 0 ? "none" : p.leader }),
    el("td", { class: "num", text: p.leaderEpoch }),
    el("td", { text: ids(p.replicas) }),
    el("td", { class: p.isr.length < p.replicas.length ? "bad" : "", text: ids(p.isr) }),
    el("td", { class: p.downReplicas.length || p.offlineReplicas.length ? "bad" : "", text: ids([...new Set(p.downReplicas.concat(p.offlineReplicas))]) }),
    el("td", { class: "num", text: num(p.startOffset) }),
    el("td", { class: "num", text: num(p.endOffset) }),
    el("td", { class: "num", text: bytes(p.bytes) }),
    el("td", {}, el("a", { href: topicHref(name) + "/messages?partition=" + p.partition, text: "messages" }))));
  const cfgs = t.configs.map(c => el("tr", {}, el("td", { text: c.name }),
    el("td", { text: c.sensitive ? "(sensitive)" : c.value }), el("td", { class: "muted", text: c.source })));
  const charts = el("div", { id: "charts-box" });
  put(main, 
    el("h1", {}, "Topic ", el("span", { id: "topic-name", text: t.name })),
    el("p", { class: "muted" }, el("span", { id: "partition-count", text: t.partitions.length }), " partitions · topic id " + t.id + (t.internal ? " · internal" : "")),
    t.error ? el("p", { class: "error", text: t.error }) : null,
    table("partitions", [["Partition", "num"], "Leader", ["Leader epoch", "num"], "Replicas", "ISR", "Down/offline", ["Log start", "num"], ["High watermark", "num"], ["Size", "num"], ""], rows),
    el("h2", { text: "Configs not at their default" }),
    cfgs.length ? table("configs", ["Name", "Value", "Source"], cfgs) : el("p", { class: "muted", id: "configs", text: "All configs are at their defaults." }),
    el("h2", { text: "Throughput" }), charts);
  await drawCharts(charts, name);
  every(() => drawCharts(charts, name), 2000, charts);
}

const views = ["auto", "text", "json", "hex"];

function showBytes(b, view) {
  if (b.null) return el("pre", { class: "null muted", text: "null" });
  let kind = view;
  if (kind === "auto") kind = b.json !== null ? "json" : b.text !== null ? "text" : "hex";
  let s = kind === "json" ? b.json : kind === "text" ? b.text : b.hex;
  let note = "";
  if (s === null) { note = "(not " + (kind === "json" ? "JSON" : "UTF-8") + "; hex) "; s = b.hex; kind = "hex"; }
  return el("pre", { class: "bytes " + kind, "data-kind": kind, text: (note ? note + "\n" : "") + s + (b.truncated ? "\n… (" + b.size + " bytes, truncated)" : "") });
}

async function pageMessages(main, name, params) {
  const partition = params.get("partition") || "0";
  const q = new URLSearchParams({ partition });
  if (params.get("offset")) q.set("offset", params.get("offset"));
  if (params.get("timestamp")) q.set("timestamp", params.get("timestamp"));
  if (params.get("limit")) q.set("limit", params.get("limit"));
  const view = views.includes(params.get("view")) ? params.get("view") : "auto";
  const m = await get("topics/" + encodeURIComponent(name) + "/messages?" + q.toString());

  const form = el("form", { class: "inline", id: "browse" },
    el("label", {}, "Partition", el("input", { name: "partition", type: "number", min: "0", value: partition, size: "4" })),
    el("label", {}, "From offset", el("input", { name: "offset", value: params.get("offset") || "", placeholder: "last 50", size: "10" })),
    el("label", {}, "or from time", el("input", { name: "timestamp", value: params.get("timestamp") || "", placeholder: "2026-01-02T15:04:05Z or ms", size: "24" })),
    el("label", {}, "Show as", el("select", { name: "view" }, ...views.map(v => el("option", { value: v, selected: v === view ? "selected" : null, text: v })))),
    el("button", { type: "submit", text: "Read" }));
  form.addEventListener("submit", ev => {
    ev.preventDefault();
    const f = new FormData(form);
    const n = new URLSearchParams();
    for (const k of ["partition", "offset", "timestamp", "view"]) if (f.get(k)) n.set(k, f.get(k));
    location.hash = topicHref(name) + "/messages?" + n.toString();
  });
  form.querySelector("select").addEventListener("change", () => form.requestSubmit());

  // A compact table: one line per record (offset, time, key and value
  // previews, headers count); a click on a line shows the record whole
  // below it, in the chosen view.
  const limit = Number(params.get("limit")) || 50;
  const recs = m.records.map(r => {
    const detail = el("tr", { class: "detail", hidden: "hidden" }, el("td", { colspan: "5" },
      el("div", { class: "field key" }, el("div", { class: "label", text: "key (" + r.key.size + " bytes)" }), showBytes(r.key, view)),
      el("div", { class: "field value" }, el("div", { class: "label", text: "value (" + r.value.size + " bytes)" }), showBytes(r.value, view)),
      r.headers.length ? el("div", { class: "field headers" }, el("div", { class: "label", text: "headers" }),
        ...r.headers.map(h => el("div", { class: "header" }, el("span", { class: "label", text: h.key + ": " }), showBytes(h.value, view)))) : null,
      el("div", { class: "muted", text: "leader epoch " + r.leaderEpoch })));
    const line = el("tr", { class: "line", title: "show the whole record", onclick: () => { detail.hidden = !detail.hidden; } },
      el("td", { class: "num offset", text: r.offset }),
      el("td", { class: "ts", text: isoTime(r.timestamp) }),
      el("td", { class: "k-preview" }, preview(r.key, view, 40)),
      el("td", { class: "v-preview" }, preview(r.value, view, 120)),
      el("td", { class: "num hdrs", text: r.headers.length || "" }));
    return el("tbody", { class: "record", "data-offset": r.offset }, line, detail);
  });
  const first = m.records.length ? m.records[0].offset : m.from;
  const next = m.records.length ? m.records[m.records.length - 1].offset + 1 : null;
  const page = off => topicHref(name) + "/messages?" + new URLSearchParams({ partition, offset: off, view, limit }).toString();
  const pager = el("p", { class: "pager" },
    first > m.startOffset ? el("a", { href: page(Math.max(m.startOffset, first - limit)), class: "prev", text: "← older" }) : el("span", { class: "muted", text: "← older" }),
    " · ", el("a", { href: page(m.startOffset), text: "first" }),
    " · ", el("a", { href: topicHref(name) + "/messages?" + new URLSearchParams({ partition, view, limit }).toString(), text: "latest" }),
    " · ", m.more && next !== null ? el("a", { href: page(next), class: "next", text: "newer →" }) : el("span", { class: "muted", text: "newer →" }));
  const thead = el("thead", {}, el("tr", {}, el("th", { class: "num", text: "Offset" }), el("th", { text: "Timestamp" }),
    el("th", { text: "Key" }), el("th", { text: "Value" }), el("th", { class: "num", text: "Headers" })));
  put(main,
    el("h1", {}, "Messages of ", el("a", { href: topicHref(name), text: name }), " partition " + m.partition),
    el("p", { class: "muted", id: "browse-range", text: "log start " + m.startOffset + " · high watermark " + m.endOffset + " · showing " + m.records.length + " from offset " + m.from + " · click a line for the whole record" }),
    m.note ? el("p", { class: "muted", text: m.note }) : null,
    form,
    m.records.length ? el("table", { id: "messages", class: "messages" }, thead, ...recs) : el("p", { class: "muted", id: "messages", text: "No records here." }),
    pager);
}

// preview is bytes on one line, at most n characters, in view (auto:
// text when it is UTF-8, else hex: the bytes of Go's hex.Dump lines).
function preview(b, view, n) {
  if (b.null) return el("span", { class: "null muted", text: "null" });
  let s = view === "hex" || b.text === null ? b.hex.split("\n").map(l => l.slice(10, 58)).join(" ") : b.text;
  s = s.replace(/\s+/g, " ").trim();
  const cut = s.length > n || b.truncated;
  return el("span", { class: "pv", text: (s.length > n ? s.slice(0, n) : s) + (cut ? "…" : "") });
}

async function pageGroups(main) {
  const gs = await get("groups");
  const rows = gs.map(g => el("tr", { "data-group": g.group },
    el("td", {}, el("a", { href: groupHref(g.group), text: g.group })),
    el("td", { text: g.type || "classic" }), el("td", { text: g.state }),
    el("td", { class: "num members", text: g.members.length }),
    el("td", { class: "num", text: g.coordinator }),
    el("td", { class: "num lag", text: num(g.lag) }),
    el("td", { class: "error", text: g.error || "" })));
  put(main, el("h1", { text: "Consumer groups" }),
    rows.length ? table("groups", ["Group", "Type", "State", ["Members", "num"], ["Coordinator", "num"], ["Lag", "num"], ""], rows)
      : el("p", { class: "muted", id: "groups", text: "No groups." }));
}

async function pageGroup(main, id) {
  const g = await get("groups/" + encodeURIComponent(id));
  const members = g.members.map(m => el("tr", {},
    el("td", { text: m.memberId }), el("td", { text: m.instanceId || "–" }), el("td", { text: m.clientId }), el("td", { text: m.host }),
    el("td", { text: m.assignment.map(a => a.topic + " [" + a.partitions.join(", ") + "]").join("; ") || "–" })));
  const offsets = g.offsets.map(o => el("tr", { "data-tp": o.topic + "-" + o.partition },
    el("td", {}, el("a", { href: topicHref(o.topic), text: o.topic })), el("td", { class: "num", text: o.partition }),
    el("td", { class: "num", text: o.committed < 0 ? "–" : num(o.committed) }),
    el("td", { class: "num", text: num(o.end) }),
    el("td", { class: "num lag", text: num(o.lag) }),
    el("td", { text: o.member || "–" })));
  put(main, 
    el("h1", {}, "Group ", el("span", { id: "group-name", text: g.group })),
    el("div", { class: "cards" },
      el("div", { class: "card" }, el("div", { class: "v", text: g.state }), el("div", { class: "k", text: "state" })),
      el("div", { class: "card" }, el("div", { class: "v", text: g.members.length }), el("div", { class: "k", text: "members" })),
      el("div", { class: "card" }, el("div", { class: "v", id: "group-lag", text: num(g.lag) }), el("div", { class: "k", text: "total lag (records)" })),
      el("div", { class: "card" }, el("div", { class: "v", text: g.coordinator }), el("div", { class: "k", text: "coordinator" }))),
    el("p", { class: "muted", text: "type " + (g.type || "classic") + " · protocol type " + (g.protocolType || "–") + " · assignor " + (g.protocol || "–") }),
    g.error ? el("p", { class: "error", text: g.error }) : null,
    el("h2", { text: "Members" }),
    members.length ? table("members", ["Member id", "Instance id", "Client id", "Host", "Assignment"], members) : el("p", { class: "muted", text: "No members." }),
    el("h2", { text: "Committed offsets and lag" }),
    table("offsets", ["Topic", ["Partition", "num"], ["Committed", "num"], ["High watermark", "num"], ["Lag", "num"], "Member"], offsets));
}

// ---- router

// every calls fn each ms while node is on the page.
function every(fn, ms, node) {
  const id = setInterval(() => { if (node.isConnected) fn(); else clearInterval(id); }, ms);
}

// isoTime is a record timestamp (ms) as ISO 8601, or the number itself
// when Date cannot represent it (|ts| > 8.64e15 throws).
function isoTime(ts) {
  const d = new Date(ts);
  return isNaN(d.getTime()) ? String(ts) + " ms" : d.toISOString();
}

// route renders the page the hash names into a fresh view, shown only if
// no later navigation started meanwhile.
async function route() {
  const gen = ++routeGen;
  const main = document.getElementById("main");
  const view = el("div");
  const hash = location.hash.replace(/^#/, "") || "/overview";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(p => { try { return decodeURIComponent(p); } catch (_) { return p; } });
  let page = parts[0] || "overview";
  document.querySelectorAll("nav a").forEach(a => a.classList.toggle("active", a.dataset.nav === page));
  main.dataset.ready = "";
  refreshBanner();
  try {
    if (page === "overview") await pageOverview(view);
    else if (page === "topics" && parts.length === 1) await pageTopics(view);
    else if (page === "topics" && parts.length === 2) { page = "topic"; await pageTopic(view, parts[1]); }
    else if (page === "topics" && parts.length === 3 && parts[2] === "messages") { page = "messages"; await pageMessages(view, parts[1], params); }
    else if (page === "groups" && parts.length === 1) await pageGroups(view);
    else if (page === "groups" && parts.length >= 2) { page = "group"; await pageGroup(view, parts.slice(1).join("/")); }
    else put(view, el("h1", { text: "Not found" }), el("p", {}, el("a", { href: "#/overview", text: "Overview" })));
  } catch (e) {
    put(view, el("h1", { text: "Error" }), el("p", { class: "error", id: "error", text: e.message }));
  }
  if (gen !== routeGen) return;
  main.replaceChildren(view);
  main.dataset.page = page;
  main.dataset.ready = "1";
}

window.addEventListener("hashchange", route);
setInterval(refreshBanner, 3000);
route();
