//! Text generation in the browser: a GGUF decoder (SmolLM2-135M-Instruct) on the worker's
//! WebGPU device, streaming tokens to a JavaScript callback.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use js_sys::Promise;
use ridge_core::{Context, DType};
use ridge_kernels::ceilings;
use ridge_model::roofline::Ceilings;
use ridge_nn::file::FileBytes;
use ridge_nn::{GenerateOptions, Message, Sampling, Session, TextGenerator};
use serde::Deserialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::js_err;

/// A GGUF text generator: the model, its conversation (KV cache) and a stop flag.
#[wasm_bindgen]
pub struct Generator {
    ctx: Rc<Context>,
    model: Rc<TextGenerator>,
    /// The conversation; `None` while a reply is being generated.
    session: Rc<RefCell<Option<Session>>>,
    stop: Rc<Cell<bool>>,
    context: usize,
    ceilings: Rc<RefCell<Option<Ceilings>>>,
}

/// What `generate` takes, as JSON (every field optional).
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Options {
    max_tokens: usize,
    temperature: f32,
    top_k: usize,
    top_p: f32,
    repetition_penalty: f32,
    seed: u64,
    ignore_eos: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_tokens: 256,
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            repetition_penalty: 1.0,
            seed: 0,
            ignore_eos: false,
        }
    }
}

impl Generator {
    /// Loads a GGUF file's bytes (`url` names it in errors) with a conversation of `context`
    /// positions (at most the model's).
    pub(crate) fn load(
        ctx: Rc<Context>,
        bytes: Vec<u8>,
        url: &str,
        f16: bool,
        context: usize,
    ) -> Result<Generator, JsValue> {
        let dtype = if f16 { DType::F16 } else { DType::F32 };
        let file = FileBytes::from_bytes(std::path::Path::new(url), bytes);
        let model = TextGenerator::from_file(&ctx, file, dtype).map_err(js_err)?;
        let context = context.clamp(1, model.model().config().context);
        let cache = model.cache(&ctx, context).map_err(js_err)?;
        Ok(Generator {
            ctx,
            model: Rc::new(model),
            session: Rc::new(RefCell::new(Some(Session::new(cache)))),
            stop: Rc::new(Cell::new(false)),
            context,
            ceilings: Rc::new(RefCell::new(None)),
        })
    }
}

#[wasm_bindgen]
impl Generator {
    /// The model as JSON: name, layers, width, heads, parameters, weight bytes on the GPU,
    /// the conversation's context and its KV cache's bytes, the activations' type.
    pub fn info(&self) -> String {
        let m = self.model.model();
        let c = m.config();
        serde_json::json!({
            "name": self.model.name(),
            "layers": c.layers,
            "hidden": c.hidden,
            "heads": c.heads,
            "kv_heads": c.kv_heads,
            "vocab": c.vocab,
            "parameters": c.parameters(),
            "weight_bytes": m.weight_bytes(),
            "context": self.context,
            "dtype": m.dtype().to_string(),
        })
        .to_string()
    }

    /// Token ids of `text` as it is (no chat template).
    pub fn encode(&self, text: String) -> Result<Vec<u32>, JsValue> {
        self.model.encode(&text).map_err(js_err)
    }

    /// Token ids of a conversation (JSON: `[{"role", "content"}, …]`) with the chat template
    /// applied and the assistant's turn opened.
    pub fn encode_chat(&self, messages: String) -> Result<Vec<u32>, JsValue> {
        let messages: Vec<Message> = serde_json::from_str(&messages)
            .map_err(|e| js_err(format!("messages: not a list of {{role, content}} ({e})")))?;
        self.model.encode_chat(&messages).map_err(js_err)
    }

    /// The text of `ids` (special tokens skipped).
    pub fn decode(&self, ids: Vec<u32>) -> Result<String, JsValue> {
        self.model.decode(&ids, true).map_err(js_err)
    }

    /// Generates a reply to `ids` (a whole conversation, or a prompt), keeping what the
    /// conversation already holds in its KV cache. `options` is JSON (`max_tokens`,
    /// `temperature`, `top_k`, `top_p`, `repetition_penalty`, `seed`, `ignore_eos`);
    /// `on_token(id, text)` is called for each token as soon as it exists. Resolves to the
    /// timings as JSON (`prompt_tokens` prefilled, `generated`, `time_to_first_token_ms`,
    /// `prefill_tokens_per_s`, `decode_tokens_per_s`, `finish`).
    ///
    /// Errors: a reply already in progress, bad options, a conversation longer than the
    /// context, GPU errors.
    pub fn generate(&self, ids: Vec<u32>, options: String, on_token: js_sys::Function) -> Promise {
        let (ctx, model, session, stop) = (
            self.ctx.clone(),
            self.model.clone(),
            self.session.clone(),
            self.stop.clone(),
        );
        future_to_promise(async move {
            let o: Options = if options.trim().is_empty() {
                Options::default()
            } else {
                serde_json::from_str(&options).map_err(|e| js_err(format!("options: {e}")))?
            };
            let options = GenerateOptions {
                max_tokens: o.max_tokens,
                sampling: Sampling {
                    temperature: o.temperature,
                    top_k: o.top_k,
                    top_p: o.top_p,
                    repetition_penalty: o.repetition_penalty,
                    seed: o.seed,
                },
                stop_at_eos: !o.ignore_eos,
                top_logits: 0,
            };
            let mut current = session
                .borrow_mut()
                .take()
                .ok_or_else(|| js_err("a reply is already being generated: stop it first"))?;
            stop.set(false);
            let mut failed = None;
            let result = current
                .reply(&ctx, &model, &ids, &options, |t| {
                    let (id, text) = (JsValue::from(t.id), JsValue::from(t.text.as_str()));
                    if let Err(e) = on_token.call2(&JsValue::NULL, &id, &text) {
                        failed = Some(e);
                        return false;
                    }
                    !stop.get()
                })
                .await;
            *session.borrow_mut() = Some(current);
            let (stats, _) = result.map_err(js_err)?;
            if let Some(e) = failed {
                return Err(e);
            }
            Ok(serde_json::to_string(&stats).map_err(js_err)?.into())
        })
    }

    /// Stops the reply in progress after its current token.
    pub fn stop(&self) {
        self.stop.set(true);
    }

    /// Forgets the conversation (its KV cache is kept for the next).
    pub fn reset(&self) -> Result<(), JsValue> {
        self.session
            .borrow_mut()
            .as_mut()
            .ok_or_else(|| js_err("a reply is being generated: stop it first"))?
            .clear();
        Ok(())
    }

    /// The roofline model's decode speed on this adapter, tokens/s, at a context of `depth`
    /// positions: each dispatch of one token's forward pass priced at the copy bandwidth and
    /// FMA rate measured here (once, then kept), each with the measured per-dispatch overhead
    /// ([`Ceilings::predict`]).
    pub fn predicted_tokens_per_s(&self, depth: usize) -> Promise {
        let (ctx, model, cache) = (self.ctx.clone(), self.model.clone(), self.ceilings.clone());
        future_to_promise(async move {
            if cache.borrow().is_none() {
                let m = ceilings::measure(&ctx, 16 << 20, 2).await.map_err(js_err)?;
                *cache.borrow_mut() = Some(m.ceilings(model.model().dtype() == DType::F16));
            }
            let c = cache.borrow().clone().expect("measured above");
            let seconds: f64 = model
                .model()
                .plan(1, depth)
                .iter()
                .map(|op| c.predict(&op.cost).seconds)
                .sum();
            Ok((1.0 / seconds).into())
        })
    }
}
