// The page: a thin UI over Ridge's JavaScript API (`pkg/ridge.js`, the package `cargo xtask
// web` builds), which runs Ridge in a worker. State for tests and scripts is kept in
// `window.ridgeState` ({ adapter, suite, model, errors }); `window.ridge` is the API object
// and `window.embedder` the loaded model.

import { Ridge } from "./pkg/ridge.js";
//
// Query parameters: `model=URL` (the model folder; default `model/`, served by
// `cargo xtask web` from the local cache), `repeats=N` (timed launches per suite case),
// `suite=0` (skip the kernel suite).

const params = new URLSearchParams(location.search);
const modelBase = params.get("model") ?? "model/";
const repeats = Number(params.get("repeats") ?? 3);
const runSuite = params.get("suite") !== "0";

const $ = (id) => document.getElementById(id);
const state = { adapter: null, suite: null, suite_progress: null, model: null, errors: {} };
window.ridgeState = state;

let ridge = null; // the Ridge API (pkg/ridge.js); window.ridge for tests and scripts
let embedder = null; // the sentence-embedding model; window.embedder
function fail(part, element, message) {
  state.errors[part] = message;
  element.className = "error";
  element.textContent = message;
}

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text;
  if (className) td.className = className;
}

function showAdapter({ adapter, tuning_key, tuning_warnings }) {
  const limits = adapter.limits.map(([k, v]) => `<tr><td>${k}</td><td>${v}</td></tr>`).join("");
  $("adapter").innerHTML =
    `<p><b></b> <span class="muted"></span></p>
     <p>features: <code></code><br>subgroup sizes: ${adapter.subgroup_size.join("–")}<br>
     tuning table key: <code></code></p>
     <p class="error"></p>
     <table><tr><th>limit</th><th>value</th></tr>${limits}</table>`;
  const [name, backend] = $("adapter").querySelectorAll("b, span.muted");
  name.textContent = adapter.name || "(unnamed adapter)";
  backend.textContent = `(${adapter.backend}, ${adapter.device_type}; ${navigator.userAgent})`;
  const [features, key] = $("adapter").querySelectorAll("code");
  features.textContent = adapter.features.join(", ") || "none of those Ridge uses";
  key.textContent = tuning_key;
  $("adapter").querySelector("p.error").textContent = tuning_warnings.join("\n");
}

function showSuite(results) {
  const table = $("suite");
  const head = table.insertRow();
  for (const h of ["op", "shape", "dtype", "max |error|", "error ÷ bound", "GPU ms", "GFLOP/s", "GB/s", ""]) {
    const th = document.createElement("th");
    th.textContent = h;
    head.appendChild(th);
  }
  for (const r of results) {
    const row = table.insertRow();
    const ms = r.ms ?? null;
    cell(row, r.op);
    cell(row, r.shape);
    cell(row, r.dtype);
    cell(row, r.max_abs_error.toExponential(2));
    cell(row, r.worst_ratio.toFixed(3));
    cell(row, ms === null ? "n/a" : ms.toFixed(3));
    cell(row, ms === null || !r.cost.flops ? "" : (r.cost.flops / ms / 1e6).toFixed(2));
    cell(row, ms === null ? "" : (r.cost.bytes / ms / 1e6).toFixed(2));
    cell(row, r.passed ? "pass" : `FAIL ${r.detail}`, r.passed ? "pass" : "fail");
  }
  const failed = results.filter((r) => !r.passed).length;
  $("suite-status").className = failed ? "fail" : "pass";
  $("suite-status").textContent = failed
    ? `${failed} of ${results.length} cases failed`
    : `all ${results.length} cases match their f64 references within their error bounds`;
}

const progress = {};
function showProgress({ file, loaded, total }) {
  progress[file] = { loaded, total };
  const sum = (k) => Object.values(progress).reduce((a, p) => a + p[k], 0);
  const bar = $("model-progress");
  bar.hidden = false;
  bar.max = Math.max(sum("total"), 1);
  bar.value = sum("loaded");
  $("model-status").textContent = `loading ${file}: ${(loaded / 1e6).toFixed(1)} MB`;
}

function showSimilarity(texts, vectors) {
  const table = $("similarity");
  table.innerHTML = "";
  const head = table.insertRow();
  cell(head, "cosine similarity");
  texts.forEach((_, j) => cell(head, `#${j + 1}`));
  texts.forEach((t, i) => {
    const row = table.insertRow();
    cell(row, `#${i + 1} ${t}`);
    texts.forEach((_, j) => {
      let dot = 0, a = 0, b = 0;
      for (let k = 0; k < vectors[i].length; k++) {
        dot += vectors[i][k] * vectors[j][k];
        a += vectors[i][k] ** 2;
        b += vectors[j][k] ** 2;
      }
      cell(row, (dot / Math.sqrt(a * b || 1)).toFixed(3));
    });
  });
}

function showTuning({ done, total, problem }) {
  const bar = $("tune-progress");
  bar.hidden = false;
  bar.max = total;
  bar.value = done;
  $("tune-status").textContent = `${done}/${total} candidates: ${problem}`;
}

async function tuneClicked() {
  $("tune").disabled = true;
  try {
    const { key, entries } = await ridge.tune({
      ops: "softmax,layer_norm,rms_norm",
      budgetSeconds: 30,
      onProgress: showTuning,
    });
    $("tune-status").className = "pass";
    $("tune-status").textContent = `${entries} measured entries stored in localStorage["${key}"]`;
  } catch (e) {
    fail("tune", $("tune-status"), e.message);
  } finally {
    $("tune-progress").hidden = true;
    $("tune").disabled = false;
  }
}

async function embedTyped() {
  const texts = $("texts").value.split("\n").map((t) => t.trim()).filter((t) => t);
  if (!texts.length) {
    // Nothing to embed: old results must not stand as if they were this input's.
    $("similarity").innerHTML = "";
    $("embed-status").textContent = "nothing to embed: type one sentence per line";
    return;
  }
  $("embed").disabled = true;
  $("embed-status").textContent = "embedding…";
  try {
    const t0 = performance.now();
    const vectors = await embedder.embed(texts);
    let status = `${texts.length} sentences in ${(performance.now() - t0).toFixed(0)} ms`;
    // As the CLI warns: a text past the model's token limit is embedded from its start only.
    const cut = (await embedder.truncated(texts)).flatMap((c, i) => (c ? [i + 1] : []));
    if (cut.length) {
      const many = cut.length > 1;
      status += ` — sentence${many ? "s" : ""} ${cut.join(", ")} ${many ? "pass" : "passes"} the model's ` +
        `token limit (max_seq_length) and ${many ? "were" : "was"} embedded from ${many ? "their" : "its"} ` +
        "first tokens only, as sentence-transformers does";
    }
    $("embed-status").textContent = status;
    showSimilarity(texts, vectors);
  } catch (e) {
    fail("embed", $("embed-status"), e.message);
  } finally {
    $("embed").disabled = false;
  }
}

async function main() {
  try {
    ridge = await Ridge.create();
    window.ridge = ridge;
    state.adapter = {
      adapter: ridge.adapter,
      tuning_key: ridge.tuningKey,
      tuning_warnings: ridge.tuningWarnings,
    };
    showAdapter(state.adapter);
    $("tune").onclick = tuneClicked;
  } catch (e) {
    fail("adapter", $("adapter"), `no WebGPU adapter: ${e.message}`);
    return;
  }
  if (runSuite) {
    $("suite-status").textContent = "running every kernel against its CPU reference…";
    $("model-status").textContent = "waiting for the kernel suite…";
    $("tune-status").textContent = "waits for the kernel suite (both at once would slow both)";
    const bar = $("suite-progress");
    try {
      state.suite = await ridge.runSuite({
        repeats,
        onProgress: ({ done, total, step }) => {
          state.suite_progress = { done, total };
          bar.hidden = false;
          bar.max = total;
          bar.value = done;
          $("suite-status").textContent = `${done}/${total}: ${step}`;
        },
      });
      showSuite(state.suite);
    } catch (e) {
      fail("suite", $("suite-status"), e.message);
    } finally {
      bar.hidden = true;
    }
  } else {
    $("suite-status").textContent = "skipped (suite=0)";
  }
  // The autotuner times kernels too: it starts once the suite is done.
  $("tune").disabled = false;
  $("tune-status").textContent = "";
  $("model-status").textContent = `loading the model from ${modelBase}…`;
  try {
    embedder = await ridge.embedder(modelBase, { onProgress: showProgress });
    window.embedder = embedder;
    state.model = { dim: embedder.dim, from_cache: embedder.fromCache };
    $("model-progress").hidden = true;
    $("model-status").className = "pass";
    $("model-status").textContent = `model loaded (${state.model.dim}-dimensional embeddings; ` +
      `${state.model.from_cache.length ? "from the browser cache" : "fetched, now cached"})`;
    $("embed").disabled = false;
    $("embed").onclick = embedTyped;
  } catch (e) {
    $("model-progress").hidden = true;
    fail("model", $("model-status"), `the model could not be loaded: ${e.message}`);
  }
}

main();
