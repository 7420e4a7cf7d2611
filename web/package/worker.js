// Ridge's worker: owns the WebGPU device (through the wasm module), fetches models, and
// answers ridge.js. Nothing here runs on the page's main thread.
//
// Messages in:  { id, cmd, args }
// Messages out: { id, ok, value | error }, and while a call runs { id, event } with
//               { progress: { file, loaded, total } } (model downloads), { tuning: { done,
//               total, problem } } (the autotuner), { suite: { done, total, step } } (the
//               kernel suite), { bench: { done, total, case } } (the bench's sweep) or
//               { token: { id, text } } (generation).

import init, { Ridge } from "./ridge_web.js";

const CACHE_NAME = "ridge-model-v1";

let ridge = null;
const models = new Map(); // handle → Embedder (wasm Ridge with a model) or Generator
let nextHandle = 1;

async function adapterName() {
  const adapter = await navigator.gpu?.requestAdapter();
  const info = adapter?.info ?? {};
  return [info.vendor, info.architecture, info.description].filter((s) => s).join(" ");
}

function model(handle, kind) {
  const m = models.get(handle);
  if (!m || m.kind !== kind) throw new Error(`no ${kind} ${handle} (freed?)`);
  return m.value;
}

const commands = {
  async init({ stored_tables = {} }) {
    if (!navigator.gpu) throw new Error("this browser has no WebGPU (navigator.gpu is missing)");
    await init();
    ridge = await Ridge.create(await adapterName());
    const key = ridge.tuning_key();
    const warnings = ridge.install_tuning(stored_tables[key]);
    return { adapter: JSON.parse(ridge.adapter()), tuning_key: key, tuning_warnings: warnings };
  },

  async suite({ repeats = 3 }, event) {
    const report = (done, total, step) => event({ suite: { done, total, step } });
    return JSON.parse(await ridge.run_suite(repeats, report));
  },

  async bench({ size = "quick", ops = "", repeats = 10 }, event) {
    const report = (done, total, c) => event({ bench: { done, total, case: c } });
    return JSON.parse(await ridge.bench(size, ops, repeats, report));
  },

  async tune({ ops = "", budget_s = 30 }, event) {
    const report = (done, total, problem) => event({ tuning: { done, total, problem } });
    const table = await ridge.tune(ops, budget_s, report);
    return { key: ridge.tuning_key(), table };
  },

  // A sentence-transformers folder: each file fetched (a 404 leaves it out; Ridge then names
  // the required file that is missing, by URL).
  async load_embedder({ base }, event) {
    // The wasm Ridge holds one embedding model: a second would silently replace the first
    // under its handle.
    const live = [...models.entries()].find(([, m]) => m.kind === "embedder");
    if (live) {
      throw new Error(`embedder ${live[0]} is loaded: Ridge holds one embedder at a time (dispose it first)`);
    }
    const cache = "caches" in self ? await caches.open(CACHE_NAME) : null;
    const fromCache = [];
    const fetched = [];
    for (const name of Ridge.model_files()) {
      const url = new URL(name, base);
      const bytes = await fetchFile(cache, url, name, fromCache, event);
      if (bytes) {
        ridge.add_model_file(name, bytes);
        fetched.push(url);
      }
    }
    let dim;
    try {
      dim = ridge.load_model(base);
    } catch (e) {
      await forget(cache, fetched); // a file that failed to load is fetched again next time
      throw e;
    }
    const handle = nextHandle++;
    models.set(handle, { kind: "embedder", value: ridge });
    return { handle, dim, from_cache: fromCache };
  },

  async embed({ handle, texts, batch_size = 16 }) {
    strings(texts);
    const flat = await model(handle, "embedder").embed(texts, batch_size);
    const dim = flat.length / Math.max(texts.length, 1);
    const vectors = [];
    for (let i = 0; i < texts.length; i++) vectors.push(Array.from(flat.subarray(i * dim, (i + 1) * dim)));
    return { vectors };
  },

  async truncated({ handle, texts }) {
    strings(texts);
    const m = model(handle, "embedder");
    return texts.map((t) => m.truncates(t));
  },

  async tokens({ handle, texts }) {
    strings(texts);
    const m = model(handle, "embedder");
    return texts.map((t) => Array.from(m.token_ids(t)));
  },

  async load_generator({ url, f16 = false, context = 4096 }, event) {
    const cache = "caches" in self ? await caches.open(CACHE_NAME) : null;
    const fromCache = [];
    const name = new URL(url).pathname.split("/").pop();
    const bytes = await fetchFile(cache, new URL(url), name, fromCache, event);
    if (!bytes) throw new Error(`${url}: file not found`);
    let generator;
    try {
      generator = ridge.load_generator(bytes, url, f16, context);
    } catch (e) {
      await forget(cache, [new URL(url)]); // a file that failed to load is fetched again next time
      throw e;
    }
    const handle = nextHandle++;
    models.set(handle, { kind: "generator", value: generator });
    return { handle, info: JSON.parse(generator.info()), from_cache: fromCache.length > 0 };
  },

  async generate({ handle, prompt, raw = false, options = "" }, event) {
    const g = model(handle, "generator");
    let ids;
    if (Array.isArray(prompt)) ids = g.encode_chat(JSON.stringify(prompt));
    else if (prompt && typeof prompt === "object" && Array.isArray(prompt.ids)) {
      const bad = prompt.ids.find((id) => !Number.isInteger(id) || id < 0 || id > 0xffffffff);
      if (bad !== undefined) throw new Error(`token ids are integers from 0, not ${JSON.stringify(bad)}`);
      ids = Uint32Array.from(prompt.ids);
    }
    else if (typeof prompt === "string" && raw) ids = g.encode(prompt);
    else if (typeof prompt === "string") ids = g.encode_chat(JSON.stringify([{ role: "user", content: prompt }]));
    else throw new Error("a prompt is a string, a list of {role, content} messages, or {ids}");
    const onToken = (id, text) => event({ token: { id, text } });
    return JSON.parse(await g.generate(ids, options, onToken));
  },

  async stop({ handle }) {
    model(handle, "generator").stop();
  },

  async reset({ handle }) {
    model(handle, "generator").reset();
  },

  async predict({ handle, depth = 128 }) {
    return await model(handle, "generator").predicted_tokens_per_s(depth);
  },

  // Frees a model's GPU buffers and gives the free ones back to the device.
  async free({ handle }) {
    const m = models.get(handle);
    if (!m) return;
    models.delete(handle);
    if (m.kind === "generator") m.value.free();
    else m.value.unload_model();
    ridge.release_memory();
  },

  async gpu_bytes() {
    return ridge.gpu_bytes();
  },

  async check_shaders() {
    return JSON.parse(await ridge.check_shaders());
  },
};

// Errors unless `texts` is an array of strings (a string alone would embed each character).
function strings(texts) {
  if (!Array.isArray(texts) || texts.some((t) => typeof t !== "string")) {
    throw new Error("texts are an array of strings");
  }
}

// Drops `urls` from the cache: files that failed to load.
async function forget(cache, urls) {
  if (cache) await Promise.all(urls.map((u) => cache.delete(u)));
}

// One model file: from the Cache API when there, else fetched with progress and stored.
// Returns the bytes, or null for a 404.
async function fetchFile(cache, url, name, fromCache, event) {
  let response = cache ? await cache.match(url) : undefined;
  if (response) {
    fromCache.push(name);
  } else {
    try {
      response = await fetch(url);
    } catch (e) {
      throw new Error(`${url.href}: ${e?.message ?? e}`);
    }
    if (response.status === 404) return null;
    if (!response.ok) throw new Error(`${url.href}: HTTP ${response.status} ${response.statusText}`);
  }
  const total = Number(response.headers.get("content-length")) || 0;
  const reader = response.body.getReader();
  const chunks = [];
  let loaded = 0;
  let reported = 0;
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (e) {
      throw new Error(`${url.href}: ${e?.message ?? e} after ${loaded} bytes`);
    }
    const { done, value } = chunk;
    if (done) break;
    chunks.push(value);
    loaded += value.length;
    // At most a message per MB (a 98 MB file would otherwise send thousands).
    if (loaded - reported >= 1 << 20 || loaded === total) {
      reported = loaded;
      event({ progress: { file: name, loaded, total } });
    }
  }
  // The last event says the whole file arrived, also where the server sent no
  // Content-Length (its total then becomes what arrived).
  if (reported !== loaded) event({ progress: { file: name, loaded, total: total || loaded } });
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
  const event = (e) => self.postMessage({ id, event: e });
  try {
    if (cmd !== "init" && !ridge) throw new Error("Ridge is not initialised");
    const command = commands[cmd];
    if (!command) throw new Error(`unknown command ${cmd}`);
    const value = await command(args, event);
    self.postMessage({ id, ok: true, value });
  } catch (e) {
    self.postMessage({ id, ok: false, error: String(e?.message ?? e) });
  }
};
