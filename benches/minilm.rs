//! MiniLM throughput: sentences per second at batch 1 and batch 32, 128 tokens each, with
//! the per-op GPU time breakdown. Not a test; run with `cargo bench --bench minilm`
//! (`-- --batches 1,8` to choose). Uses the model in the cache (`cargo xtask fetch-model`),
//! or with `--random-weights` seeded random weights of the same configuration (for the GPU
//! machine, where the 90 MB weights cannot travel); `--f16` runs the opt-in f16 encoder.
//! First prints the time to the first embedding: context, weight upload, and the first
//! forward pass with its pipeline compilation (a second run finds the driver's pipeline
//! cache that the first saved, where the backend has one). Each op's GPU time stands next to
//! the roofline model's prediction for the same dispatches
//! (`ridge::model::transformer::encoder_ops`) from the ceilings measured on this adapter
//! (`ceilings::measure`; a tensor-core GEMM against the tensor cores' peak), and with
//! `--report FILE` (a `ridge bench --json` report of the same adapter) beside the calibrated
//! model's: the report's fitted per-kind terms, never fitted on this bench's runs.

mod common;

use common::calibrated::{self, Calibrated};

use std::time::Instant;

use ridge::core::{Context, DType, Profile, Tensor, profiler};
use ridge::kernels::{Gemm, MeanPool, ceilings};
use ridge::model::report::{Measured, tensor_core_op};
use ridge::model::transformer::{TransformerShape, encoder_ops_split};
use ridge::nn::weights::{WeightsFile, random_bert_safetensors};
use ridge::nn::{Batch, Bert, BertConfig, fetch};

/// Token ids of `len` tokens: [CLS] (101), the wordpieces of "the quick brown fox jumps over
/// the lazy dog" repeated, [SEP] (102) — ids of the all-MiniLM-L6-v2 vocabulary.
fn ids(len: usize) -> Vec<u32> {
    let words = [1996u32, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899];
    let body = words.iter().copied().cycle().take(len - 2);
    std::iter::once(101)
        .chain(body)
        .chain(std::iter::once(102))
        .collect()
}

fn load(ctx: &Context, random: bool, dtype: DType) -> Bert {
    let config = BertConfig::minilm_l6();
    let file = if random {
        WeightsFile::from_bytes(
            std::path::Path::new("random"),
            random_bert_safetensors(&config, 7),
        )
    } else {
        WeightsFile::open(&fetch::minilm_dir().join("model.safetensors"))
            .expect("model (run cargo xtask fetch-model)")
    };
    Bert::load(ctx, config, &mut file.tensors().expect("weights"), dtype).expect("upload")
}

/// Each op's measured GPU time in `profile` beside the model's prediction for MiniLM's
/// forward pass of `batch` × `seq` tokens (mean pooling, normalized) in `dtype`: the
/// roofline's, and with `cal` the report's fitted terms' (issue 26's end-to-end check).
fn breakdown(
    ctx: &Context,
    profile: &Profile,
    m: &Measured,
    dtype: DType,
    tensor_cores: bool,
    (batch, seq): (usize, usize),
    cal: Option<&Calibrated>,
) -> String {
    let f16 = dtype == DType::F16;
    let plan = encoder_ops_split(
        &TransformerShape::minilm_l6(),
        batch,
        seq,
        true,
        dtype.size(),
        &Gemm::planned_splits(ctx, dtype),
    );
    let ceilings = m.ceilings(f16);
    let gemm_ceilings = m.ceilings_for(f16, tensor_cores);
    let roof = |name: &str| {
        if tensor_core_op(name) {
            &gemm_ceilings
        } else {
            &ceilings
        }
    };
    let predicted = |name: &str| -> f64 {
        plan.iter()
            .filter(|op| op.name == name)
            .map(|op| roof(name).predict(&op.cost).seconds * 1e3)
            .sum()
    };
    let mut out = format!(
        "GPU time per op ({}) and the model's prediction (measured ceilings: {:.0} GB/s, {:.1} TFLOP/s{}){}:\n",
        profile.method,
        m.bandwidth_gbps,
        ceilings.peak_flops / 1e12,
        if tensor_cores {
            format!(
                ", GEMMs {:.0} TFLOP/s on tensor cores",
                gemm_ceilings.peak_flops / 1e12
            )
        } else {
            String::new()
        },
        if cal.is_some() {
            "; calibrated: the report's fitted terms (~ where its sweep lacks the kind: the roofline)"
        } else {
            ""
        }
    );
    let mut ops = profile.by_name();
    ops.sort_by(|a, b| b.2.unwrap_or(0.0).total_cmp(&a.2.unwrap_or(0.0)));
    let (mut measured_total, mut predicted_total) = (0.0, 0.0);
    let (mut calibrated_total, mut all_fitted) = (0.0, true);
    for (name, count, ms) in ops {
        let p = predicted(&name);
        predicted_total += p;
        measured_total += ms.unwrap_or(0.0);
        let column = cal.map_or(String::new(), |c| {
            let mine = plan.iter().filter(|op| op.name == name);
            let (t, fitted) = c.predict_all(mine, roof(&name));
            calibrated_total += t;
            all_fitted &= fitted;
            calibrated::cell(t, fitted, ms)
        });
        let (ms, ratio) = match ms {
            Some(ms) => (format!("{ms:.3}"), format!("{:.2}×", ms / p)),
            None => ("n/a".into(), String::new()),
        };
        out.push_str(&format!(
            "  {name:<15} {} {ms:>9} ms  predicted {p:>7.3} ms  {ratio:>6}{column}\n",
            profiler::dispatches(count)
        ));
    }
    out.push_str(&format!(
        "  {:<15} {} {measured_total:>9.3} ms  predicted {predicted_total:>7.3} ms  {:>5.2}×{}\n",
        "total",
        profiler::dispatches(profile.spans.len()),
        measured_total / predicted_total,
        if cal.is_some() {
            calibrated::cell(calibrated_total, all_fitted, Some(measured_total))
        } else {
            String::new()
        }
    ));
    if profile.spans.len() != plan.len() {
        out.push_str(
            "layer 0, dispatch by dispatch: not shown (the plan and the dispatches differ)\n",
        );
        return out;
    }
    out.push_str("layer 0, dispatch by dispatch (achieved rate from the model's FLOPs):\n");
    let first = |s: &str| s.starts_with("layer 0 ");
    for (span, op) in profile
        .spans
        .iter()
        .zip(&plan)
        .filter(|(s, _)| first(&s.scope))
    {
        let c = if tensor_core_op(&op.name) {
            &gemm_ceilings
        } else {
            &ceilings
        };
        let p = c.predict(&op.cost).seconds * 1e3;
        let (ms, rate) = match span.ms {
            Some(ms) => (
                format!("{ms:.4}"),
                format!("{:.0} GFLOP/s", op.cost.flops / ms / 1e6),
            ),
            None => ("n/a".into(), String::new()),
        };
        out.push_str(&format!(
            "  {:<15} {ms:>9} ms  predicted {p:>7.4} ms  {rate:>13}  {}\n",
            op.name, span.scope
        ));
    }
    out
}

fn main() {
    common::check_args(
        &["--random-weights", "--f16"],
        &["--batches", "--report"],
        "cargo bench --bench minilm [-- OPTIONS]\n\nMiniLM throughput at batch 1 and 32 (128 tokens each) and the GPU time per op against the roofline model's prediction.\n\n  --batches 1,32       batches to time\n  --random-weights     seeded random weights of MiniLM's shape (no download)\n  --f16                the opt-in f16 encoder\n  --report FILE        a `ridge bench --json` report of this adapter: each op also priced by its fitted terms",
    );
    let batches = common::list("--batches", &[1, 32]);
    let random = common::flag("--random-weights");
    let dtype = if common::flag("--f16") {
        DType::F16
    } else {
        DType::F32
    };
    let seq = 128;
    let calibrated = Calibrated::from_args(dtype);
    let start = Instant::now();
    let ctx = common::context();
    let context_ms = start.elapsed().as_secs_f64() * 1e3;
    let bert = load(&ctx, random, dtype);
    let loaded_ms = start.elapsed().as_secs_f64() * 1e3;
    let weights = if random {
        "random weights"
    } else {
        "real weights"
    };
    println!(
        "MiniLM on {} ({weights}, {dtype}), {seq} tokens per sentence",
        ctx.describe()
    );
    // The ceilings the predictions use, measured after the first embedding is timed.
    let mut measured: Option<Measured> = None;
    for (i, batch) in batches.into_iter().enumerate() {
        let first = i == 0;
        let input = Batch::new(&vec![ids(seq); batch], 0).expect("batch");
        // One forward, pooled and read back; returns the host's recording time (the
        // forward and the pooling recorded and submitted, before the read-back waits).
        // One forward and its pooling, recorded and submitted, not read back.
        let record = || {
            let encoded = bert.forward(&ctx, &input, false).expect("forward");
            let pool = MeanPool {
                batch,
                seq,
                hidden: 384,
                normalize: true,
            };
            let pooled = Tensor::empty(&ctx, &[batch, 384], dtype).expect("alloc");
            pool.run(&ctx, &encoded.last, &encoded.lengths, &pooled)
                .expect("pool");
            pooled
        };
        let run = || {
            let recording = Instant::now();
            let pooled = record();
            let recorded = recording.elapsed().as_secs_f64();
            pollster::block_on(pooled.to_f32(&ctx)).expect("read back");
            recorded
        };
        let before = Instant::now();
        run(); // compiles pipelines
        if first {
            let driver = match ctx.pipelines().driver() {
                Some(d) if d.loaded() => format!("loaded from {}", d.path().display()),
                Some(d) => format!("empty, saved to {} at exit", d.path().display()),
                None => "none on this backend".into(),
            };
            println!(
                "time to the first embedding (batch {batch}): {:.0} ms = context {context_ms:.0} ms + weights {:.0} ms + first forward {:.0} ms ({} pipelines compiled); driver pipeline cache: {driver}",
                start.elapsed().as_secs_f64() * 1e3,
                loaded_ms - context_ms,
                before.elapsed().as_secs_f64() * 1e3,
                ctx.pipelines().compiled(),
            );
        }
        let repeats = if ctx.is_cpu_driver() { 1 } else { 20 };
        let (mut times, mut recording): (Vec<f64>, Vec<f64>) = (0..repeats)
            .map(|_| {
                let start = Instant::now();
                let recorded = run();
                (start.elapsed().as_secs_f64(), recorded)
            })
            .unzip();
        times.sort_by(f64::total_cmp);
        recording.sort_by(f64::total_cmp);
        let seconds = times[times.len() / 2];
        let recorded = recording[recording.len() / 2];
        // Streamed: batches back to back, each read back while the next one runs, as
        // `SentenceEmbedder::embed` goes through a long list.
        let start = Instant::now();
        let mut pending = None;
        for _ in 0..repeats {
            let next = record().read_back(&ctx).expect("read back");
            if let Some(read) = pending.replace(next) {
                pollster::block_on(read.to_f32(&ctx)).expect("read back");
            }
        }
        if let Some(read) = pending {
            pollster::block_on(read.to_f32(&ctx)).expect("read back");
        }
        let streamed = start.elapsed().as_secs_f64() / repeats as f64;
        // The GPU's own elapsed time per batch, idle gaps included: what PyTorch's CUDA
        // events around a forward measure (its inputs already on the GPU, no read-back).
        let profiles: Vec<_> = (0..repeats.min(5))
            .map(|_| {
                ctx.start_profiling();
                run();
                pollster::block_on(ctx.finish_profiling()).expect("profile")
            })
            .collect();
        let mut elapsed: Vec<f64> = profiles.iter().filter_map(|p| p.elapsed_ms()).collect();
        elapsed.sort_by(f64::total_cmp);
        println!(
            "\nbatch {batch}: {:.3} ms per batch (median of {repeats}), {:.2} sentences/s (wall clock, upload and read-back included)",
            seconds * 1e3,
            batch as f64 / seconds
        );
        println!(
            "batch {batch}: {:.3} ms per batch streamed ({repeats} batches, each read back while the next runs), {:.2} sentences/s",
            streamed * 1e3,
            batch as f64 / streamed
        );
        if let Some(ms) = elapsed.get(elapsed.len() / 2) {
            println!(
                "batch {batch}: {ms:.3} ms GPU elapsed, first dispatch to last (median of {}), {:.2} sentences/s (as CUDA events time PyTorch)",
                elapsed.len(),
                batch as f64 * 1e3 / ms
            );
        }
        let last = &profiles[profiles.len() - 1];
        let dispatches = last.spans.len();
        println!(
            "batch {batch}: {:.3} ms host recording (median of {repeats}), {dispatches} dispatches, {:.1} µs per dispatch",
            recorded * 1e3,
            recorded * 1e6 / dispatches.max(1) as f64
        );
        let m = measured.get_or_insert_with(|| {
            let m = pollster::block_on(ceilings::measure(&ctx, 1 << 30, 5)).expect("ceilings");
            if let Some(c) = &calibrated {
                c.warn_if_foreign(m.bandwidth_gbps);
            }
            m
        });
        let tensor_cores = dtype == DType::F16 && ctx.has_coop_f16();
        print!(
            "{}",
            breakdown(
                &ctx,
                last,
                m,
                dtype,
                tensor_cores,
                (batch, seq),
                calibrated.as_ref()
            )
        );
    }
}
