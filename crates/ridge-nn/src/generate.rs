//! Text generation with a GGUF decoder: prompt → prefill (one submission) → decode, each
//! token handed to the caller as soon as it exists, until the end-of-sequence token, a
//! token limit, a full context, or the caller says stop.

use std::path::PathBuf;

use ridge_core::{Context, DType, Tensor};
use web_time::Instant;

use crate::error::{Error, Result};
use crate::file::FileBytes;
use crate::gguf::Gguf;
use crate::llama::tokenizer::{GgufTokenizer, Message, apply_chat_template};
use crate::llama::{KvCache, Llama};
use crate::sampling::{Sampler, Sampling, top_k};

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateOptions {
    /// Most tokens to generate (≥ 1).
    pub max_tokens: usize,
    /// How each token is chosen.
    pub sampling: Sampling,
    /// Stop after the end-of-sequence token (it is still handed to the caller).
    pub stop_at_eos: bool,
    /// Report the `top_logits` largest raw logits with each token (0: none; reading them back
    /// costs a copy of the whole vocabulary's logits per token).
    pub top_logits: usize,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self {
            max_tokens: 256,
            sampling: Sampling::greedy(),
            stop_at_eos: true,
            top_logits: 0,
        }
    }
}

/// One generated token.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// Its id.
    pub id: u32,
    /// The text it completes (possibly empty while a multi-byte character is incomplete;
    /// special tokens give none).
    pub text: String,
    /// The largest raw logits at this step as `(id, logit)`, largest first, when asked for.
    pub top_logits: Vec<(u32, f32)>,
}

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// The model produced its end-of-sequence token.
    Eos,
    /// `max_tokens` were generated.
    Length,
    /// The KV cache (context) is full.
    Context,
    /// The caller asked to stop.
    Stopped,
}

/// Timings of one generation (wall clock, host included).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Stats {
    /// Prompt tokens run through the prefill.
    pub prompt_tokens: usize,
    /// Tokens generated.
    pub generated: usize,
    /// From the call to the first token's id on the host, ms.
    pub time_to_first_token_ms: f64,
    /// Prompt tokens per second of the time to first token.
    pub prefill_tokens_per_s: f64,
    /// Tokens after the first per second of the time after the first (`None` for one token):
    /// no step is recorded ahead of the first id's arrival, so the time after it holds
    /// exactly the steps of the tokens after it (without logits for the caller each later step is recorded
    /// ahead of the GPU).
    pub decode_tokens_per_s: Option<f64>,
    /// Why it ended.
    pub finish: Finish,
}

/// A token still on the GPU: the argmax's or the sampler's output (the next step's input) and
/// its read-back.
struct PendingId {
    ids: Tensor,
    read: ridge_core::ReadBack,
}

/// What the next token comes from.
enum Next {
    /// Picked on the GPU: greedy's argmax or the GPU sampler's pick.
    Id(PendingId),
    /// Logits the caller wants: read back, the token picked on the host.
    Logits(Tensor),
}

/// How a step's token is picked on the GPU: the argmax, or the sampler with its step counter
/// (the generator's draw is a hash of the seed and the step, so a seed gives one reply).
enum GpuPick {
    Argmax,
    Sample {
        sampler: Box<ridge_kernels::sample::Sampler>,
        step: u32,
    },
}

/// A GGUF chat or text model on the GPU: decoder, tokenizer and chat template.
pub struct TextGenerator {
    model: Llama,
    tokenizer: GgufTokenizer,
    path: PathBuf,
    name: String,
}

impl TextGenerator {
    /// Memory-maps and loads the GGUF file at `path` with `dtype` activations.
    ///
    /// Errors: as [`TextGenerator::from_file`], and [`Error::Io`] when it cannot be read.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(ctx: &Context, path: &std::path::Path, dtype: DType) -> Result<Self> {
        Self::from_file(ctx, FileBytes::open(path)?, dtype)
    }

    /// Loads a GGUF file already in memory (or mapped).
    ///
    /// Errors: [`Error::Gguf`] for a file that is not valid GGUF; otherwise as
    /// [`Llama::load`] and [`GgufTokenizer::from_gguf`].
    pub fn from_file(ctx: &Context, file: FileBytes, dtype: DType) -> Result<Self> {
        let path = file.path().to_path_buf();
        let g = Gguf::parse(file).map_err(|source| Error::Gguf {
            path: path.clone(),
            source,
        })?;
        let tokenizer = GgufTokenizer::from_gguf(&g)?;
        let model = Llama::load(ctx, &g, dtype)?;
        let name = g
            .get("general.name")
            .and_then(crate::gguf::Value::as_str)
            .unwrap_or("a GGUF model")
            .to_string();
        Ok(Self {
            model,
            tokenizer,
            path,
            name,
        })
    }

    /// The decoder.
    pub fn model(&self) -> &Llama {
        &self.model
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &GgufTokenizer {
        &self.tokenizer
    }

    /// The model's name (`general.name`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Token ids of `text` as it stands (no chat template).
    ///
    /// Errors: [`Error::Input`] for an empty text; tokenizer errors.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let ids = self.tokenizer.encode(text, &self.path)?;
        if ids.is_empty() {
            return Err(Error::Input("the prompt is empty".into()));
        }
        Ok(ids)
    }

    /// The chat template applied to `messages` with the assistant's turn opened.
    ///
    /// Errors: [`Error::Unsupported`] when the file has no chat template; as
    /// [`apply_chat_template`].
    pub fn chat_text(&self, messages: &[Message]) -> Result<String> {
        let template =
            self.tokenizer
                .chat_template
                .as_deref()
                .ok_or_else(|| Error::Unsupported {
                    path: self.path.clone(),
                    message:
                        "the file has no chat template (tokenizer.chat_template); use a raw prompt"
                            .into(),
                })?;
        let token = |id: Option<u32>| {
            id.and_then(|i| self.tokenizer.tokenizer.id_to_token(i))
                .unwrap_or_default()
        };
        apply_chat_template(
            template,
            messages,
            true,
            &token(self.tokenizer.bos),
            &token(self.tokenizer.eos),
            &self.path,
        )
    }

    /// Token ids of `messages` with the chat template applied.
    ///
    /// Errors: as [`TextGenerator::chat_text`] and [`TextGenerator::encode`].
    pub fn encode_chat(&self, messages: &[Message]) -> Result<Vec<u32>> {
        self.encode(&self.chat_text(messages)?)
    }

    /// The text of `ids`, special tokens skipped when `skip_special`.
    ///
    /// Errors: tokenizer errors.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        self.tokenizer.decode(ids, skip_special, &self.path)
    }

    /// A KV cache for `capacity` positions (see [`Llama::cache`]).
    ///
    /// Errors: as [`Llama::cache`].
    pub fn cache(&self, ctx: &Context, capacity: usize) -> Result<KvCache> {
        self.model.cache(ctx, capacity)
    }

    /// Generates from `prompt` (ids, appended to whatever `cache` already holds), handing
    /// each token to `on_token` as soon as its id is on the host; `on_token` returns `false`
    /// to stop. Greedy decoding and sampling pick on the GPU (the argmax, or
    /// `ridge_kernels::sample`: the same parameters, a counter-based generator seeded with
    /// `seed`) and read back 4 bytes a token; with `top_logits` the logits are read back and
    /// the host's [`Sampler`] picks, with the GPU sampler's draws and walk (the same seed
    /// gives the same reply but where f32 and f64 roundings decide a near tie apart).
    ///
    /// Errors: [`Error::Input`] for an empty prompt, `max_tokens` of 0, bad sampling
    /// parameters, a prompt that leaves no room in the cache for one token, or non-finite
    /// logits (corrupt weights); GPU errors.
    pub async fn generate(
        &self,
        ctx: &Context,
        cache: &mut KvCache,
        prompt: &[u32],
        options: &GenerateOptions,
        mut on_token: impl FnMut(&Token) -> bool,
    ) -> Result<Stats> {
        if prompt.is_empty() {
            return Err(Error::Input("the prompt is empty".into()));
        }
        if options.max_tokens == 0 {
            return Err(Error::Input("max tokens must be at least 1".into()));
        }
        let mut sampler = Sampler::new(options.sampling)?;
        let room = cache.capacity().saturating_sub(cache.len());
        if prompt.len() >= room {
            return Err(Error::Input(format!(
                "a prompt of {} tokens leaves no room to generate in a context of {} ({} used)",
                prompt.len(),
                cache.capacity(),
                cache.len()
            )));
        }
        let start = Instant::now();
        let mut seen: Vec<u32> = prompt.to_vec();
        let mut stream = self.tokenizer.tokenizer.decode_stream(true);
        // Without logits for the caller every step's token is picked on the GPU (greedy's
        // argmax, or the sampler: penalty, temperature, top-k, top-p and the draw) and feeds
        // the next step directly, so the host records step t + 1 while the GPU runs step t and
        // only waits for the 4 bytes of t's id (a step recorded past the end is dropped from
        // the cache). With logits for the caller, they are read back and picked on the host.
        let on_gpu = options.top_logits == 0;
        let mut gpu_pick = if sampler.sampling().is_greedy() {
            GpuPick::Argmax
        } else {
            let s = *sampler.sampling();
            let spec = ridge_kernels::sample::SampleSpec {
                temperature: s.temperature,
                top_k: s.top_k,
                top_p: s.top_p,
                repetition_penalty: s.repetition_penalty,
                seed: s.seed,
            };
            GpuPick::Sample {
                sampler: Box::new(ridge_kernels::sample::Sampler::new(
                    ctx,
                    self.model.config().vocab,
                    spec,
                    prompt,
                )?),
                step: 0,
            }
        };
        let fwd = self.model.forward(ctx, cache, prompt, false)?;
        let mut next = if on_gpu {
            Next::Id(self.pick_on_gpu(ctx, &fwd.logits, &mut gpu_pick)?)
        } else {
            Next::Logits(fwd.logits)
        };
        let mut first_ms = 0.0;
        let mut generated = 0;
        let finish = loop {
            // Not before the first id is on the host: a step recorded ahead of it would run
            // inside the time to first token, and leave the decode's clock one step short.
            let room = generated > 0
                && generated + 1 < options.max_tokens
                && cache.len() < cache.capacity();
            let ahead = match (&next, room) {
                (Next::Id(p), true) => {
                    let fwd = self.model.forward_ids(ctx, cache, &p.ids, false)?;
                    Some(self.pick_on_gpu(ctx, &fwd.logits, &mut gpu_pick)?)
                }
                _ => None,
            };
            let (id, top_logits) = match next {
                Next::Id(p) => (self.read_id(ctx, p).await?, Vec::new()),
                Next::Logits(logits) => {
                    self.pick(ctx, &logits, &mut sampler, &seen, options)
                        .await?
                }
            };
            if generated == 0 {
                first_ms = start.elapsed().as_secs_f64() * 1e3;
            }
            generated += 1;
            seen.push(id);
            let text = stream
                .step(id)
                .map_err(|e| Error::Tokenizer {
                    path: self.path.clone(),
                    message: e.to_string(),
                })?
                .unwrap_or_default();
            let finish = if !on_token(&Token {
                id,
                text,
                top_logits,
            }) {
                Some(Finish::Stopped)
            } else if options.stop_at_eos && self.tokenizer.end_of_generation.contains(&id) {
                Some(Finish::Eos)
            } else if generated == options.max_tokens {
                Some(Finish::Length)
            } else if ahead.is_none() && cache.len() >= cache.capacity() {
                // The next token needs this one's step, and the cache has no position left
                // for it. (A step recorded ahead already ran this token: its pick is the
                // next token, which needs no position, so a full cache still gives one more.)
                Some(Finish::Context)
            } else {
                None
            };
            if let Some(finish) = finish {
                if ahead.is_some() {
                    // The step recorded ahead ran this token, which is not kept.
                    cache.truncate(cache.len() - 1);
                }
                break finish;
            }
            next = match ahead {
                Some(p) => Next::Id(p),
                None => {
                    let logits = self.model.forward(ctx, cache, &[id], false)?.logits;
                    if on_gpu {
                        Next::Id(self.pick_on_gpu(ctx, &logits, &mut gpu_pick)?)
                    } else {
                        Next::Logits(logits)
                    }
                }
            };
        };
        let decode_ms = start.elapsed().as_secs_f64() * 1e3 - first_ms;
        Ok(Stats {
            prompt_tokens: prompt.len(),
            generated,
            time_to_first_token_ms: first_ms,
            prefill_tokens_per_s: prompt.len() as f64 / (first_ms * 1e-3),
            decode_tokens_per_s: (generated > 1 && decode_ms > 0.0)
                .then(|| (generated - 1) as f64 / (decode_ms * 1e-3)),
            finish,
        })
    }

    /// The token of `logits` picked on the GPU into a u32 tensor, its read-back started.
    fn pick_on_gpu(&self, ctx: &Context, logits: &Tensor, pick: &mut GpuPick) -> Result<PendingId> {
        let ids = Tensor::empty(ctx, &[1], DType::U32)?;
        match pick {
            GpuPick::Argmax => ridge_kernels::argmax::argmax(ctx, logits, &ids)?,
            GpuPick::Sample { sampler, step } => {
                sampler.sample(ctx, logits, *step, &ids)?;
                *step += 1;
            }
        }
        let read = ids.read_back(ctx)?;
        Ok(PendingId { ids, read })
    }

    /// The id of a pending pick, once on the host.
    ///
    /// Errors: [`Error::Input`] when the logits held NaN or an infinity.
    async fn read_id(&self, ctx: &Context, p: PendingId) -> Result<u32> {
        let id = p.read.to_u32(ctx).await?[0];
        if id == ridge_kernels::argmax::NON_FINITE {
            return Err(Error::Input(
                "the model produced non-finite logits: the weights may be corrupt".into(),
            ));
        }
        Ok(id)
    }

    /// The next token from `logits` read back: the sampler's pick and the largest logits.
    async fn pick(
        &self,
        ctx: &Context,
        logits: &Tensor,
        sampler: &mut Sampler,
        seen: &[u32],
        options: &GenerateOptions,
    ) -> Result<(u32, Vec<(u32, f32)>)> {
        let mut values = logits.to_f32(ctx).await?;
        let top = top_k(&values, options.top_logits);
        let id = sampler.pick(&mut values, seen)?;
        Ok((id, top))
    }
}

/// A conversation: its KV cache and the ids whose keys and values it holds. Each turn's
/// [`Session::reply`] takes the whole conversation's ids and prefills only what differs from
/// what the cache already holds (the previous turns stay cached), as chat front ends do.
pub struct Session {
    cache: KvCache,
    ids: Vec<u32>,
}

impl Session {
    /// A session over `cache` (emptied).
    pub fn new(mut cache: KvCache) -> Self {
        cache.clear();
        Self {
            cache,
            ids: Vec::new(),
        }
    }

    /// Positions the conversation may fill.
    pub fn capacity(&self) -> usize {
        self.cache.capacity()
    }

    /// Positions held (the conversation so far, as run through the model).
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    /// Forgets the conversation (the buffers are kept).
    pub fn clear(&mut self) {
        self.cache.clear();
        self.ids.clear();
    }

    /// Replies to `conversation` (all of its ids, the chat template applied): the cache
    /// keeps its longest common prefix with what it holds (at least the last id is run, for
    /// logits to pick from), the rest is prefilled, then tokens stream to `on_token` as in
    /// [`TextGenerator::generate`]. Returns the timings (prompt tokens: those prefilled) and
    /// the reply's ids.
    ///
    /// Errors: [`Error::Input`] when the conversation leaves no room for a reply in the
    /// cache; as [`TextGenerator::generate`].
    pub async fn reply(
        &mut self,
        ctx: &Context,
        model: &TextGenerator,
        conversation: &[u32],
        options: &GenerateOptions,
        mut on_token: impl FnMut(&Token) -> bool,
    ) -> Result<(Stats, Vec<u32>)> {
        if conversation.is_empty() {
            return Err(Error::Input("the prompt is empty".into()));
        }
        if conversation.len() >= self.capacity() {
            return Err(Error::Input(format!(
                "the conversation needs {} positions with a reply; this session holds {}",
                conversation.len() + 1,
                self.capacity()
            )));
        }
        let common = self
            .ids
            .iter()
            .zip(conversation)
            .take_while(|(a, b)| a == b)
            .count();
        let keep = common.min(conversation.len() - 1);
        self.cache.truncate(keep);
        self.ids.truncate(keep);
        let mut reply = Vec::new();
        let result = model
            .generate(ctx, &mut self.cache, &conversation[keep..], options, |t| {
                reply.push(t.id);
                on_token(t)
            })
            .await;
        // Whatever ran is in the cache, also when generation failed half-way.
        self.ids.extend_from_slice(&conversation[keep..]);
        self.ids.extend_from_slice(&reply);
        self.ids.truncate(self.cache.len());
        Ok((result?, reply))
    }
}
