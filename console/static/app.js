// Gregor's web console: plain JavaScript, no build step. Every page reads
// the console's JSON API (/api/...), which reads the cluster as a Kafka
// client would. Data from the cluster (names, keys, values, headers) is
// only ever put in the page as text, never as HTML.
"use strict";

const main = document.getElementById("main");
let status = { on: false, read_only: true };
// Each page render gets a token; timers and tails of an older page stop
// when they see the token changed.
let pageToken = 0;

// h builds an element: h("td", {class: "num"}, "42", childNode, ...).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

async function api(path, opts) {
  const resp = await fetch("api/" + path, opts);
  let body;
  try { body = await resp.json(); } catch { body = { error: resp.status + " " + resp.statusText }; }
  if (!resp.ok) throw new Error(body.error || resp.statusText);
  return body;
}

const enc = encodeURIComponent;
const fmtInt = (n) => (n === null || n === undefined || n < 0 ? "–" : Number(n).toLocaleString("en-US"));
function fmtBytes(n) {
  if (n === null || n === undefined || n < 0) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}
const fmtTime = (ms) => (ms > 0 ? new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC") : "–");

// table renders rows with columns [{title, num, cell: row => text|Node}].
function table(caption, cols, rows, empty) {
  if (!rows.length) return h("p", { class: "muted" }, empty || "None.");
  return h("table", {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, cols.map((c) => h("th", { scope: "col", class: c.num ? "num" : null }, c.title)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, cols.map((c) => h("td", { class: c.num ? "num" : null }, c.cell(r)))))));
}

function section(title, ...children) {
  return h("section", { "aria-label": title }, h("h2", {}, title), ...children);
}

function pill(text) { return h("span", { class: "pill " + text }, text); }

function showError(err) {
  main.replaceChildren(h("h1", {}, "Something went wrong"), h("p", { class: "err" }, String(err.message || err)));
}

// ---------- Data as the user asked to see it ----------

// render shows a key, value or header value in format: auto (JSON when it
// parses, else UTF-8 text, else hex), json, utf8 or hex.
function renderData(d, format) {
  if (d.null) return h("span", { class: "null" }, "null");
  let text;
  let f = format;
  if (f === "auto") f = d.json ? "json" : d.utf8 ? "utf8" : "hex";
  if (f === "json" && d.json) {
    try { text = JSON.stringify(JSON.parse(d.text), null, 2); } catch { text = d.text; }
  } else if ((f === "utf8" || f === "json") && d.utf8) {
    text = d.text;
  } else {
    text = d.hex.replace(/(..)/g, "$1 ").trim();
    f = "hex";
  }
  const out = h("pre", { "data-format": f }, text);
  if (d.truncated) out.append(h("span", { class: "muted" }, ` … (${fmtBytes(d.size)} in all)`));
  return out;
}

// ---------- Pages ----------

async function pageCluster() {
  const c = await api("cluster");
  main.replaceChildren(
    h("h1", {}, "Cluster"),
    section("Overview", h("dl", { class: "kv" },
      h("dt", {}, "Cluster id"), h("dd", { class: "mono", id: "cluster-id" }, c.cluster_id),
      h("dt", {}, "Active controller"), h("dd", {}, String(c.controller_id)),
      h("dt", {}, "Brokers"), h("dd", {}, String(c.brokers.length)),
      h("dt", {}, "Console reads through"), h("dd", { class: "mono" }, c.via.join(", ")))),
    section("Brokers", table("Brokers in the metadata", [
      { title: "Node", num: true, cell: (b) => String(b.node_id) },
      { title: "Host", cell: (b) => b.host },
      { title: "Port", num: true, cell: (b) => String(b.port) },
      { title: "Rack", cell: (b) => b.rack || "–" },
      { title: "Role", cell: (b) => (b.controller ? "active controller" : "broker") },
    ], c.brokers)),
    section("Metadata quorum",
      c.quorum.error ? h("p", { class: "err" }, c.quorum.error) : h("p", {},
        `Leader ${c.quorum.leader_id}, epoch ${c.quorum.leader_epoch}, high watermark ${fmtInt(c.quorum.high_watermark)}.`),
      table("Voters and observers (DescribeQuorum)", [
        { title: "Node", num: true, cell: (r) => String(r.node_id) },
        { title: "Role", cell: (r) => pill(r.role) },
        { title: "Log end offset", num: true, cell: (r) => fmtInt(r.log_end_offset) },
        { title: "Lag", num: true, cell: (r) => fmtInt(r.lag) },
        { title: "Last fetch", num: true, cell: (r) => (r.last_fetch_ms_ago === null ? "–" : r.last_fetch_ms_ago + " ms ago") },
      ], c.quorum.replicas)));
}

async function pageTopics() {
  const t = await api("topics");
  const showInternal = h("input", { type: "checkbox", id: "show-internal" });
  const holder = h("div", {});
  const draw = () => {
    const rows = t.topics.filter((x) => showInternal.checked || !x.internal);
    holder.replaceChildren(table(`${rows.length} topics`, [
      { title: "Topic", cell: (x) => h("a", { href: "#/topics/" + enc(x.name) }, x.name) },
      { title: "Partitions", num: true, cell: (x) => String(x.partitions) },
      { title: "Replication", num: true, cell: (x) => String(x.replication_factor) },
      { title: "Records", num: true, cell: (x) => fmtInt(x.records) },
      { title: "Size", num: true, cell: (x) => fmtBytes(x.size) },
      { title: "Internal", cell: (x) => (x.internal ? "yes" : "") },
    ], rows, "No topics yet."));
  };
  showInternal.addEventListener("change", draw);
  draw();
  main.replaceChildren(h("h1", {}, "Topics"),
    section("All topics", h("label", { class: "inline", for: "show-internal" }, showInternal, "Show internal topics"), holder,
      t.errors.length ? h("p", { class: "err" }, t.errors.join("; ")) : null));
}

async function pageTopic(name) {
  const t = await api("topics/" + enc(name));
  const token = pageToken;
  const parts = t.partition_list.map((p) => p.partition);
  const partOptions = (withAuto) => [
    withAuto ? h("option", { value: "" }, "by key (client's partitioner)") : null,
    ...parts.map((p) => h("option", { value: String(p) }, String(p))),
  ];

  // Overview and partitions, redrawn after a produce so offsets and
  // sizes move with it.
  const summary = h("div", {});
  const drawSummary = (t) => summary.replaceChildren(
    section("Overview", h("dl", { class: "kv" },
      h("dt", {}, "Topic id"), h("dd", { class: "mono" }, t.id),
      h("dt", {}, "Partitions"), h("dd", {}, String(t.partitions)),
      h("dt", {}, "Replication factor"), h("dd", {}, String(t.replication_factor)),
      h("dt", {}, "Records held"), h("dd", { id: "records-held" }, fmtInt(t.records)),
      h("dt", {}, "Size (leaders)"), h("dd", {}, fmtBytes(t.size))),
      t.errors.length ? h("p", { class: "err" }, t.errors.join("; ")) : null),
    section("Partitions", table("Partitions: leaders, replicas, offsets and sizes", [
      { title: "Partition", num: true, cell: (p) => String(p.partition) },
      { title: "Leader", num: true, cell: (p) => String(p.leader) },
      { title: "Epoch", num: true, cell: (p) => String(p.leader_epoch) },
      { title: "Replicas", cell: (p) => p.replicas.join(", ") },
      { title: "In sync", cell: (p) => p.isr.join(", ") },
      { title: "Start offset", num: true, cell: (p) => fmtInt(p.start_offset) },
      { title: "End offset", num: true, cell: (p) => fmtInt(p.end_offset) },
      { title: "Size", num: true, cell: (p) => fmtBytes(p.size) },
    ], t.partition_list)));
  drawSummary(t);

  // Record browser.
  const bPart = h("select", { id: "b-partition" }, partOptions(false));
  const bMode = h("select", { id: "b-mode" },
    h("option", { value: "start" }, "from the start"), h("option", { value: "end" }, "the newest"),
    h("option", { value: "offset" }, "from offset"), h("option", { value: "time" }, "from time"));
  const bOffset = h("input", { id: "b-offset", type: "number", min: "0", value: "0" });
  const bTime = h("input", { id: "b-time", type: "datetime-local", step: "1" });
  const bLimit = h("input", { id: "b-limit", type: "number", min: "1", max: "500", value: "50" });
  const bFormat = h("select", { id: "b-format" },
    h("option", { value: "auto" }, "auto"), h("option", { value: "utf8" }, "UTF-8"),
    h("option", { value: "json" }, "JSON"), h("option", { value: "hex" }, "hex"));
  const bTail = h("input", { id: "b-tail", type: "checkbox" });
  const bStatus = h("p", { class: "status", id: "b-status", role: "status" });
  const tbody = h("tbody", { id: "records" });
  let shown = []; // records on screen, for re-rendering in another format
  let next = 0;

  const recordRow = (r) => h("tr", { "data-offset": String(r.offset) },
    h("td", { class: "num" }, String(r.partition)),
    h("td", { class: "num" }, String(r.offset)),
    h("td", {}, fmtTime(r.timestamp)),
    h("td", { class: "key" }, renderData(r.key, bFormat.value)),
    h("td", { class: "value" }, renderData(r.value, bFormat.value)),
    h("td", { class: "headers" }, r.headers.length ? r.headers.map((hd) =>
      h("div", {}, h("span", { class: "mono" }, hd.key + ": "), renderData(hd.value, bFormat.value))) : h("span", { class: "muted" }, "none")));
  const redraw = () => tbody.replaceChildren(...shown.map(recordRow));

  async function load() {
    const q = new URLSearchParams({ partition: bPart.value, limit: bLimit.value });
    if (bMode.value === "time") {
      if (!bTime.value) { bStatus.textContent = "Pick a time."; return; }
      q.set("time", String(new Date(bTime.value).getTime()));
    } else if (bMode.value === "offset") q.set("offset", bOffset.value);
    else q.set("offset", bMode.value);
    bStatus.textContent = "Reading…";
    try {
      const res = await api(`topics/${enc(name)}/records?${q}`);
      shown = res.records;
      next = res.next;
      redraw();
      bStatus.textContent = `${res.records.length} records from offset ${res.from} (partition ${res.partition} holds ${res.start_offset}–${res.end_offset}).`;
    } catch (e) { bStatus.textContent = e.message; }
  }

  // The live tail asks for records past the last one seen, waiting on the
  // server up to 2 s each time, until unticked or the page changes.
  async function tail() {
    while (bTail.checked && token === pageToken) {
      try {
        const res = await api(`topics/${enc(name)}/records?${new URLSearchParams({ partition: bPart.value, offset: String(next), wait: "2000", limit: "100" })}`);
        if (token !== pageToken) return;
        next = res.next;
        if (res.records.length) {
          shown = shown.concat(res.records).slice(-500);
          redraw();
          bStatus.textContent = `Tailing: ${shown.length} records shown, next offset ${next}.`;
        }
      } catch (e) {
        bStatus.textContent = "Tail stopped: " + e.message;
        bTail.checked = false;
        return;
      }
    }
  }
  bTail.addEventListener("change", () => { if (bTail.checked) { bStatus.textContent = `Tailing from offset ${next}…`; tail(); } });
  bFormat.addEventListener("change", redraw);
  bPart.addEventListener("change", () => { bTail.checked = false; });

  const browser = section("Records",
    h("form", { class: "row", id: "browse", onsubmit: (e) => { e.preventDefault(); load(); } },
      h("label", { for: "b-partition" }, "Partition", bPart),
      h("label", { for: "b-mode" }, "Read", bMode),
      h("label", { for: "b-offset" }, "Offset", bOffset),
      h("label", { for: "b-time" }, "Time (local)", bTime),
      h("label", { for: "b-limit" }, "At most", bLimit),
      h("label", { for: "b-format" }, "Show as", bFormat),
      h("button", { type: "submit", id: "b-load" }, "Read"),
      h("label", { class: "inline", for: "b-tail" }, bTail, "Live tail")),
    bStatus,
    h("table", {}, h("caption", {}, "Records of the partition"),
      h("thead", {}, h("tr", {}, ["Partition", "Offset", "Timestamp", "Key", "Value", "Headers"].map((c, i) =>
        h("th", { scope: "col", class: i < 2 ? "num" : null }, c)))),
      tbody));

  // Produce form.
  const pPart = h("select", { id: "p-partition" }, partOptions(true));
  const pKey = h("input", { id: "p-key", type: "text", placeholder: "empty: null key" });
  const pValue = h("textarea", { id: "p-value", placeholder: "text or JSON" });
  const pHeaders = h("textarea", { id: "p-headers", placeholder: "one name=value a line" });
  const pStatus = h("p", { class: "status", id: "p-status", role: "status" });
  const pButton = h("button", { type: "submit", id: "p-send", disabled: status.read_only }, "Produce");
  async function produce(e) {
    e.preventDefault();
    const headers = pHeaders.value.split("\n").filter((l) => l.trim()).map((l) => {
      const i = l.indexOf("=");
      return i < 0 ? { key: l.trim(), value: "" } : { key: l.slice(0, i).trim(), value: l.slice(i + 1) };
    });
    const body = { key: pKey.value === "" ? null : pKey.value, value: pValue.value, headers };
    if (pPart.value !== "") body.partition = Number(pPart.value);
    pStatus.className = "status";
    pStatus.textContent = "Producing…";
    try {
      const r = await api(`topics/${enc(name)}/records`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      pStatus.className = "status ok";
      pStatus.textContent = `Produced to partition ${r.partition} at offset ${r.offset}.`;
      api("topics/" + enc(name)).then((fresh) => { if (token === pageToken) drawSummary(fresh); }).catch(() => {});
    } catch (err) {
      pStatus.className = "status err";
      pStatus.textContent = "Not produced: " + err.message;
    }
  }
  const producer = section("Produce a record",
    status.read_only ? h("p", { class: "muted" }, "The console is read-only (http.console.read.only=true).") : null,
    h("form", { class: "row", id: "produce", onsubmit: produce },
      h("label", { for: "p-partition" }, "Partition", pPart),
      h("label", { for: "p-key" }, "Key", pKey),
      h("label", { for: "p-value" }, "Value", pValue),
      h("label", { for: "p-headers" }, "Headers", pHeaders),
      pButton),
    pStatus);

  // Configs, with their sources.
  const onlySet = h("input", { type: "checkbox", id: "only-set" });
  const cfgHolder = h("div", {});
  const drawConfigs = () => cfgHolder.replaceChildren(table("Topic configs (DescribeConfigs)", [
    { title: "Name", cell: (c) => h("span", { class: "mono" }, c.name) },
    { title: "Value", cell: (c) => (c.sensitive ? h("span", { class: "null" }, "(sensitive)") : c.value === null ? h("span", { class: "null" }, "null") : h("span", { class: "mono" }, c.value)) },
    { title: "Source", cell: (c) => c.source },
  ], t.configs.filter((c) => !onlySet.checked || c.source !== "DEFAULT_CONFIG")));
  onlySet.addEventListener("change", drawConfigs);
  drawConfigs();

  main.replaceChildren(
    h("h1", {}, "Topic ", h("span", { class: "mono", id: "topic-name" }, t.name)),
    summary,
    browser, producer,
    section("Configs", h("label", { class: "inline", for: "only-set" }, onlySet, "Only values not at their default"), cfgHolder));
}

async function pageGroups() {
  const g = await api("groups");
  main.replaceChildren(h("h1", {}, "Groups"), section("All groups", table(`${g.groups.length} groups`, [
    { title: "Group", cell: (x) => h("a", { href: "#/groups/" + enc(x.group) }, x.group) },
    { title: "Type", cell: (x) => x.type },
    { title: "State", cell: (x) => pill(x.state) },
    { title: "Protocol type", cell: (x) => x.protocol_type || "–" },
    { title: "Coordinator", num: true, cell: (x) => String(x.coordinator) },
    { title: "Lag (last sample)", num: true, cell: (x) => fmtInt(x.lag) },
  ], g.groups, "No groups yet.")));
}

// lagChart draws the sampled total lag as an SVG line.
function lagChart(history) {
  const W = 900, H = 220, L = 56, R = 12, T = 12, B = 28;
  const ns = "http://www.w3.org/2000/svg";
  const s = (tag, attrs, text) => {
    const el = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    if (text !== undefined) el.textContent = text;
    return el;
  };
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", id: "lag-chart",
    "aria-label": history.length ? `Total lag over time, ${history.length} samples, latest ${history[history.length - 1].lag}` : "No lag samples yet" });
  if (!history.length) {
    svg.append(s("text", { x: L, y: H / 2 }, "No samples yet: the console samples every group's lag periodically."));
    return svg;
  }
  const t0 = history[0].t, t1 = Math.max(history[history.length - 1].t, t0 + 1);
  const maxLag = Math.max(1, ...history.map((p) => p.lag));
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / maxLag) * (H - T - B);
  const mid = Math.round(maxLag / 2);
  for (const v of maxLag >= 2 ? [0, mid, maxLag] : [0, maxLag]) {
    svg.append(s("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(s("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, Math.round(v).toLocaleString("en-US")));
  }
  const pts = history.map((p) => `${x(p.t).toFixed(1)},${y(p.lag).toFixed(1)}`);
  svg.append(s("path", { class: "area", d: `M${x(t0)},${y(0)} L${pts.join(" L")} L${x(history[history.length - 1].t)},${y(0)} Z` }));
  svg.append(s("path", { class: "line", d: "M" + pts.join(" L") }));
  // Dots while they are few enough to tell apart (a single sample is a
  // dot and nothing else).
  if (history.length <= 120) {
    for (const p of history) svg.append(s("circle", { class: "dot", cx: x(p.t).toFixed(1), cy: y(p.lag).toFixed(1), r: 3 }));
  }
  svg.append(s("text", { x: L, y: H - 8 }, new Date(t0).toLocaleTimeString()));
  svg.append(s("text", { x: W - R, y: H - 8, "text-anchor": "end" }, new Date(t1).toLocaleTimeString()));
  return svg;
}

async function pageGroup(name) {
  const token = pageToken;
  const draw = async () => {
    const g = await api("groups/" + enc(name));
    if (token !== pageToken) return;
    main.replaceChildren(
      h("h1", {}, "Group ", h("span", { class: "mono", id: "group-name" }, g.group)),
      section("Overview", h("dl", { class: "kv" },
        h("dt", {}, "Type"), h("dd", {}, g.type),
        h("dt", {}, "State"), h("dd", {}, pill(g.state)),
        h("dt", {}, "Assignor"), h("dd", {}, g.assignor || "–"),
        h("dt", {}, "Coordinator"), h("dd", {}, String(g.coordinator)),
        h("dt", {}, "Total lag"), h("dd", { id: "total-lag" }, fmtInt(g.total_lag))),
        g.error ? h("p", { class: "err" }, g.error) : null),
      section("Lag over time", lagChart(g.history),
        h("p", { class: "muted" }, `Sampled every ${status.lag_sample_ms / 1000} s while the console runs; kept in memory only.`)),
      section("Members", table("Members and their assignments", [
        { title: "Member", cell: (m) => h("span", { class: "mono" }, m.member_id) },
        { title: "Instance", cell: (m) => m.instance_id || "–" },
        { title: "Client id", cell: (m) => m.client_id },
        { title: "Host", cell: (m) => m.client_host },
        { title: "Assigned", cell: (m) => m.assigned.join(", ") || "–" },
      ], g.members, "No members (the group is empty).")),
      section("Lag by partition", table("Committed offsets and lag", [
        { title: "Topic", cell: (p) => h("a", { href: "#/topics/" + enc(p.topic) }, p.topic) },
        { title: "Partition", num: true, cell: (p) => String(p.partition) },
        { title: g.type === "share" ? "Start offset" : "Committed", num: true, cell: (p) => fmtInt(p.committed) },
        { title: "End offset", num: true, cell: (p) => fmtInt(p.end_offset) },
        { title: "Lag", num: true, cell: (p) => fmtInt(p.lag) },
        { title: "Member", cell: (p) => p.member || "–" },
      ], g.partitions, "No committed offsets.")));
  };
  await draw();
  // Refresh while the page is shown, so lag moves as it is sampled.
  const timer = setInterval(() => {
    if (token !== pageToken) { clearInterval(timer); return; }
    draw().catch(() => {});
  }, 5000);
}

async function pageTransactions() {
  const t = await api("transactions");
  main.replaceChildren(h("h1", {}, "Producers & transactions"),
    section("Transactions", table("Transactional ids (ListTransactions, DescribeTransactions)", [
      { title: "Transactional id", cell: (x) => h("span", { class: "mono" }, x.transactional_id) },
      { title: "State", cell: (x) => pill(x.state) },
      { title: "Producer id", num: true, cell: (x) => String(x.producer_id) },
      { title: "Epoch", num: true, cell: (x) => String(x.producer_epoch) },
      { title: "Timeout", num: true, cell: (x) => x.timeout_ms + " ms" },
      { title: "Started", cell: (x) => fmtTime(x.start_timestamp) },
      { title: "Partitions", cell: (x) => x.partitions.join(", ") || "–" },
    ], t.transactions, "No transactional ids.")),
    section("Active producers", table("Idempotent and transactional producers per partition (DescribeProducers)", [
      { title: "Topic", cell: (p) => h("a", { href: "#/topics/" + enc(p.topic) }, p.topic) },
      { title: "Partition", num: true, cell: (p) => String(p.partition) },
      { title: "Producer id", num: true, cell: (p) => String(p.producer_id) },
      { title: "Epoch", num: true, cell: (p) => String(p.producer_epoch) },
      { title: "Last sequence", num: true, cell: (p) => String(p.last_sequence) },
      { title: "Last write", cell: (p) => fmtTime(p.last_timestamp) },
      { title: "Open transaction from", num: true, cell: (p) => (p.current_txn_start_offset < 0 ? "–" : String(p.current_txn_start_offset)) },
    ], t.producers, "No active producers."), t.error ? h("p", { class: "err" }, t.error) : null));
}

// ---------- Routing ----------

async function route() {
  pageToken++;
  const [, page, arg] = (location.hash || "#/cluster").match(/^#\/([^/]*)\/?(.*)$/) || [null, "cluster", ""];
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.nav === page) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const name = arg ? decodeURIComponent(arg) : "";
  document.title = "Gregor console" + (name ? " · " + name : page ? " · " + page : "");
  main.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  if (!status.on) return;
  try {
    if (page === "topics" && name) await pageTopic(name);
    else if (page === "topics") await pageTopics();
    else if (page === "groups" && name) await pageGroup(name);
    else if (page === "groups") await pageGroups();
    else if (page === "transactions") await pageTransactions();
    else await pageCluster();
  } catch (e) { showError(e); }
}

async function start() {
  try {
    status = await (await fetch("api/status")).json();
  } catch (e) { status = { on: false, off: "cannot reach the console: " + e.message }; }
  const banner = document.getElementById("banner");
  if (!status.on) {
    banner.hidden = false;
    banner.textContent = "The console is off: " + status.off;
    main.replaceChildren();
    return;
  }
  if (status.read_only) {
    const mode = document.getElementById("mode");
    mode.hidden = false;
    mode.textContent = "read-only";
  }
  window.addEventListener("hashchange", route);
  route();
}

start();
