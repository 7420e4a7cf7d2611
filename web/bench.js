// bench.html: `ridge bench` on this browser's adapter through Ridge's JavaScript API, the
// per-kind errors shown and the report offered as a file. State for scripts in
// `window.ridgeBench` ({ report, error }): web/tests/bench.mjs runs it headless
// (`cargo xtask bench-browser`). Query parameters: `size=`, `ops=` (comma separated, as `ridge bench --op`), `run=1` starts at once.

import { Ridge } from "./pkg/ridge.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const state = { report: null, error: null, progress: null };
window.ridgeBench = state;
const GOAL = 1.15; // the per-kind error goal (issue 26), as `ridge bench` marks it

function showKinds(report) {
  const kinds = report.calibration?.kinds ?? [];
  const table = $("kinds");
  table.innerHTML =
    "<tr><th>kind</th><th>runs</th><th>roofline</th><th>fitted</th><th>held out</th></tr>";
  for (const k of kinds) {
    const row = table.insertRow();
    const cells = [
      `${k.op} ${k.dtype}`,
      k.rows,
      `${k.roofline_error.toFixed(2)}×`,
      `${k.fitted_error.toFixed(2)}×`,
      k.held_out_error == null ? "n/a" : `${k.held_out_error.toFixed(2)}×`,
    ];
    for (const c of cells) row.insertCell().textContent = c;
    if (k.held_out_error > GOAL) row.cells[4].className = "over";
  }
  const held = kinds.map((k) => k.held_out_error).filter((e) => e != null).sort((a, b) => a - b);
  const median = held.length ? held[Math.floor((held.length - 1) / 2)] : null;
  $("summary").textContent =
    `${report.rows.length} runs on ${report.adapter} (${report.timing}), ${kinds.length} kinds: ` +
    (median == null ? "no kind has runs enough to hold one out" :
      `median kind ${median.toFixed(2)}× held out, ${held.filter((e) => e > GOAL).length} above ${GOAL}×`);
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([JSON.stringify(report, null, 1)], { type: "application/json" }));
  link.download = "ridge-bench.json";
  link.textContent = " — download the report";
  $("summary").append(link);
}

async function run(ridge) {
  $("run").disabled = true;
  $("status").textContent = "measuring the ceilings…";
  const bar = $("progress");
  try {
    state.report = await ridge.bench({
      size: $("size").value,
      ops: params.get("ops") ?? "",
      onProgress: ({ done, total, case: c }) => {
        state.progress = { done, total };
        bar.hidden = false;
        bar.max = total;
        bar.value = done;
        $("status").textContent = `${done}/${total}: ${c}`;
      },
    });
    $("status").textContent = "done";
    showKinds(state.report);
  } catch (e) {
    state.error = e.message;
    $("status").className = "error";
    $("status").textContent = e.message;
  } finally {
    $("run").disabled = false;
  }
}

try {
  const ridge = await Ridge.create();
  if (params.get("size")) $("size").value = params.get("size");
  $("status").textContent = `${ridge.adapter.name} (${ridge.adapter.backend})`;
  $("run").disabled = false;
  $("run").onclick = () => run(ridge);
  if (params.get("run") === "1") run(ridge);
} catch (e) {
  state.error = `no WebGPU adapter: ${e.message}`;
  $("status").className = "error";
  $("status").textContent = state.error;
}
