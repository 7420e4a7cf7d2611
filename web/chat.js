// The chat page: a multi-turn conversation with SmolLM2-135M-Instruct through Ridge's
// JavaScript API (pkg/ridge.js). The conversation stays in the model's KV cache between
// turns: each reply prefills only the new turn. State for tests is kept in
// `window.chatState` ({ ready, error, busy, turns, stats }).
//
// Query parameters: `model=URL` (the GGUF file; default the one `cargo xtask web` serves from
// the local cache), `f16=1` (f16 activations and KV cache, where the adapter has shader-f16).

import { Ridge } from "./pkg/ridge.js";

const params = new URLSearchParams(location.search);
const modelUrl = params.get("model") ?? "models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
const f16 = params.get("f16") === "1";

const $ = (id) => document.getElementById(id);
const state = { ready: false, error: null, busy: false, turns: [], stats: null };
window.chatState = state;

let llm = null;
let conversation = [];

function setStatus(text, error = false) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "muted";
  if (error) state.error = text;
}

function showProgress({ file, loaded, total }) {
  const bar = $("progress");
  bar.hidden = false;
  bar.max = Math.max(total, 1);
  bar.value = loaded;
  setStatus(`downloading ${file}: ${(loaded / 1e6).toFixed(1)} of ${(total / 1e6).toFixed(1)} MB`);
}

function addTurn(role, text) {
  const div = document.createElement("div");
  div.className = `turn ${role}`;
  div.textContent = text;
  $("messages").appendChild(div);
  return div;
}

function enable(busy) {
  state.busy = busy;
  $("send").disabled = busy;
  $("input").disabled = busy;
  $("reset").disabled = busy;
  $("stop").disabled = !busy;
}

function number(id, fallback) {
  const v = Number($(id).value);
  return Number.isFinite(v) ? v : fallback;
}

async function send() {
  const text = $("input").value.trim();
  if (!text || state.busy) return;
  $("input").value = "";
  addTurn("user", text);
  conversation.push({ role: "user", content: text });
  const reply = addTurn("assistant", "");
  const turn = { user: text, reply: "", tokens: 0 };
  state.turns.push(turn);
  enable(true);
  try {
    const options = {
      maxTokens: Math.max(1, Math.round(number("max-tokens", 256))),
      temperature: Math.max(0, number("temperature", 0)),
      topP: Math.min(1, Math.max(0.01, number("top-p", 1))),
      seed: Math.floor(Math.random() * 2 ** 31),
    };
    for await (const t of llm.generate(conversation, options)) {
      turn.reply += t.text;
      turn.tokens++;
      reply.textContent = turn.reply;
    }
    conversation.push({ role: "assistant", content: turn.reply.trim() });
    showStats(llm.lastStats);
  } catch (e) {
    conversation.pop();
    reply.className = "turn error";
    reply.textContent = e.message;
    state.error = e.message;
  } finally {
    enable(false);
    $("input").focus();
  }
}

// The roofline's decode bound, tokens/s, once measured: each reply's decode is shown as a
// fraction of it (on a CPU emulating a GPU the kernels run far below the copy bandwidth the
// roofline assumes, 0.4 against 15 tokens/s on SwiftShader: the bound is not a forecast).
let bound = null;

function showStats(s) {
  state.stats = s;
  $("ttft").textContent = `${s.time_to_first_token_ms.toFixed(0)} ms (${s.prompt_tokens} new prompt tokens)`;
  $("prefill").textContent = `${s.prefill_tokens_per_s.toFixed(1)} tokens/s`;
  const rate = s.decode_tokens_per_s; // null for one token
  const share = bound && rate != null ? `, ${((100 * rate) / bound).toFixed(0)} % of the roofline's bound` : "";
  $("decode").textContent =
    rate != null ? `${rate.toFixed(1)} tokens/s (${s.generated} tokens, ${s.finish}${share})` : "–";
}

async function main() {
  let ridge;
  try {
    ridge = await Ridge.create();
  } catch (e) {
    setStatus(`no WebGPU: ${e.message}`, true);
    return;
  }
  const adapter = ridge.adapter;
  const hasF16 = adapter.features.includes("shader-f16");
  setStatus(`loading ${modelUrl}…`);
  try {
    llm = await ridge.generator(modelUrl, { f16: f16 && hasF16, onProgress: showProgress });
  } catch (e) {
    $("progress").hidden = true;
    setStatus(`the model could not be loaded: ${e.message}`, true);
    return;
  }
  $("progress").hidden = true;
  const info = llm.info;
  setStatus(
    `${info.name}: ${info.layers} layers, ${(info.weight_bytes / 1e6).toFixed(1)} MB of weights on ` +
      `${adapter.name || "this adapter"} (${info.dtype}${hasF16 ? "" : "; no shader-f16, every kernel on its f32 path"}), ` +
      `${llm.fromCache ? "from the browser's cache" : "downloaded, now cached"}.`,
  );
  state.ready = true;
  enable(false);
  $("send").onclick = send;
  $("stop").onclick = () => llm.stop();
  $("reset").onclick = async () => {
    await llm.reset();
    conversation = [];
    $("messages").textContent = "";
  };
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      send();
    }
  });
  llm.predictedTokensPerSecond(128).then(
    (t) => {
      bound = t;
      $("predicted").textContent = `at most ${t.toFixed(1)} tokens/s (at a context of 128)`;
    },
    (e) => ($("predicted").textContent = `n/a (${e.message})`),
  );
}

main();
