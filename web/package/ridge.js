// Ridge in a web page: WebGPU kernels, sentence embeddings and a quantized chat model, with
// one import. Ridge runs in a module worker that owns the WebGPU device, so the page never
// freezes; every call returns a promise, and `generate` an async iterator of tokens.
//
//   import { Ridge } from "./ridge/ridge.js";
//   const ridge = await Ridge.create();
//   const llm = await ridge.generator("models/SmolLM2-135M-Instruct.Q4_1.gguf");
//   for await (const t of llm.generate("What is WebGPU?", { maxTokens: 64 })) out.textContent += t.text;
//
// Errors are `Error`s with a message that names the problem (a missing file by URL, an
// unsupported model, a limit of this GPU).

const CACHE_NAME = "ridge-model-v1";

export class Ridge {
  #worker;
  #pending = new Map();
  #failed = null;
  #nextId = 0;

  /** The adapter: name, backend, features, limits, subgroup sizes (as `ridge info --json`). */
  adapter = null;
  /** The localStorage key of this adapter's tuning table. */
  tuningKey = "";
  /** Warnings about a stored tuning table that could not be used. */
  tuningWarnings = [];

  /**
   * Starts Ridge's worker and opens this browser's WebGPU adapter. The adapter's stored
   * tuning table (localStorage) is installed when there is one.
   * @param {{ workerUrl?: string | URL }} [options]
   */
  static async create({ workerUrl } = {}) {
    const ridge = new Ridge();
    ridge.#worker = new Worker(workerUrl ?? new URL("./worker.js", import.meta.url), { type: "module" });
    ridge.#worker.onmessage = ({ data }) => ridge.#receive(data);
    ridge.#worker.onerror = (e) => {
      // A worker that failed to start gives an Event without a message.
      const why = e.message ?? `could not start ${workerUrl ?? "worker.js"} (a wrong workerUrl?)`;
      ridge.#fail(new Error(`Ridge's worker failed: ${why}`));
    };
    const init = await ridge.#call("init", { stored_tables: storedTables() });
    ridge.adapter = init.adapter;
    ridge.tuningKey = init.tuning_key;
    ridge.tuningWarnings = init.tuning_warnings;
    return ridge;
  }

  #receive({ id, ok, value, error, event }) {
    const p = this.#pending.get(id);
    if (!p) return;
    if (event) return p.onEvent?.(event);
    this.#pending.delete(id);
    ok ? p.resolve(value) : p.reject(new Error(error));
  }

  #call(cmd, args = {}, onEvent) {
    if (this.#failed) return Promise.reject(this.#failed);
    const id = this.#nextId++;
    this.#worker.postMessage({ id, cmd, args });
    return new Promise((resolve, reject) => this.#pending.set(id, { resolve, reject, onEvent }));
  }

  // Rejects every call in flight and every later one with `error`: no promise is left
  // waiting on a worker that is gone.
  #fail(error) {
    this.#failed = error;
    for (const p of this.#pending.values()) p.reject(error);
    this.#pending.clear();
  }

  /** @internal */
  _call(cmd, args, onEvent) {
    return this.#call(cmd, args, onEvent);
  }

  /**
   * Every kernel on seeded random data against its f64 CPU reference, timed.
   * `onProgress({ done, total, step })` follows it: each case is checked, then timed.
   * @returns {Promise<object[]>} one result per case: op, shape, dtype, max_abs_error, worst_ratio, passed, ms, cost
   */
  runSuite({ repeats = 3, onProgress } = {}) {
    return this.#call("suite", { repeats }, (e) => onProgress?.(e.suite));
  }

  /**
   * `ridge bench` on this browser's adapter: its ceilings measured, every case of the
   * `size` sweep ("quick", "medium" or "full"; `ops`, comma separated, keeps those ops)
   * timed in two passes of `repeats` launches, and the per-op model fitted on the runs.
   * `onProgress({ done, total, case })` follows it.
   * @returns {Promise<object>} the report, as `ridge bench --json` writes it (`rows`, `measured`,
   *   `calibration.kinds`: each kind's fitted terms and its error held out)
   */
  bench({ size = "quick", ops = "", repeats = 10, onProgress } = {}) {
    return this.#call("bench", { size, ops, repeats }, (e) => onProgress?.(e.bench));
  }

  /**
   * The autotuner: times every variant of `ops` (comma separated; empty: all) on this
   * adapter, stores the fastest in localStorage and installs them.
   * @returns {Promise<{ key: string, entries: number }>}
   */
  async tune({ ops = "", budgetSeconds = 30, onProgress } = {}) {
    const { key, table } = await this.#call("tune", { ops, budget_s: budgetSeconds }, (e) =>
      onProgress?.(e.tuning),
    );
    localStorage.setItem(key, table);
    return { key, entries: JSON.parse(table).entries.length };
  }

  /**
   * A sentence-transformers model (a folder URL: config.json, tokenizer.json,
   * model.safetensors, …), fetched once and kept in the browser's Cache API.
   * @param {string | URL} url
   * @param {{ onProgress?: (p: { file: string, loaded: number, total: number }) => void }} [options]
   */
  async embedder(url, { onProgress } = {}) {
    const base = new URL(url, location.href);
    if (!base.pathname.endsWith("/")) base.pathname += "/";
    const info = await this.#call("load_embedder", { base: base.href }, (e) => onProgress?.(e.progress));
    return new Embedder(this, info);
  }

  /**
   * A GGUF text model (SmolLM2-135M-Instruct, or any Llama GGUF with Q8_0/Q4_0/Q4_1
   * weights), fetched once with progress and kept in the browser's Cache API.
   * @param {string | URL} url
   * @param {{ f16?: boolean, context?: number, onProgress?: (p: { file: string, loaded: number, total: number }) => void }} [options]
   */
  async generator(url, { f16 = false, context = 4096, onProgress } = {}) {
    whole("context", context, 1);
    const href = new URL(url, location.href).href;
    const info = await this.#call("load_generator", { url: href, f16, context }, (e) =>
      onProgress?.(e.progress),
    );
    return new Generator(this, info);
  }

  /** Bytes of GPU memory in Ridge's tensor buffers (in use and free). */
  gpuBytes() {
    return this.#call("gpu_bytes");
  }

  /**
   * Compiles every shader variant Ridge builds (those this device's features allow) with
   * this browser's WGSL compiler; resolves to the ones it refuses, `[{ shader, entry, error }]`.
   */
  checkShaders() {
    return this.#call("check_shaders");
  }

  /**
   * Stops the worker; the device and every model go with it. Calls in flight, and any made
   * after, reject ("Ridge was terminated"); a generation's loop ends with that error.
   */
  terminate() {
    this.#worker.terminate();
    this.#fail(new Error("Ridge was terminated"));
  }
}

/** A sentence-embedding model in Ridge's worker. */
export class Embedder {
  #ridge;
  #handle;
  /** Embedding width. */
  dim;
  /** Files that came from the browser's cache. */
  fromCache;

  constructor(ridge, { handle, dim, from_cache }) {
    this.#ridge = ridge;
    this.#handle = handle;
    this.dim = dim;
    this.fromCache = from_cache;
  }

  /**
   * Embeddings of `texts`, L2-normalised as sentence-transformers makes them.
   * @returns {Promise<number[][]>}
   */
  async embed(texts, { batchSize = 16 } = {}) {
    whole("batchSize", batchSize, 1);
    const { vectors } = await this.#ridge._call("embed", { handle: this.#handle, texts, batch_size: batchSize });
    return vectors;
  }

  /**
   * Whether each text is longer than the model's token limit (`max_seq_length`, 256 for
   * all-MiniLM-L6-v2): such texts are embedded from their first tokens only, as
   * sentence-transformers does.
   * @returns {Promise<boolean[]>}
   */
  truncated(texts) {
    return this.#ridge._call("truncated", { handle: this.#handle, texts });
  }

  /** Token ids of each text, as the model's tokenizer makes them. */
  tokenIds(texts) {
    return this.#ridge._call("tokens", { handle: this.#handle, texts });
  }

  /** Frees the model's GPU memory. */
  dispose() {
    return this.#ridge._call("free", { handle: this.#handle });
  }
}

/** A text-generation model in Ridge's worker, with its conversation's KV cache. */
export class Generator {
  #ridge;
  #handle;
  /** name, layers, hidden, heads, kv_heads, vocab, parameters, weight_bytes, context, dtype */
  info;
  /** Whether the file came from the browser's cache. */
  fromCache;
  /**
   * The timings of the last reply: prompt_tokens, generated (the tokens the loop took: a
   * loop broken off counts none the worker made past it), time_to_first_token_ms,
   * prefill_tokens_per_s, decode_tokens_per_s (the worker's pace), finish.
   */
  lastStats = null;

  constructor(ridge, { handle, info, from_cache }) {
    this.#ridge = ridge;
    this.#handle = handle;
    this.info = info;
    this.fromCache = from_cache;
  }

  /**
   * Streams a reply, token by token. `prompt` is a user message (the chat template is
   * applied, unless `raw`), a conversation (`[{ role, content }, …]`), or `{ ids }`. What the
   * conversation shares with the previous call stays in the KV cache; only the rest is
   * prefilled. Breaking out of the loop stops the reply. After the loop, `lastStats` holds
   * the timings.
   * @param {string | {role: string, content: string}[] | { ids: number[] }} prompt
   * @param {{ maxTokens?: number, temperature?: number, topK?: number, topP?: number, repetitionPenalty?: number, seed?: number, ignoreEos?: boolean, raw?: boolean }} [options]
   * @returns {AsyncGenerator<{ id: number, text: string }>}
   */
  async *generate(prompt, options = {}) {
    this.lastStats = null;
    const queue = [];
    let wake = null;
    let finished = false;
    let failure = null;
    checkOptions(options);
    const args = {
      handle: this.#handle,
      prompt,
      raw: options.raw ?? false,
      options: JSON.stringify({
        max_tokens: options.maxTokens ?? 256,
        temperature: options.temperature ?? 0,
        top_k: options.topK ?? 0,
        top_p: options.topP ?? 1,
        repetition_penalty: options.repetitionPenalty ?? 1,
        seed: options.seed ?? 0,
        ignore_eos: options.ignoreEos ?? false,
      }),
    };
    const done = this.#ridge._call("generate", args, (e) => {
      queue.push(e.token);
      wake?.();
    });
    done.then(
      (stats) => {
        this.lastStats = stats;
        finished = true;
        wake?.();
      },
      (e) => {
        failure = e;
        finished = true;
        wake?.();
      },
    );
    // Tokens the consumer took: a loop broken off leaves the worker a token or two ahead,
    // which the stats must not count as part of the reply.
    let taken = 0;
    try {
      for (;;) {
        while (queue.length) {
          const token = queue.shift();
          taken++;
          yield token;
        }
        if (finished) {
          if (failure) throw failure;
          return;
        }
        await new Promise((r) => (wake = r));
        wake = null;
      }
    } finally {
      if (!finished || queue.length) {
        await this.stop().catch(() => {});
        const stats = await done.catch(() => null);
        if (stats && stats.generated !== taken) {
          this.lastStats = { ...stats, generated: taken, finish: "stopped" };
        }
      }
    }
  }

  /**
   * Stops the reply in progress after its current token. Resolves when the worker has the
   * request; rejects for a disposed generator.
   */
  stop() {
    return this.#ridge._call("stop", { handle: this.#handle });
  }

  /** Forgets the conversation. */
  reset() {
    return this.#ridge._call("reset", { handle: this.#handle });
  }

  /**
   * The roofline model's decode speed on this adapter at a context of `depth`, tokens/s: every
   * dispatch of a token at the measured copy bandwidth and FMA rate plus its dispatch overhead.
   * A bound, not a forecast (kernels run below those roofs: far below on CPU emulators).
   */
  predictedTokensPerSecond(depth = 128) {
    try {
      whole("depth", depth, 0);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#ridge._call("predict", { handle: this.#handle, depth });
  }

  /** Frees the model's GPU memory. */
  dispose() {
    return this.#ridge._call("free", { handle: this.#handle });
  }
}

/** The tuning tables this page stored (workers have no localStorage). */
function storedTables() {
  const tables = {};
  if (typeof localStorage === "undefined") return tables;
  for (let i = 0; i < localStorage.length; i++) {
    const key = localStorage.key(i);
    if (key.startsWith("ridge/tuning/")) tables[key] = localStorage.getItem(key);
  }
  return tables;
}

// Errors unless `value` is a whole number from `min` (a fraction, NaN or a negative number
// would be coerced on its way to the worker).
function whole(name, value, min) {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new Error(`${name} ${value}: a whole number from ${min}`);
  }
}

const GENERATE_OPTIONS = ["maxTokens", "temperature", "topK", "topP", "repetitionPenalty", "seed", "ignoreEos", "raw"];

// Errors for an option `generate` does not take (a typo would silently run the default) and
// for numbers that are not what the option takes; the model checks their ranges.
function checkOptions(options) {
  const unknown = Object.keys(options).find((k) => !GENERATE_OPTIONS.includes(k));
  if (unknown !== undefined) throw new Error(`option ${unknown}: one of ${GENERATE_OPTIONS.join(", ")}`);
  for (const k of ["maxTokens", "topK", "seed"]) if (k in options) whole(k, options[k], 0);
  for (const k of ["temperature", "topP", "repetitionPenalty"]) {
    if (k in options && !Number.isFinite(options[k])) throw new Error(`${k} ${options[k]}: a finite number`);
  }
}

export { CACHE_NAME };
