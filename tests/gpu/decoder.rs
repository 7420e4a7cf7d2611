//! The Llama decoder on small random GGUF files: prefill and token-by-token decode agree,
//! and every kind of bad file or request is a clear error before any dispatch.

use std::path::Path;

use ridge::core::{Context, DType, Error, Result};
use ridge::kernels::DecodeAttention;
use ridge::kernels::quant::QuantFormat;
use ridge::nn::file::FileBytes;
use ridge::nn::gguf::{Gguf, Value, Writer};
use ridge::nn::llama::random::random_gguf;
use ridge::nn::{Llama, LlamaConfig};

use crate::harness::*;

fn tiny() -> LlamaConfig {
    LlamaConfig {
        layers: 2,
        hidden: 64,
        ffn: 96,
        heads: 4,
        kv_heads: 2,
        head_dim: 16,
        rope_base: 10_000.0,
        rms_eps: 1e-5,
        context: 80,
        vocab: 100,
    }
}

/// A shape whose decode steps take the fused attention block (head width a multiple of 32,
/// H = nh·dh) where the adapter runs it, with a context past one pass of the block (512
/// keys: its spans and their merge).
fn fusable() -> LlamaConfig {
    LlamaConfig {
        hidden: 128,
        head_dim: 32,
        context: 600,
        ..tiny()
    }
}

fn parse(bytes: Vec<u8>) -> Gguf {
    Gguf::parse(FileBytes::from_bytes(Path::new("tiny.gguf"), bytes)).expect("valid GGUF")
}

/// A model of `config` with seeded random `linear` weights and a Q8_0 embedding, loaded in
/// `dtype`.
fn random_model(
    ctx: &Context,
    config: &LlamaConfig,
    linear: QuantFormat,
    seed: u64,
    dtype: DType,
) -> Result<Llama> {
    Llama::load(
        ctx,
        &parse(random_gguf(config, linear, QuantFormat::Q8_0, seed)),
        dtype,
    )
    .map_err(nn)
}

/// The file rewritten: `meta` may change or drop each entry, `tensor` each tensor
/// (name, dims, ggml type id, data).
fn rewrite(
    bytes: &[u8],
    meta: impl Fn(&str, &Value) -> Option<Value>,
    tensor: impl Fn(&str, Vec<u64>, u32, Vec<u8>) -> Option<(String, Vec<u64>, u32, Vec<u8>)>,
) -> Vec<u8> {
    let g = parse(bytes.to_vec());
    let mut w = Writer::new();
    for (k, v) in g.metadata() {
        if let Some(v) = meta(k, v) {
            w = w.meta(k, v);
        }
    }
    for t in g.tensors() {
        if let Some((n, d, id, data)) =
            tensor(&t.name, t.dims.clone(), t.ggml_type.id, g.data(t).to_vec())
        {
            w = w.tensor(&n, &d, id, data);
        }
    }
    w.finish()
}

fn nn(e: ridge::nn::Error) -> Error {
    Error::invalid("decoder", e.to_string())
}

/// The last logits of `ids` run as one prompt, and as a prompt of the first `split` then one
/// token at a time; both caches must end holding every position.
fn whole_and_stepwise(
    ctx: &Context,
    model: &Llama,
    ids: &[u32],
    split: usize,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let logits = |cache: &mut ridge::nn::KvCache, ids: &[u32]| -> Result<Vec<f32>> {
        block(
            model
                .forward(ctx, cache, ids, false)
                .map_err(nn)?
                .logits
                .to_f32(ctx),
        )
    };
    let mut a = model.cache(ctx, ids.len() + 3).map_err(nn)?;
    let whole = logits(&mut a, ids)?;
    let mut b = model.cache(ctx, ids.len() + 3).map_err(nn)?;
    let mut last = logits(&mut b, &ids[..split])?;
    for &id in &ids[split..] {
        last = logits(&mut b, &[id])?;
    }
    if a.len() != ids.len() || b.len() != ids.len() {
        return Err(Error::invalid(
            "cache",
            format!("{} and {} positions, not {}", a.len(), b.len(), ids.len()),
        ));
    }
    Ok((whole, last))
}

#[test]
fn prefill_and_token_by_token_decode_agree() {
    on_every_adapter("decoder_prefill_decode", |ctx| {
        for (config, dtype) in [tiny(), fusable()]
            .into_iter()
            .flat_map(|c| dtypes(ctx).into_iter().map(move |d| (c.clone(), d)))
        {
            for format in QuantFormat::ALL {
                // The fused block wherever the adapter runs it (CPU drivers do not choose it).
                let model = DecodeAttention::forced(Some(true), || {
                    random_model(ctx, &config, format, 5, dtype)
                })?;
                let ids: Vec<u32> = (0..37).map(|i| (i * 7 + 3) % 100).collect();
                // All at once (the tiled product, one attention span) against a prefill of
                // 30, then one token at a time (the matrix-vector product, split attention).
                let (whole, last) = whole_and_stepwise(ctx, &model, &ids, 30)?;
                // The same sums in another order: f32 agrees to ~1e-5 of logits of size ~1,
                // f16 activations to ~1e-2.
                let tol = if dtype == DType::F16 { 3e-2 } else { 1e-4 };
                let what = format!("{format} {dtype} hidden {}", config.hidden);
                assert_close(&what, &last, &whole, |_| tol)?;
                if whole.iter().any(|v| !v.is_finite()) || whole.iter().all(|v| *v == whole[0]) {
                    return Err(Error::invalid("logits", "not finite, or all equal"));
                }
            }
        }
        Ok(())
    });
}

/// Past 512 keys the fused block splits its keys into spans and merges them: a prompt of 515
/// tokens, then 5 decode steps through the spans, against the same 520 tokens at once.
#[test]
fn fused_decode_in_spans_agrees_with_prefill() {
    on_every_adapter("decoder_fused_spans", |ctx| {
        for dtype in dtypes(ctx) {
            let model = DecodeAttention::forced(Some(true), || {
                random_model(ctx, &fusable(), QuantFormat::Q4_0, 11, dtype)
            })?;
            // Where the adapter runs the block (fusable(): 4 heads over 2 of 32), the step at
            // 515 must take its spans and their merge.
            let c = fusable();
            let block = DecodeAttention {
                hidden: c.hidden,
                heads: c.heads,
                kv_heads: c.kv_heads,
                head_dim: c.head_dim,
                pos: 515,
            };
            if !block.fits(ctx) {
                continue;
            }
            let plan = model.plan(1, 515);
            if !plan.iter().any(|o| o.name == "decode_attention_merge") {
                return Err(Error::invalid(
                    "plan",
                    "no merge pass for the block at 515 keys",
                ));
            }
            let ids: Vec<u32> = (0..520).map(|i| (i * 11 + 7) % 100).collect();
            let (whole, last) = whole_and_stepwise(ctx, &model, &ids, 515)?;
            // As prefill_and_token_by_token_decode_agree: the same sums in another order.
            let tol = if dtype == DType::F16 { 3e-2 } else { 1e-4 };
            assert_close(&format!("spans {dtype}"), &last, &whole, |_| tol)?;
        }
        Ok(())
    });
}

/// A prompt of 1,030 tokens into an empty cache runs the dense causal attention (grouped
/// KV heads as its batch); the same tokens as a 1,000-token prompt on the KV-cache kernel and
/// 30 decode steps must give the same last logits.
#[test]
fn long_prompts_take_the_dense_attention_and_agree_with_decode() {
    on_every_adapter("decoder_dense_prefill", |ctx| {
        let config = LlamaConfig {
            context: 1040,
            ..tiny()
        };
        let model = random_model(ctx, &config, QuantFormat::Q8_0, 9, DType::F32)?;
        let names =
            |t, pos0| -> Vec<&'static str> { model.plan(t, pos0).iter().map(|o| o.name).collect() };
        if !names(1030, 0).contains(&"attention") || names(1000, 0).contains(&"attention") {
            return Err(Error::invalid(
                "plan",
                "1,030 tokens should take the dense attention, 1,000 the KV-cache kernel",
            ));
        }
        let ids: Vec<u32> = (0..1030).map(|i| (i * 13 + 5) % 100).collect();
        let (whole, last) = whole_and_stepwise(ctx, &model, &ids, 1000)?;
        // As above: the same sums in another order.
        assert_close("dense prefill", &last, &whole, |_| 1e-4)
    });
}

fn load_err(ctx: &Context, bytes: Vec<u8>) -> String {
    match Llama::load(ctx, &parse(bytes), DType::F32) {
        Ok(_) => "loaded".into(),
        Err(e) => e.to_string(),
    }
}

fn expect(what: &str, got: String, needles: &[&str]) -> Result<()> {
    if needles.iter().all(|n| got.contains(n)) {
        Ok(())
    } else {
        Err(Error::invalid(
            what,
            format!("the error {got:?} does not name {needles:?}"),
        ))
    }
}

#[test]
fn bad_files_name_the_problem() {
    on_every_adapter("decoder_bad_files", |ctx| {
        let good = random_gguf(&tiny(), QuantFormat::Q4_1, QuantFormat::Q8_0, 1);
        let keep = |n: &str, d, id, data| Some((n.to_string(), d, id, data));
        let arch = rewrite(
            &good,
            |k, v| {
                Some(if k == "general.architecture" {
                    Value::String("gpt2".into())
                } else {
                    v.clone()
                })
            },
            keep,
        );
        expect(
            "architecture",
            load_err(ctx, arch),
            &["architecture \"gpt2\"", "llama"],
        )?;
        let tokens = Value::Array((0..100).map(|i| Value::String(format!("t{i}"))).collect());
        let vocab = rewrite(
            &good,
            |k, v| {
                Some(match k {
                    "llama.vocab_size" => Value::U32(10),
                    "general.name" => tokens.clone(),
                    _ => v.clone(),
                })
            },
            keep,
        );
        // general.name now holds the token list: move it where the tokenizer's belongs.
        let vocab = {
            let g = parse(vocab);
            let mut w = Writer::new();
            for (k, v) in g.metadata() {
                let k = if k == "general.name" {
                    "tokenizer.ggml.tokens"
                } else {
                    k
                };
                w = w.meta(k, v.clone());
            }
            for t in g.tensors() {
                w = w.tensor(&t.name, &t.dims, t.ggml_type.id, g.data(t).to_vec());
            }
            w.finish()
        };
        expect(
            "vocab_size",
            load_err(ctx, vocab),
            &["vocab_size = 10", "100 tokens"],
        )?;
        let wider = rewrite(
            &good,
            |k, v| {
                Some(if k == "llama.feed_forward_length" {
                    Value::U32(128)
                } else {
                    v.clone()
                })
            },
            keep,
        );
        expect(
            "shape",
            load_err(ctx, wider),
            &["blk.0.ffn_gate.weight", "[96, 64]", "[128, 64]"],
        )?;
        // A Q5_0 weight (ggml type 6: 22 bytes a block of 32).
        let q5 = rewrite(
            &good,
            |_, v| Some(v.clone()),
            |n, d, id, data| {
                if n == "blk.1.attn_output.weight" {
                    Some((n.to_string(), d, 6, vec![0; 64 * 2 * 22]))
                } else {
                    Some((n.to_string(), d, id, data))
                }
            },
        );
        expect(
            "type",
            load_err(ctx, q5),
            &["blk.1.attn_output.weight", "Q5_0", "Q4_0, Q4_1, Q8_0"],
        )?;
        // Each tensor the model needs, dropped in turn, is named as missing (the output
        // projection may be absent: the embedding is then tied to it). The last one loaded,
        // `output_norm.weight`, was once reported as 2⁶⁴ − 1 unused tensors.
        let names: Vec<String> = parse(good.clone())
            .tensors()
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| n != "output.weight")
            .collect();
        for name in &names {
            let missing = rewrite(
                &good,
                |_, v| Some(v.clone()),
                |n, d, id, data| (n != name).then(|| (n.to_string(), d, id, data)),
            );
            expect(
                "missing",
                load_err(ctx, missing),
                &["missing tensor", name.as_str()],
            )?;
        }
        let extra = rewrite(&good, |_, v| Some(v.clone()), keep);
        let extra = {
            let g = parse(extra);
            let mut w = Writer::new();
            for (k, v) in g.metadata() {
                w = w.meta(k, v.clone());
            }
            for t in g.tensors() {
                w = w.tensor(&t.name, &t.dims, t.ggml_type.id, g.data(t).to_vec());
            }
            w.tensor("rope_freqs.weight", &[8], 0, vec![0; 32]).finish()
        };
        expect(
            "unused",
            load_err(ctx, extra),
            &["does not use", "rope_freqs.weight"],
        )?;
        let nan = rewrite(
            &good,
            |_, v| Some(v.clone()),
            |n, d, id, mut data| {
                if n == "output_norm.weight" {
                    data[8..12].copy_from_slice(&f32::NAN.to_le_bytes());
                }
                Some((n.to_string(), d, id, data))
            },
        );
        expect(
            "non-finite",
            load_err(ctx, nan),
            &["output_norm.weight", "non-finite"],
        )?;
        Ok(())
    });
}

#[test]
fn requests_past_the_model_are_refused() {
    on_every_adapter("decoder_bad_requests", |ctx| {
        let model = random_model(ctx, &tiny(), QuantFormat::Q4_0, 2, DType::F32)?;
        let input = |r: ridge::nn::Result<_>| matches!(r, Err(ridge::nn::Error::Input(_)));
        let ok = |what: &str, bad: bool| {
            if bad {
                Ok(())
            } else {
                Err(Error::invalid(what, "accepted"))
            }
        };
        ok("a context of 0", input(model.cache(ctx, 0).map(|_| ())))?;
        ok(
            "a context past the model's",
            input(model.cache(ctx, 81).map(|_| ())),
        )?;
        let mut cache = model.cache(ctx, 8).map_err(nn)?;
        ok(
            "no ids",
            input(model.forward(ctx, &mut cache, &[], false).map(|_| ())),
        )?;
        ok(
            "an id past the vocabulary",
            input(model.forward(ctx, &mut cache, &[100], false).map(|_| ())),
        )?;
        ok(
            "more ids than the cache holds",
            input(model.forward(ctx, &mut cache, &[1; 9], false).map(|_| ())),
        )?;
        if !cache.is_empty() {
            return Err(Error::invalid(
                "cache",
                "a refused forward filled positions",
            ));
        }
        Ok(())
    });
}

/// The model's plan of dispatches (what the bench prices with the roofline) names exactly the
/// dispatches a forward and its argmax record, in order, for a prefill and a split decode.
/// A context of its own: a profile records every dispatch on its context, and other tests
/// run on the shared ones meanwhile.
#[test]
fn the_plan_lists_exactly_the_dispatches_a_forward_makes() {
    on_every_adapter_with(
        "decoder_plan",
        |_| Default::default(),
        |ctx| {
            // The fusable shape decodes with the fused attention block where the adapter runs
            // it (and must, on a Vulkan adapter: nine storage buffers a stage), chosen here.
            let fusable = DecodeAttention::forced(Some(true), || {
                random_model(ctx, &fusable(), QuantFormat::Q4_1, 3, DType::F32)
            })?;
            let fused = fusable
                .plan(1, 5)
                .iter()
                .any(|o| o.name == "decode_attention");
            let vulkan = ctx.adapter().get_info().backend == ridge::core::wgpu::Backend::Vulkan;
            if vulkan && !fused {
                return Err(Error::invalid("plan", "no fused attention block on Vulkan"));
            }
            let model = random_model(ctx, &tiny(), QuantFormat::Q4_1, 3, DType::F32)?;
            // The fusable model: 5 tokens, then one through the fused block; 520, then one
            // through the block's spans and their merge. The tiny one: 70 tokens at once (one
            // span), then one at depth 70 (two spans and the merge).
            for (model, steps, capacity) in [
                (&fusable, [5, 1], 80),
                (&fusable, [520, 1], 600),
                (&model, [70, 1], 80),
            ] {
                let mut cache = model.cache(ctx, capacity).map_err(nn)?;
                for tokens in steps {
                    let pos0 = cache.len();
                    let ids = vec![5u32; tokens];
                    ctx.start_profiling();
                    let fwd = model.forward(ctx, &mut cache, &ids, false).map_err(nn)?;
                    let id = ridge::core::Tensor::empty(ctx, &[1], DType::U32)?;
                    ridge::kernels::argmax::argmax(ctx, &fwd.logits, &id)?;
                    let profile = block(ctx.finish_profiling())?;
                    let got: Vec<&str> = profile.spans.iter().map(|s| s.name.as_str()).collect();
                    let want: Vec<&str> = model.plan(tokens, pos0).iter().map(|o| o.name).collect();
                    if got != want {
                        return Err(Error::invalid(
                            "plan",
                            format!("{tokens} tokens: ran {got:?}, planned {want:?}"),
                        ));
                    }
                }
            }
            // A vocabulary longer than a chunk: the argmax's two passes, as priced.
            let cols = 3 * ridge::kernels::argmax::CHUNK + 5;
            let logits = ridge::core::Tensor::from_slice(ctx, &vec![0.5f32; cols], &[1, cols])?;
            let id = ridge::core::Tensor::empty(ctx, &[1], DType::U32)?;
            ctx.start_profiling();
            ridge::kernels::argmax::argmax(ctx, &logits, &id)?;
            let profile = block(ctx.finish_profiling())?;
            let got: Vec<&str> = profile.spans.iter().map(|s| s.name.as_str()).collect();
            let want: Vec<&str> = ridge::kernels::argmax::dispatches(1, cols, DType::F32)
                .iter()
                .map(|d| d.0)
                .collect();
            if got != want || want != ["argmax", "argmax_merge"] {
                return Err(Error::invalid(
                    "plan",
                    format!("argmax of {cols}: ran {got:?}, planned {want:?}"),
                ));
            }
            Ok(())
        },
    );
}

/// A decode step's timeline: the profiled step is the plan's dispatches at the timeline's
/// depth, on one clock where the adapter has timestamps (elapsed at least the busy time, gaps
/// not negative); a step that fails once its profile started still ends that profile (left
/// running, it would time every later dispatch). A context of its own (a profile records
/// every dispatch on its context).
#[test]
fn a_decode_timeline_is_the_plan_and_ends_its_profile() {
    use ridge::nn::llama::DecodeTimeline;
    use ridge::nn::llama::timeline::greedy_step;
    on_every_adapter_with(
        "decoder_timeline",
        |_| Default::default(),
        |ctx| {
            let model = random_model(ctx, &tiny(), QuantFormat::Q4_1, 6, DType::F32)?;
            let mut cache = model.cache(ctx, 8).map_err(nn)?;
            let id = block(greedy_step(ctx, &model, &mut cache, &[3, 1, 4, 1, 5])).map_err(nn)?;
            let (t, _) = block(DecodeTimeline::measure(ctx, &model, &mut cache, id)).map_err(nn)?;
            let got: Vec<&str> = t.profile.spans.iter().map(|s| s.name.as_str()).collect();
            let want: Vec<&str> = t.plan.iter().map(|o| o.name).collect();
            let timed = t.ops.is_empty() || t.ops.len() == got.len();
            // The step's span on the GPU covers its longest dispatch and at most the sum of
            // its dispatches and gaps (equal where none overlaps).
            let longest = t.ops.iter().map(|o| o.ms).fold(0.0, f64::max);
            let sane = t.ops.iter().all(|o| o.gap_ms >= 0.0 && o.ms >= 0.0)
                && (t.ops.is_empty()
                    || t.elapsed_ms() >= longest
                        && t.elapsed_ms() <= t.busy_ms() + t.gaps_ms() + 1e-6);
            if t.depth != 6 || got != want || !timed || !sane || t.host_ms <= 0.0 {
                return Err(Error::invalid(
                    "timeline",
                    format!(
                        "depth {} (want 6), ran {got:?}, planned {want:?}, {} timed",
                        t.depth,
                        t.ops.len()
                    ),
                ));
            }
            // One free position: the unprofiled step fits, the profiled one does not.
            let failed = block(DecodeTimeline::measure(ctx, &model, &mut cache, id));
            if failed.is_ok() {
                return Err(Error::invalid("timeline", "a step past the cache ran"));
            }
            let x = ridge::core::Tensor::from_slice(ctx, &[1.0f32, 2.0], &[1, 2])?;
            let out = ridge::core::Tensor::empty(ctx, &[1], DType::U32)?;
            ridge::kernels::argmax::argmax(ctx, &x, &out)?;
            let left = block(ctx.finish_profiling())?;
            if !left.spans.is_empty() {
                return Err(Error::invalid(
                    "timeline",
                    format!(
                        "a failed step left its profile running ({} spans)",
                        left.spans.len()
                    ),
                ));
            }
            Ok(())
        },
    );
}

/// Dropping a model gives its buffers back: after `release_free_buffers`, loading and
/// dropping it again and again leaves the device's tensor memory where it started (a context
/// of its own, so that no other test's tensors count).
#[test]
fn dropped_models_give_their_memory_back() {
    on_every_adapter_with(
        "decoder_memory",
        |_| Default::default(),
        |ctx| {
            let file = random_gguf(&tiny(), QuantFormat::Q4_1, QuantFormat::Q8_0, 4);
            let baseline = ctx.allocated_bytes();
            let mut loaded = 0;
            for round in 0..4 {
                {
                    let model = Llama::load(ctx, &parse(file.clone()), DType::F32).map_err(nn)?;
                    let mut cache = model.cache(ctx, 16).map_err(nn)?;
                    model
                        .forward(ctx, &mut cache, &[1, 2, 3], false)
                        .map_err(nn)?;
                    ctx.wait()?;
                    loaded = loaded.max(ctx.allocated_bytes());
                }
                ctx.release_free_buffers();
                let after = ctx.allocated_bytes();
                if after != baseline {
                    return Err(Error::invalid(
                        "memory",
                        format!(
                            "round {round}: {after} bytes allocated after dropping, {baseline} before"
                        ),
                    ));
                }
            }
            if loaded <= baseline {
                return Err(Error::invalid("memory", "a loaded model allocated nothing"));
            }
            Ok(())
        },
    );
}
