// `ridge bench` on headless Chromium's WebGPU adapter (SwiftShader): opens bench.html, runs
// the sweep and writes the report (`ridge bench --json`'s format), whose per-op model
// `cargo test` holds against its own runs (crates/ridge-model/src/calibrate.rs).
// Usage: node web/tests/bench.mjs URL [SIZE] [OUT] [OPS] — `cargo xtask bench-browser` serves
// the page and runs it (SIZE quick, medium or full; default medium; OUT default
// benches/reports/swiftshader.json; OPS comma separated, as `ridge bench --op`; default all).

import { writeFileSync } from "node:fs";
import { launchChromium } from "./chromium.mjs";

const [base, size = "medium", out = "benches/reports/swiftshader.json", ops = ""] = process.argv.slice(2);
if (!base) throw new Error("usage: node bench.mjs URL [SIZE] [OUT]");
const browser = await launchChromium();
try {
  const page = await (await browser.newContext()).newPage();
  page.on("pageerror", (e) => console.log(`  [page exception] ${e.message}`));
  const query = new URLSearchParams({ size, ops, run: "1" });
  await page.goto(new URL(`bench.html?${query}`, base).href);
  let last = "";
  const deadline = Date.now() + 3 * 3600_000; // a medium sweep takes ~20 minutes on 2 cores
  for (;;) {
    if (Date.now() > deadline) throw new Error("the bench did not finish in 3 hours");
    const s = await page.evaluate(() => window.ridgeBench && { ...window.ridgeBench, report: !!window.ridgeBench.report });
    if (s?.error) throw new Error(`the bench failed in the page: ${s.error}`);
    if (s?.report) break;
    const p = s?.progress ? `${s.progress.done}/${s.progress.total}` : "measuring the ceilings";
    if (p !== last) process.stderr.write(`\r${p}   `);
    last = p;
    await page.waitForTimeout(2000);
  }
  const report = await page.evaluate(() => window.ridgeBench.report);
  writeFileSync(out, JSON.stringify(report, null, 1) + "\n");
  const kinds = report.calibration.kinds;
  const held = kinds.map((k) => k.held_out_error).filter((e) => e != null).sort((a, b) => a - b);
  console.log(
    `\n${report.rows.length} runs on ${report.adapter} (${report.timing}), ${kinds.length} kinds, ` +
      `median kind held out ${held.length ? held[Math.floor((held.length - 1) / 2)].toFixed(2) : "n/a"}×; written to ${out}`,
  );
} finally {
  await browser.close();
}
