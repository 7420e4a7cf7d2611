// Ridge's worker: owns the WebGPU device (through the wasm module), fetches the model, and
// answers the page's requests. Nothing here runs on the page's main thread.
//
// Messages in:  { id, cmd, args }   cmd ∈ init | suite | load | embed | tune | tokens
// Messages out: { id, ok, value | error }, { progress: { file, loaded, total } } while the
//               model loads, { tuning: { done, total, problem } } while tuning

import init, { Ridge } from "./pkg/ridge_web.js";

let ridge = null;

const CACHE_NAME = "ridge-model-v1";

async function adapterName() {
  const adapter = await navigator.gpu?.requestAdapter();
  const info = adapter?.info ?? {};
  return [info.vendor, info.architecture, info.description]
    .filter((s) => s)
    .join(" ");
}

const commands = {
  async init() {
    if (!navigator.gpu) throw new Error("this browser has no WebGPU (navigator.gpu is missing)");
    await init();
    ridge = await Ridge.create(await adapterName());
    const key = ridge.tuning_key();
    const warnings = ridge.install_tuning(storedTables[key]);
    return { adapter: JSON.parse(ridge.adapter()), tuning_key: key, tuning_warnings: warnings };
  },

  async suite({ repeats = 3 }) {
    return JSON.parse(await ridge.run_suite(repeats));
  },

  async load({ base }) {
    const url = new URL(base, self.location.href);
    if (!url.pathname.endsWith("/")) url.pathname += "/";
    const cache = "caches" in self ? await caches.open(CACHE_NAME) : null;
    const fromCache = [];
    // A 404 leaves a file out; Ridge then says which required file is missing, by URL.
    for (const name of Ridge.model_files()) {
      const bytes = await fetchFile(cache, new URL(name, url), name, fromCache);
      if (bytes) ridge.add_model_file(name, bytes);
    }
    const dim = ridge.load_model(url.href);
    return { dim, from_cache: fromCache };
  },

  async embed({ texts, batch_size = 16 }) {
    const t0 = performance.now();
    const flat = await ridge.embed(texts, batch_size);
    const ms = performance.now() - t0;
    const dim = flat.length / texts.length;
    const vectors = [];
    for (let i = 0; i < texts.length; i++) vectors.push(Array.from(flat.subarray(i * dim, (i + 1) * dim)));
    return { vectors, ms };
  },

  // The autotuner; the page stores the returned table under `key` in localStorage.
  async tune({ ops = "", budget_s = 30 }) {
    const report = (done, total, problem) => self.postMessage({ tuning: { done, total, problem } });
    const table = await ridge.tune(ops, budget_s, report);
    return { key: ridge.tuning_key(), table };
  },

  async tokens({ texts }) {
    return texts.map((t) => Array.from(ridge.token_ids(t)));
  },
};

// Workers have no localStorage: the page passes its stored tuning tables in with `init`.
let storedTables = {};

// One model file: from the Cache API when there, else fetched with progress and stored.
// Returns the bytes, or null for a 404.
async function fetchFile(cache, url, name, fromCache) {
  let response = cache ? await cache.match(url) : undefined;
  if (response) {
    fromCache.push(name);
  } else {
    response = await fetch(url);
    if (response.status === 404) return null;
    if (!response.ok) throw new Error(`${url.href}: HTTP ${response.status} ${response.statusText}`);
  }
  const total = Number(response.headers.get("content-length")) || 0;
  const reader = response.body.getReader();
  const chunks = [];
  let loaded = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    loaded += value.length;
    self.postMessage({ progress: { file: name, loaded, total } });
  }
  const bytes = new Uint8Array(loaded);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.length;
  }
  if (total && loaded !== total) throw new Error(`${url.href}: truncated (${loaded} of ${total} bytes)`);
  if (cache && !fromCache.includes(name)) {
    await cache.put(url, new Response(bytes, { headers: { "content-length": String(loaded) } }));
  }
  return bytes;
}

self.onmessage = async ({ data: { id, cmd, args = {} } }) => {
  try {
    if (cmd === "init") storedTables = args.stored_tables ?? {};
    if (cmd !== "init" && !ridge) throw new Error("Ridge is not initialised");
    const value = await commands[cmd](args);
    self.postMessage({ id, ok: true, value });
  } catch (e) {
    self.postMessage({ id, ok: false, error: String(e?.message ?? e) });
  }
};
