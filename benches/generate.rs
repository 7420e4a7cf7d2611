//! SmolLM2-135M generation speed, the way llama-bench reports it: prefill tokens/s for
//! prompts of `--prompts` tokens (default 128 and 1024: llama-bench's pp128 and pp1024),
//! decode tokens/s at batch 1 after contexts of `--contexts` tokens (default 128 and 4096:
//! tg at depth; also the GPU's own pace, the steps queued up behind a blocker so that the
//! host's recording is not in the way), time to first token, dispatches per token, one
//! decode step's timeline (the host's recording, the GPU's time busy and idle between
//! dispatches, the longest gap, what bounds the step: `ridge_nn::llama::DecodeTimeline`) and
//! its GPU time per op beside the roofline model's prediction (ceilings measured on this
//! adapter). Not a test: `cargo bench --bench generate [-- --random-weights] [--f16] [--tokens 32]`.
//!
//! Uses the GGUF in the cache (`cargo xtask fetch-model`), or with `--random-weights` a file
//! of the same shape and formats (Q4_1 linear weights, Q8_0 embedding) with seeded random
//! weights, for the GPU machine, where the 98 MB file cannot travel; `--gguf FILE` runs a
//! file of the caller's (there, the random GGUF of `../shared/device/random_gguf.py` that
//! llama-bench runs in the same call). Greedy decoding: each
//! token is the GPU's argmax, read back (4 bytes) before the next step is recorded.
//!
//! `--report FILE` (a `ridge bench --json` report of the same adapter, with the decoder's ops
//! in its sweep) adds the calibrated per-op model's prediction (`ridge_model::calibrate`, its
//! terms fitted on that report's kernel runs, never on this bench's) beside the roofline's:
//! the end-to-end check of issue 26. Plan ops are swept kinds by name (the products with
//! their fused prologue and epilogues each a kind of its own), attention over the cache
//! `kv_attention` for one token and `kv_attention_prefill` for a prompt; ops the sweep does
//! not time keep the roofline.

mod common;

use common::calibrated::{self, Calibrated};

use std::path::Path;
use std::time::Instant;

use ridge::core::{Context, DType, Tensor, profiler};
use ridge::kernels::quant::QuantFormat;
use ridge::kernels::{argmax, ceilings, sample};
use ridge::model::Ceilings;
use ridge::nn::file::FileBytes;
use ridge::nn::gguf::Gguf;
use ridge::nn::llama::DecodeTimeline;
use ridge::nn::llama::random::{prompt_ids as ids, random_gguf, smollm2_like};
use ridge::nn::llama::timeline::greedy_step;
use ridge::nn::sampling::{Sampler, Sampling};
use ridge::nn::{KvCache, Llama, fetch};

fn load(ctx: &Context, random: bool, dtype: DType) -> Llama {
    let file = if let Some(path) = common::value("--gguf") {
        // A file of the caller's (on the GPU machine: the random GGUF llama.cpp runs too).
        FileBytes::open(Path::new(&path)).unwrap_or_else(|e| common::fail(&format!("--gguf: {e}")))
    } else if let Some(name) = common::value("--preset").filter(|_| random) {
        let shape = ridge::model::decoder::DecoderShape::preset(&name).unwrap_or_else(|| {
            let names: Vec<String> = ridge::model::decoder::DecoderShape::presets()
                .into_iter()
                .map(|p| p.name)
                .collect();
            common::fail(&format!(
                "--preset {name}: no such decoder preset (presets: {})",
                names.join(", ")
            ))
        });
        let config = ridge::nn::llama::LlamaConfig::from_shape(&shape);
        FileBytes::from_bytes(
            Path::new("random"),
            random_gguf(&config, QuantFormat::Q4_1, QuantFormat::Q8_0, 7),
        )
    } else if random {
        FileBytes::from_bytes(Path::new("random"), smollm2_like(7))
    } else {
        FileBytes::open(&fetch::smollm2_path()).expect("model (run cargo xtask fetch-model)")
    };
    let g = Gguf::parse(file).unwrap_or_else(|e| common::fail(&format!("the GGUF file: {e}")));
    // --fused-attention: a decode step's attention block as one dispatch where it fits (off by
    // default: slower on an H100, benches/NOTES.md, 2026-12-07).
    let fused = common::flag("--fused-attention").then_some(true);
    ridge::kernels::DecodeAttention::forced(fused, || Llama::load(ctx, &g, dtype))
        .unwrap_or_else(|e| common::fail(&format!("the model: {e}")))
}

/// One step: the forward of `ids`, the argmax on the GPU, the id read back.
fn step(ctx: &Context, model: &Llama, cache: &mut KvCache, ids: &[u32]) -> u32 {
    pollster::block_on(greedy_step(ctx, model, cache, ids)).expect("step")
}

/// `tokens` steps as `TextGenerator::generate` runs them: each step recorded from the previous
/// step's pick on the GPU (the argmax, or `sampler`'s) before that id is read back, so the
/// host records step t + 1 while the GPU runs step t. Returns the seconds.
fn pipelined(
    ctx: &Context,
    model: &Llama,
    cache: &mut KvCache,
    first: u32,
    tokens: usize,
    sampler: Option<&sample::Sampler>,
) -> f64 {
    let start = Instant::now();
    let mut ids = Tensor::from_slice(ctx, &[first], &[1]).expect("id");
    let mut read: Option<ridge::core::ReadBack> = None;
    for step in 0..tokens {
        let fwd = model.forward_ids(ctx, cache, &ids, false).expect("forward");
        let next = Tensor::empty(ctx, &[1], DType::U32).expect("id");
        match sampler {
            Some(s) => s.sample(ctx, &fwd.logits, step as u32, &next),
            None => argmax::argmax(ctx, &fwd.logits, &next),
        }
        .expect("pick");
        let next_read = next.read_back(ctx).expect("read back");
        if let Some(r) = read.replace(next_read) {
            pollster::block_on(r.to_u32(ctx)).expect("read back");
        }
        ids = next;
    }
    if let Some(r) = read {
        pollster::block_on(r.to_u32(ctx)).expect("read back");
    }
    start.elapsed().as_secs_f64()
}

/// `tokens` sampled steps as `TextGenerator::generate` takes them with a temperature: each
/// step's logits read back and the token picked on the host (`Sampler`) before the next step
/// is recorded. Returns the seconds, and the seconds of them the picks took.
fn sampled(
    ctx: &Context,
    model: &Llama,
    cache: &mut KvCache,
    first: u32,
    tokens: usize,
) -> (f64, f64) {
    let mut sampler = Sampler::new(Sampling {
        temperature: 0.7,
        top_p: 0.9,
        repetition_penalty: 1.1,
        seed: 1,
        ..Sampling::greedy()
    })
    .expect("sampling");
    let mut seen = vec![first];
    let (start, mut picking) = (Instant::now(), 0.0);
    for _ in 0..tokens {
        let fwd = model
            .forward(ctx, cache, &seen[seen.len() - 1..], false)
            .expect("forward");
        let mut logits = pollster::block_on(fwd.logits.to_f32(ctx)).expect("read back");
        let pick = Instant::now();
        let id = sampler.pick(&mut logits, &seen).expect("pick");
        picking += pick.elapsed().as_secs_f64();
        seen.push(id);
    }
    (start.elapsed().as_secs_f64(), picking)
}

/// Greedy's argmax alone: `n` of `logits` queued behind a blocker in one submission, ms an
/// argmax (one or two dispatches: [`argmax::dispatches`]).
fn argmax_alone(ctx: &Context, logits: &Tensor, n: usize) -> f64 {
    let ids = Tensor::empty(ctx, &[1], DType::U32).expect("ids");
    let (ms, _) = ceilings::queued_gpu_ms(ctx, n as f64 * 0.02, || {
        for _ in 0..n {
            argmax::argmax(ctx, logits, &ids)?;
        }
        Ok(())
    })
    .expect("queued argmaxes");
    ms / n as f64
}

/// The GPU sampler's pick alone at `temperature` (top-p 0.9, penalty 1.1 over `seen`): `n`
/// picks of `logits` queued behind a blocker in one submission ([`ceilings::queued_gpu_ms`]),
/// ms a pick (three dispatches), and the candidates it sorts (tokens whose weight is at least 2^-12 of the
/// largest; past 1024, or not holding top-p's cut, the multisection's path).
fn pick_alone(
    ctx: &Context,
    logits: &Tensor,
    temperature: f32,
    seen: &[u32],
    n: usize,
) -> (f64, usize) {
    let spec = sample::SampleSpec {
        temperature,
        top_k: 0,
        top_p: 0.9,
        repetition_penalty: 1.1,
        seed: 1,
    };
    let sampler = sample::Sampler::new(ctx, logits.numel(), spec, seen).expect("sampler");
    let ids = Tensor::empty(ctx, &[1], DType::U32).expect("ids");
    sampler.sample(ctx, logits, 0, &ids).expect("pick");
    let values = pollster::block_on(logits.to_f32(ctx)).expect("read back");
    let max = values.iter().fold(f32::MIN, |m, &v| m.max(v));
    let candidates = values
        .iter()
        .filter(|&&v| ((v - max) / temperature).exp() as f64 >= sample::TAU)
        .count();
    let (ms, _) = ceilings::queued_gpu_ms(ctx, n as f64 * 0.05, || {
        for step in 0..n {
            sampler.sample(ctx, logits, step as u32, &ids)?;
        }
        Ok(())
    })
    .expect("queued picks");
    (ms / n as f64, candidates)
}

/// Decode with the host out of the way: `tokens` pipelined steps queued behind a blocker
/// ([`ceilings::queued_gpu_ms`]; `host_ms_a_token`: their recording time a token, measured
/// before). Returns (GPU ms a token, whether the recording finished in time).
fn gpu_bound(
    ctx: &Context,
    model: &Llama,
    cache: &mut KvCache,
    first: u32,
    tokens: usize,
    host_ms_a_token: f64,
) -> (f64, bool) {
    let (ms, in_time) = ceilings::queued_gpu_ms(ctx, tokens as f64 * host_ms_a_token, || {
        let mut ids = Tensor::from_slice(ctx, &[first], &[1])?;
        for _ in 0..tokens {
            let fwd = model.forward_ids(ctx, cache, &ids, false).expect("forward");
            let next = Tensor::empty(ctx, &[1], DType::U32)?;
            argmax::argmax(ctx, &fwd.logits, &next)?;
            // Submitted as the pipelined decode submits it (its read-back flushes): the same
            // submissions, so the same uniform slots and cached bind groups.
            ctx.flush();
            ids = next;
        }
        Ok(())
    })
    .expect("queued decode");
    (ms / tokens as f64, in_time)
}

/// `--help`: what the bench measures and takes.
const HELP: &str = "SmolLM2-135M generation speed (prefill tokens/s and time to first token, decode tokens/s at depth, \
per-op GPU time against the roofline's prediction).

cargo bench --bench generate -- [options]
  --random-weights       a GGUF of SmolLM2's shape and formats with seeded random weights (no download)
  --preset NAME          with --random-weights: another decoder's shape (`ridge predict`'s presets,
                         e.g. smollm2-1.7b, llama-3.2-1b), Q4_1 linear weights, Q8_0 embedding
  --gguf FILE            a GGUF file of the caller's instead of the cached real one
  --f16                  f16 activations and KV cache (tensor cores for prompts where present)
  --fused-attention      decode each layer's attention block as one dispatch where it fits
                         (`ridge::kernels::DecodeAttention`; off by default: slower on an H100)
  --prompts 128,1024     prompt lengths (prefill; the longest is profiled op by op)
  --contexts 128,4096    decode depths (one step at each is profiled)
  --tokens 32            tokens decoded at each depth (then one more step's timeline: the host's
                         recording, each dispatch on the GPU, the gaps, what bounds the step)
  --report FILE          a `ridge bench --json` report of this adapter: each op also predicted from its
                         fitted terms (calibrated; ~ marks ops its sweep lacks, priced by the roofline)";

fn main() {
    common::check_args(
        &["--random-weights", "--f16", "--fused-attention"],
        &[
            "--gguf",
            "--preset",
            "--prompts",
            "--contexts",
            "--tokens",
            "--report",
        ],
        HELP,
    );
    let random = common::flag("--random-weights");
    if common::value("--preset").is_some() && !random {
        common::fail("--preset takes --random-weights (a file's own shape is its shape)");
    }
    let dtype = if common::flag("--f16") {
        DType::F16
    } else {
        DType::F32
    };
    let prompts = common::list("--prompts", &[128, 1024]);
    let contexts = common::list("--contexts", &[128, 4096]);
    let tokens = common::list("--tokens", &[32])[0];
    let start = Instant::now();
    let ctx = common::context();
    let model = load(&ctx, random, dtype);
    let vocab = model.config().vocab;
    // Every position asked for must fit the model's context, checked before any run.
    let context = model.config().context;
    if let Some(p) = prompts.iter().find(|&&p| p + 1 > context) {
        common::fail(&format!(
            "--prompts {p}: the model runs at most {context} positions"
        ));
    }
    if let Some(c) = contexts.iter().find(|&&c| c + 2 * tokens + 2 > context) {
        common::fail(&format!(
            "--contexts {c} with --tokens {tokens} needs {} positions; the model runs at most {context}",
            c + 2 * tokens + 2
        ));
    }
    println!(
        "{} on {} ({}, {dtype} activations), weights {:.1} MB loaded in {:.2} s",
        common::value("--preset").unwrap_or_else(|| "SmolLM2-135M".into()),
        ctx.describe(),
        match common::value("--gguf") {
            Some(path) => path,
            None if random => "random weights".into(),
            None => "real weights".into(),
        },
        model.weight_bytes() as f64 / 1e6,
        start.elapsed().as_secs_f64()
    );
    let repeats = if ctx.is_cpu_driver() { 2 } else { 10 };

    let measured = pollster::block_on(ceilings::measure(&ctx, 1 << 28, 3)).expect("ceilings");
    let ceil = measured.ceilings(dtype == DType::F16);
    let calibrated = Calibrated::from_args(dtype);
    if let Some(c) = &calibrated {
        c.warn_if_foreign(measured.bandwidth_gbps);
    }
    let cal = calibrated.as_ref();

    // Prefill: time to first token = the prompt's forward + the argmax read back.
    for &p in &prompts {
        let prompt = ids(p, vocab);
        let mut cache = model.cache(&ctx, p + 1).expect("cache");
        let first = Instant::now();
        step(&ctx, &model, &mut cache, &prompt); // compiles pipelines
        let cold = first.elapsed().as_secs_f64() * 1e3;
        let mut times: Vec<f64> = (0..repeats)
            .map(|_| {
                cache.clear();
                let t = Instant::now();
                step(&ctx, &model, &mut cache, &prompt);
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let ms = times[times.len() / 2];
        println!(
            "pp{p}: {:.0} tokens/s, time to first token {ms:.2} ms (median of {repeats}; first run {cold:.0} ms with pipeline compilation)",
            p as f64 / (ms * 1e-3)
        );
        if Some(&p) == prompts.iter().max() {
            // The longest prompt once more, profiled: where prefill's time goes.
            cache.clear();
            ctx.start_profiling();
            step(&ctx, &model, &mut cache, &prompt);
            let profile = pollster::block_on(ctx.finish_profiling()).expect("profile");
            println!("  pp{p} profiled ({} dispatches):", profile.spans.len());
            op_table(
                &profile,
                &model.plan(p, 0),
                &ceil,
                measured.bandwidth_gbps,
                cal,
            );
        }
    }

    match measured.stream_dispatch_us {
        Some(us) => println!(
            "dispatch floor: {us:.2} µs a dispatch in a stream of dependent tiny ones, queued behind a blocker"
        ),
        None => println!(
            "dispatch floor: not measured (the host's recording of the stream outlasted its blocker)"
        ),
    }
    // Decode at depth: the cache filled by a prefill of `c` tokens, then `tokens` steps.
    for &c in &contexts {
        let mut cache = model.cache(&ctx, c + 2 * tokens + 2).expect("cache");
        let mut id = step(&ctx, &model, &mut cache, &ids(c, vocab));
        id = step(&ctx, &model, &mut cache, &[id]); // warm the decode pipelines
        let depth = cache.len();
        let s = pipelined(&ctx, &model, &mut cache, id, tokens, None);
        println!(
            "tg{tokens} at depth {c}: {:.1} tokens/s ({:.2} ms a token, wall clock: each step recorded while the previous one runs, its id read back)",
            tokens as f64 / s,
            s * 1e3 / tokens as f64
        );
        cache.truncate(depth);
        let (gpu_ms, in_time) = gpu_bound(
            &ctx,
            &model,
            &mut cache,
            id,
            tokens,
            s * 1e3 / tokens as f64,
        );
        println!(
            "  the GPU's own pace (steps queued behind a blocker, the host out of the way): {:.1} tokens/s ({gpu_ms:.3} ms a token{})",
            1e3 / gpu_ms,
            if in_time {
                ""
            } else {
                "; the host's recording outlasted the blocker: the time an upper bound, the rate a lower one"
            }
        );
        cache.truncate(depth);
        let t = Instant::now();
        for _ in 0..tokens {
            id = step(&ctx, &model, &mut cache, &[id]);
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "  one step at a time (each id read back before the next step is recorded): {:.1} tokens/s ({:.2} ms a token)",
            tokens as f64 / s,
            s * 1e3 / tokens as f64
        );
        cache.truncate(depth);
        let spec = sample::SampleSpec {
            temperature: 0.7,
            top_k: 0,
            top_p: 0.9,
            repetition_penalty: 1.1,
            seed: 1,
        };
        let sampler = sample::Sampler::new(&ctx, vocab, spec, &[id]).expect("sampler");
        pipelined(&ctx, &model, &mut cache, id, 1, Some(&sampler)); // compile its pipelines
        cache.truncate(depth);
        let s = pipelined(&ctx, &model, &mut cache, id, tokens, Some(&sampler));
        println!(
            "  sampled on the GPU (temperature 0.7, top-p 0.9, repetition penalty 1.1; pipelined as greedy, 3 more dispatches a token): {:.1} tokens/s ({:.2} ms a token)",
            tokens as f64 / s,
            s * 1e3 / tokens as f64
        );
        cache.truncate(depth);
        let logits = model
            .forward(&ctx, &mut cache, &[id], false)
            .expect("forward")
            .logits;
        println!(
            "  greedy's argmax alone (50 queued behind a blocker): {:.1} µs ({} dispatches)",
            argmax_alone(&ctx, &logits, 50) * 1e3,
            argmax::dispatches(1, logits.numel(), dtype).len()
        );
        for t in [0.7, 0.1] {
            let (ms, candidates) = pick_alone(&ctx, &logits, t, &[id], 50);
            println!(
                "  the GPU pick alone (50 queued behind a blocker), temperature {t}: {:.1} µs ({candidates} candidates{})",
                ms * 1e3,
                if candidates > sample::CAPACITY {
                    ": multisection"
                } else {
                    ""
                }
            );
        }
        cache.truncate(depth);
        let (sampled_s, pick_s) = sampled(&ctx, &model, &mut cache, id, tokens);
        println!(
            "  sampled on the host (the same, each step's logits read back and picked by `Sampler`): {:.1} tokens/s ({:.2} ms a token, the pick {:.3} ms of it)",
            tokens as f64 / sampled_s,
            sampled_s * 1e3 / tokens as f64,
            pick_s * 1e3 / tokens as f64
        );
        // One token's timeline: the host's recording (unprofiled), then each dispatch on
        // the GPU with the gaps between them.
        let (timeline, _) =
            pollster::block_on(DecodeTimeline::measure(&ctx, &model, &mut cache, id))
                .expect("timeline");
        let n = timeline.profile.spans.len();
        println!(
            "  one token at depth {} (after the steps above): {} ({:.1} per layer); host recording {:.2} ms ({:.1} µs a dispatch, unprofiled)",
            timeline.depth,
            profiler::dispatches(n),
            n as f64 / model.config().layers as f64,
            timeline.host_ms,
            timeline.host_ms * 1e3 / n.max(1) as f64,
        );
        if !timeline.ops.is_empty() {
            let (before, longest) = timeline.longest_gap().unwrap_or(("none", 0.0));
            println!(
                "  timeline (each dispatch timestamped in a pass of its own): GPU elapsed {:.3} ms = busy {:.3} + gaps {:.3} (longest {:.1} µs, before {before}){}",
                timeline.elapsed_ms(),
                timeline.busy_ms(),
                timeline.gaps_ms(),
                longest * 1e3,
                match timeline.bound() {
                    Some(bound) => format!(
                        "; recorded ahead of the GPU, the step is bound by the {bound}"
                    ),
                    None => "; the GPU waited for the host's profiled recording (its recording outlasted the blocker)".into(),
                }
            );
        }
        op_table(
            &timeline.profile,
            &timeline.plan,
            &ceil,
            measured.bandwidth_gbps,
            cal,
        );
    }
}

/// GPU time per op of `profile` (a forward) against the roofline's prediction for `plan`'s
/// ops, and the calibrated model's where a report was given.
fn op_table(
    profile: &ridge::core::Profile,
    plan: &[ridge::nn::llama::PlannedOp],
    ceil: &Ceilings,
    bandwidth_gbps: f64,
    cal: Option<&Calibrated>,
) {
    println!(
        "  GPU time per op ({}) and the roofline's prediction ({:.0} GB/s, {:.1} TFLOP/s measured), ratios measured ÷ predicted{}:",
        profile.method,
        bandwidth_gbps,
        ceil.peak_flops / 1e12,
        if cal.is_some() {
            "; calibrated: the report's fitted terms (~ where its sweep lacks the kind: the roofline)"
        } else {
            ""
        }
    );
    let mut ops = profile.by_name();
    ops.sort_by(|a, b| b.2.unwrap_or(0.0).total_cmp(&a.2.unwrap_or(0.0)));
    let prices = cal.map(|c| c.price_plan(plan, ceil));
    let (mut total, mut predicted_total, mut calibrated_total) = (0.0, 0.0, 0.0);
    let mut all_fitted = true;
    for (name, count, ms) in ops {
        let mine = || (0..plan.len()).filter(|&i| plan[i].name == name);
        let p: f64 = mine()
            .map(|i| ceil.predict(&plan[i].cost).seconds * 1e3)
            .sum();
        predicted_total += p;
        total += ms.unwrap_or(0.0);
        let (ms_text, ratio) = match ms {
            Some(ms) => (format!("{ms:.4}"), format!("{:.2}×", ms / p)),
            None => ("n/a".into(), String::new()),
        };
        let calibrated = prices.as_ref().map_or(String::new(), |prices| {
            if mine().all(|i| prices[i].folded) {
                // A decode step's merge pass: priced inside its split kernel's kind.
                return "  calibrated with the split kernel".into();
            }
            let sum: f64 = mine().map(|i| prices[i].seconds * 1e3).sum();
            let fitted = mine().all(|i| prices[i].fitted);
            calibrated_total += sum;
            all_fitted &= fitted;
            calibrated::cell(sum, fitted, ms)
        });
        println!(
            "    {name:<19} {} {ms_text:>9} ms  predicted {p:>8.4} ms  {ratio:>7}{calibrated}",
            profiler::dispatches(count)
        );
    }
    println!(
        "    {:<19} {} {total:>9.4} ms  predicted {predicted_total:>8.4} ms  {:>6.2}×{}",
        "total",
        profiler::dispatches(profile.spans.len()),
        total / predicted_total,
        if cal.is_some() {
            calibrated::cell(calibrated_total, all_fitted, Some(total))
        } else {
            String::new()
        }
    );
    if plan.len() != profile.spans.len() {
        println!(
            "    (the plan lists {} dispatches: it is out of date)",
            plan.len()
        );
    }
}
