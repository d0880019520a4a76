// End-to-end test of Gregor's web console: a real `gregor serve`, Debian's
// headless Chromium driven by Playwright (playwright-core, no browser
// download), each page opened, a record produced through the form and
// read back, seeks by offset and by time, the live tail, a group's lag,
// and a screenshot of each page checked (a PNG of the viewport's width
// and at least its height, not blank). Run by `make console-e2e`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chromium } from "playwright-core";

const GREGOR = resolve(process.env.GREGOR_BIN || "../../bin/gregor");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const SHOTS = resolve(process.env.SHOTS_DIR || "out/screenshots");
const VIEW = { width: 1280, height: 800 };

let dir, proc, browser, page, brokers, consoleURL;
let logs = "";

function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => ok(port)); });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function gregor(...args) {
  return execFileSync(GREGOR, [...args, "-b", brokers], { encoding: "utf8", timeout: 30000 });
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "gregor-console-"));
  mkdirSync(SHOTS, { recursive: true });
  const [kafka, ctrl, http] = [await freePort(), await freePort(), await freePort()];
  brokers = `127.0.0.1:${kafka}`;
  consoleURL = `http://127.0.0.1:${http}/`;
  proc = spawn(GREGOR, ["serve", "--data-dir", join(dir, "data"),
    "--override", `listeners=PLAINTEXT://127.0.0.1:${kafka},CONTROLLER://127.0.0.1:${ctrl}`,
    "--override", `controller.quorum.voters=1@127.0.0.1:${ctrl}`,
    "--override", `http.listener=127.0.0.1:${http}`], { stdio: ["ignore", "pipe", "pipe"] });
  proc.stdout.on("data", (d) => { logs += d; });
  proc.stderr.on("data", (d) => { logs += d; });
  for (let i = 0; ; i++) {
    try {
      const r = await fetch(consoleURL + "readyz");
      const s = await (await fetch(consoleURL + "api/status")).json();
      if (r.ok && s.on) break;
    } catch { /* not up yet */ }
    if (i > 300) throw new Error("gregor did not become ready in 30 s:\n" + logs);
    await sleep(100);
  }
  gregor("topic", "create", "shop", "-p", "2", "-c", "retention.ms=86400000");
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    // As root in CI, and with no network but loopback: no sandbox, no
    // background connections to Google's services.
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
  });
  page = await browser.newPage({ viewport: VIEW });
  page.setDefaultTimeout(15000);
});

after(async () => {
  await browser?.close();
  if (proc && proc.exitCode === null) {
    proc.kill("SIGTERM");
    await new Promise((r) => proc.once("exit", r));
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// shot takes a full-page screenshot and checks it: a PNG as wide as the
// viewport, at least as tall, and not one flat colour.
async function shot(name) {
  const path = join(SHOTS, name + ".png");
  const png = await page.screenshot({ path, fullPage: true });
  assert.deepEqual([...png.subarray(1, 4)].map((c) => String.fromCharCode(c)).join(""), "PNG");
  const width = png.readUInt32BE(16), height = png.readUInt32BE(20);
  assert.equal(width, VIEW.width, `${name}: width`);
  assert.ok(height >= VIEW.height, `${name}: height ${height}`);
  // A blank page compresses to a few KiB; a page with tables does not.
  assert.ok(png.length > 20000, `${name}: only ${png.length} bytes`);
  assert.deepEqual(readFileSync(path), png);
}

// localInput is a time as the datetime-local input takes it, in the
// browser's time zone (the same as this process's).
function localInput(ms) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

async function produceWithForm(partition, key, value, headers) {
  await page.selectOption("#p-partition", String(partition));
  await page.fill("#p-key", key);
  await page.fill("#p-value", value);
  await page.fill("#p-headers", headers);
  await page.click("#p-send");
  await page.waitForFunction(() => /^(Produced|Not produced)/.test(document.querySelector("#p-status").textContent));
  return page.textContent("#p-status");
}

test("cluster page shows the broker and the quorum", async () => {
  await page.goto(consoleURL + "#/cluster");
  await page.waitForSelector("#cluster-id");
  const id = (await page.textContent("#cluster-id")).trim();
  assert.match(id, /^[A-Za-z0-9_-]{22}$/);
  const brokersTable = await page.textContent("section[aria-label=Brokers] table");
  assert.match(brokersTable, /127\.0\.0\.1/);
  assert.match(brokersTable, /active controller/);
  assert.match(await page.textContent("section[aria-label='Metadata quorum']"), /Leader 1, epoch \d+/);
  await shot("cluster");
});

test("topics page lists the topic; its page shows partitions and configs with sources", async () => {
  await page.goto(consoleURL + "#/topics");
  await page.click("text=shop");
  await page.waitForSelector("#topic-name");
  assert.equal(await page.textContent("#topic-name"), "shop");
  const parts = await page.$$eval("section[aria-label=Partitions] tbody tr", (rows) => rows.map((r) => r.textContent));
  assert.equal(parts.length, 2);
  await page.check("#only-set");
  const cfg = await page.$$eval("section[aria-label=Configs] tbody tr", (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
  assert.deepEqual(cfg.find((r) => r[0] === "retention.ms"), ["retention.ms", "86400000", "DYNAMIC_TOPIC_CONFIG"]);
  assert.ok(!cfg.some((r) => r[2] === "DEFAULT_CONFIG"));
});

let between; // a time after the first record and before the second

test("produce through the form, read back, seek by offset and by time", async () => {
  assert.equal(await produceWithForm(1, "order-1", '{"item":"book","qty":2}', "trace=abc\nsource=console"),
    "Produced to partition 1 at offset 0.");
  // The time input has whole seconds: produce the second record in the
  // next second, and seek to that second's start.
  between = Math.floor(Date.now() / 1000) * 1000 + 1000;
  await sleep(between - Date.now() + 50);
  assert.equal(await produceWithForm(1, "order-2", "plain text", ""), "Produced to partition 1 at offset 1.");
  // The overview follows what was produced.
  await page.waitForFunction(() => document.querySelector("#records-held").textContent === "2");

  await page.selectOption("#b-partition", "1");
  await page.selectOption("#b-mode", "start");
  await page.click("#b-load");
  await page.waitForFunction(() => document.querySelectorAll("#records tr").length === 2);
  const first = await page.$eval("#records tr[data-offset='0']", (r) => [...r.cells].map((c) => c.textContent));
  assert.equal(first[1], "0");
  assert.equal(first[3], "order-1");
  assert.equal(first[4], '{\n  "item": "book",\n  "qty": 2\n}'); // auto: JSON, pretty
  assert.equal(first[5], "trace: abcsource: console");
  // As hex.
  await page.selectOption("#b-format", "hex");
  assert.equal(await page.textContent("#records tr[data-offset='1'] td.value"), "70 6c 61 69 6e 20 74 65 78 74");
  await page.selectOption("#b-format", "auto");
  await shot("topic");

  // By offset.
  await page.selectOption("#b-mode", "offset");
  await page.fill("#b-offset", "1");
  await page.click("#b-load");
  await page.waitForFunction(() => document.querySelector("#b-status").textContent.startsWith("1 records from offset 1"));
  assert.deepEqual(await page.$$eval("#records tr", (rows) => rows.map((r) => r.dataset.offset)), ["1"]);

  // By time: the first record at or after `between` is the second.
  await page.selectOption("#b-mode", "start");
  await page.click("#b-load");
  await page.waitForFunction(() => document.querySelectorAll("#records tr").length === 2);
  await page.selectOption("#b-mode", "time");
  await page.fill("#b-time", localInput(between));
  await page.click("#b-load");
  await page.waitForFunction(() => document.querySelector("#b-status").textContent.startsWith("1 records from offset 1"));
  assert.equal(await page.textContent("#records tr[data-offset='1'] td.key"), "order-2");
});

test("live tail shows a record produced meanwhile", async () => {
  await page.check("#b-tail");
  await page.waitForFunction(() => document.querySelector("#b-status").textContent.startsWith("Tailing"));
  execFileSync(GREGOR, ["produce", "shop", "-p", "1", "-k", ":", "-q", "--header", "via=cli", "-b", brokers],
    { input: "tail-1:hello\n", timeout: 30000 });
  await page.waitForSelector("#records tr[data-offset='2']");
  assert.equal(await page.textContent("#records tr[data-offset='2'] td.key"), "tail-1");
  assert.match(await page.textContent("#records tr[data-offset='2'] td.headers"), /via: cli/);
  await page.uncheck("#b-tail");
});

test("groups page shows a group's lag, by partition and over time", async () => {
  execFileSync(GREGOR, ["produce", "shop", "-p", "0", "-q", "-b", brokers], { input: "a\nb\nc\nd\ne\n", timeout: 30000 });
  gregor("group", "seek", "e2e-readers", "--to", "2", "--topic", "shop:0");
  await page.goto(consoleURL + "#/groups");
  await page.click("text=e2e-readers");
  await page.waitForSelector("#group-name");
  assert.equal(await page.textContent("#total-lag"), "3");
  const row = await page.$eval("section[aria-label='Lag by partition'] tbody tr", (r) => [...r.cells].map((c) => c.textContent));
  assert.deepEqual(row.slice(0, 5), ["shop", "0", "2", "5", "3"]);
  // The sampler runs every 10 s; the page refreshes every 5 s.
  await page.waitForFunction(() => /latest 3$/.test(document.querySelector("#lag-chart").getAttribute("aria-label")), null, { timeout: 30000 });
  await shot("group");
  await page.goto(consoleURL + "#/groups");
  await page.waitForSelector("text=e2e-readers");
  const listed = await page.$eval("section[aria-label='All groups'] tbody tr", (r) => [...r.cells].map((c) => c.textContent));
  assert.deepEqual([listed[0], listed[1], listed[2], listed[5]], ["e2e-readers", "classic", "Empty", "3"]);
  await shot("groups");
});

test("producers page shows the console's and the CLI's producers", async () => {
  await page.goto(consoleURL + "#/transactions");
  await page.waitForSelector("section[aria-label='Active producers'] tbody tr");
  const rows = await page.$$eval("section[aria-label='Active producers'] tbody tr", (rs) => rs.map((r) => r.cells[0].textContent + "-" + r.cells[1].textContent));
  assert.ok(rows.includes("shop-0") && rows.includes("shop-1"), rows.join(","));
  await shot("transactions");
});
