// Ridge's browser tests: headless Chromium (WebGPU on SwiftShader, see
// ../shared/browser/README.md) loads the page served by `cargo xtask test` and checks
//   1. the adapter is found, and its limits and features are reported;
//   2. every kernel of the suite matches its f64 reference in the page;
//   3. MiniLM token ids equal the PyTorch fixture's and embeddings are within 1e-5 max abs
//      (1 − cosine ≤ 1e-6), as natively, while the page's main thread stays responsive;
//   4. a reload takes the model from the browser's Cache API;
//   5. the autotuner's table is stored in localStorage and used on reload; a corrupt one
//      warns and falls back;
//   6.–7. a missing model folder or a single missing file gives a clear error in the page;
//   8. the dashboard (dashboard.html) starts on the page's WebGPU canvas, finds the adapter,
//      measures its ceilings and draws the roofline (a non-blank screenshot with the roof's
//      colour in it), and its quick sweep plots measured kernel runs.
// Usage: node web/tests/browser.mjs http://127.0.0.1:PORT/ (SCREENSHOT=file.png saves the web
// dashboard after its sweep: docs/screenshots/roofline-web.png)

import { readFileSync } from "node:fs";
import { chromium } from "playwright-core";
import { PNG } from "pngjs";

const base = process.argv[2];
if (!base) throw new Error("usage: node browser.mjs URL");
const fixture = JSON.parse(
  readFileSync(new URL("../../tests/fixtures/minilm/public.json", import.meta.url), "utf8"),
);

const failures = [];
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures.push(what);
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: [
    "--enable-unsafe-webgpu", // the only adapter here is a CPU one, blocklisted otherwise
    // A WebGPU canvas (the dashboard) needs the compositor on Vulkan-SwiftShader too: with
    // the headless default (GL) Chromium cannot share the swap-chain image and loses the
    // device ("Device was destroyed") at the first getCurrentTexture. Compute needs none
    // of these.
    "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader",
    "--ignore-gpu-blocklist",
    "--enable-gpu",
    "--enable-features=Vulkan",
    "--use-vulkan=swiftshader",
    "--no-sandbox",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const context = await browser.newContext();

async function open(query) {
  const page = await context.newPage();
  page.on("console", (m) => m.type() === "error" && console.log(`  [page error] ${m.text()}`));
  page.on("pageerror", (e) => console.log(`  [page exception] ${e.message}`));
  await page.goto(new URL(query, base).href);
  return page;
}

// Waits until ridgeState[part] is set or an error for it is shown; returns [value, error].
async function settled(page, part, minutes) {
  await page.waitForFunction(
    (p) => window.ridgeState && (window.ridgeState[p] !== null || window.ridgeState.errors[p]),
    part,
    { timeout: minutes * 60_000, polling: 250 },
  );
  return page.evaluate((p) => [window.ridgeState[p], window.ridgeState.errors[p] ?? null], part);
}

try {
  const page = await open("?repeats=2");
  console.log(`user agent: ${await page.evaluate(() => navigator.userAgent)}`);

  // 1. Adapter.
  const [init, initError] = await settled(page, "adapter", 2);
  check(!initError, `adapter found ${initError ?? ""}`);
  if (initError) throw new Error(initError);
  const a = init.adapter;
  const limits = Object.fromEntries(a.limits);
  console.log(`adapter: ${a.name} (${a.backend}, ${a.device_type}); features: ${a.features.join(", ") || "none"}`);
  check(a.backend === "webgpu", `the browser's WebGPU backend (got ${a.backend})`);
  check(limits.maxComputeInvocationsPerWorkgroup >= 256, "limits reported");
  console.log(`shader-f16: ${a.features.includes("shader-f16") ? "yes" : "no → every kernel on its f32 path"}`);
  check(await page.locator("#adapter table tr").count() > 5, "the page shows the limits");

  // 2. Kernel suite.
  const [suite, suiteError] = await settled(page, "suite", 15);
  check(!suiteError, `suite ran ${suiteError ?? ""}`);
  for (const r of suite ?? []) {
    check(r.passed, `suite ${r.op} ${r.shape} ${r.dtype}: error ÷ bound ${r.worst_ratio.toFixed(3)} ${r.detail}`);
  }
  check((suite ?? []).length >= 8, `suite has ${(suite ?? []).length} cases`);

  // 3. MiniLM against the PyTorch fixture.
  const [model, modelError] = await settled(page, "model", 5);
  check(!modelError && model?.dim === 384, `model loaded ${modelError ?? ""}`);
  if (modelError) throw new Error(modelError);
  const texts = fixture.sentences.map((s) => s.text);
  const ids = await page.evaluate((t) => window.embedder.tokenIds(t), texts);
  fixture.sentences.forEach((s, i) =>
    check(JSON.stringify(ids[i]) === JSON.stringify(s.input_ids), `token ids of sentence ${i} (${s.label})`),
  );
  // Time how long the main thread takes to answer while the worker embeds.
  const embedding = page.evaluate(async (t) => {
    const t0 = performance.now();
    const vectors = await window.embedder.embed(t, { batchSize: 4 });
    return { vectors, ms: performance.now() - t0 };
  }, texts);
  let slowest = 0;
  let done = false;
  embedding.then(
    () => (done = true),
    () => (done = true),
  );
  while (!done) {
    const t0 = Date.now();
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
    slowest = Math.max(slowest, Date.now() - t0);
    await new Promise((r) => setTimeout(r, 100));
  }
  const { vectors, ms } = await embedding;
  console.log(`embedded ${texts.length} sentences in ${(ms / 1000).toFixed(1)} s; slowest frame while embedding: ${slowest} ms`);
  check(slowest < 1000, `main thread stays responsive while embedding (slowest frame ${slowest} ms)`);
  fixture.sentences.forEach((s, i) => {
    const v = vectors[i];
    let maxAbs = 0, dot = 0, na = 0, nb = 0;
    for (let k = 0; k < v.length; k++) {
      maxAbs = Math.max(maxAbs, Math.abs(v[k] - s.embedding[k]));
      dot += v[k] * s.embedding[k];
      na += v[k] * v[k];
      nb += s.embedding[k] ** 2;
    }
    const oneMinusCos = 1 - dot / Math.sqrt(na * nb);
    check(
      v.length === s.embedding.length && maxAbs <= 1e-5 && oneMinusCos <= 1e-6,
      `embedding ${i} (${s.label}): max abs ${maxAbs.toExponential(2)} ≤ 1e-5, 1 − cos ${oneMinusCos.toExponential(2)} ≤ 1e-6`,
    );
  });
  await page.close();

  // 4. A reload reads the model from the Cache API.
  const again = await open("?suite=0");
  const [cached, cachedError] = await settled(again, "model", 5);
  check(
    !cachedError && cached.from_cache.includes("model.safetensors"),
    `reload takes the model from the browser cache (${cached?.from_cache?.join(", ") ?? cachedError})`,
  );
  await again.close();

  // 5. The autotuner in the page: its table lands in localStorage and is used on reload; a
  //    corrupt stored table gives a warning, not a failure.
  const tuning = await open("?suite=0");
  await settled(tuning, "adapter", 2);
  const tuned = await tuning.evaluate(() => window.ridge.tune({ ops: "softmax", budgetSeconds: 20 }));
  const stored = await tuning.evaluate((k) => JSON.parse(localStorage.getItem(k)), tuned.key);
  check(
    tuned.entries > 0 && stored.entries.every((e) => e.op === "softmax" && e.origin.measured),
    `autotuner stored ${tuned.entries} measured softmax entries under ${tuned.key}`,
  );
  await tuning.reload();
  const [reinit] = await settled(tuning, "adapter", 2);
  check(reinit.tuning_warnings.length === 0, `stored table accepted on reload (${reinit.tuning_warnings})`);
  await tuning.evaluate((k) => localStorage.setItem(k, "{ not json"), tuned.key);
  await tuning.reload();
  const [corrupt] = await settled(tuning, "adapter", 2);
  const [, corruptModelError] = await settled(tuning, "model", 5);
  check(
    corrupt.tuning_warnings.length === 1 && !corruptModelError,
    `a corrupt stored table warns and falls back (${corrupt.tuning_warnings})`,
  );
  await tuning.evaluate((k) => localStorage.removeItem(k), tuned.key);
  await tuning.close();

  // 6. A model folder without its files: a clear error in the page.
  const missing = await open("?suite=0&model=/no-such-model/");
  const [, missingError] = await settled(missing, "model", 2);
  const shown = await missing.locator("#model-status").textContent();
  check(
    /no-such-model\/config\.json: file not found/.test(missingError ?? "") && shown.includes("config.json"),
    `missing model file: "${shown}"`,
  );

  // 7. A model folder with one file missing: the page names it.
  const partial = await open("?suite=0&model=/model-without/tokenizer.json/");
  const [, partialError] = await settled(partial, "model", 3);
  check(
    /model-without\/tokenizer\.json\/tokenizer\.json: file not found/.test(partialError ?? ""),
    `missing tokenizer.json: "${partialError}"`,
  );

  // 8. The dashboard (egui on WebGPU): adapter, measured ceilings, the roofline drawn.
  const dash = await open("dashboard.html");
  const dashboard = () => dash.evaluate(() => JSON.parse(window.ridgeDashboard ?? "null"));
  await dash.waitForFunction(
    () => {
      const s = window.ridgeDashboard && JSON.parse(window.ridgeDashboard);
      return s && (s.error || s.measure_error || s.measured_gbps);
    },
    null,
    { timeout: 2 * 60_000, polling: 500 },
  );
  let status = await dashboard();
  console.log(`dashboard: ${JSON.stringify(status)}`);
  check(!status.error && status.adapter, `dashboard found the adapter (${status.adapter ?? status.error})`);
  check(
    !status.measure_error && status.measured_gbps > 0 && status.measured_gflops > 0,
    `dashboard measured ceilings: ${status.measured_gbps?.toFixed(2)} GB/s, ` +
      `${status.measured_gflops?.toFixed(2)} GFLOP/s (${status.measure_error ?? "no error"})`,
  );
  await dash.waitForTimeout(1000); // a frame with the measured roof
  const pixels = async () => {
    const png = PNG.sync.read(await dash.screenshot());
    const colors = new Set();
    let roof = 0; // the measured roof's red (egui_plot's first colour)
    for (let i = 0; i < png.data.length; i += 4) {
      const [r, g, b] = png.data.subarray(i, i + 3);
      colors.add((r << 16) | (g << 8) | b);
      if (r > 150 && g < 90 && b < 90) roof++;
    }
    return { colors: colors.size, roof };
  };
  const drawn = await pixels();
  check(
    drawn.colors > 100 && drawn.roof > 500,
    `dashboard canvas drawn: ${drawn.colors} colours, ${drawn.roof} roof pixels`,
  );
  // The Roofline tab's first button, "Run the quick sweep", sits at the top left.
  await dash.mouse.click(75, 43);
  await dash.waitForFunction(
    () => {
      const s = JSON.parse(window.ridgeDashboard);
      return s.roofline_points > 0 || s.sweep_error;
    },
    null,
    { timeout: 4 * 60_000, polling: 500 },
  );
  status = await dashboard();
  if (process.env.SCREENSHOT) await dash.screenshot({ path: process.env.SCREENSHOT }); // the README's
  check(
    status.roofline_points > 0,
    `dashboard sweep plotted ${status.roofline_points} kernel runs (${status.sweep_error ?? "no error"})`,
  );
  await dash.close();
} catch (e) {
  check(false, `browser test aborted: ${e.message}`);
} finally {
  await browser.close();
}

console.log(failures.length ? `\n${failures.length} browser checks failed` : "\nall browser checks passed");
process.exit(failures.length ? 1 : 0);
