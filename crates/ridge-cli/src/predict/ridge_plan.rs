//! `ridge predict --model DECODER --report FILE`: the dispatches Ridge itself would launch for
//! the decoder ([`ridge_nn::llama::DecoderPlan`]: its fused kernels, in order, with their
//! FLOPs and bytes) priced by the terms fitted on a `ridge bench` report of the adapter that
//! will run it (`ridge_model::calibrate`), beside the roofline of the report's measured
//! ceilings: time to first token, decode tokens/s and per-op times. No GPU needed; the plan
//! is the one the GPU tests hold against a profile's dispatches, name by name.

use std::path::Path;
use std::process::ExitCode;

use ridge_core::DType;
use ridge_kernels::quant::QuantFormat;
use ridge_model::calibrate::Calibrated;
use ridge_model::decoder::{DecoderShape, Quant};
use ridge_nn::llama::{DecoderPlan, LlamaConfig, PlannedOp, price_ops};

use super::time;

/// The plan of `model` (a GGUF file's formats, or a preset or config.json in `quant`, Q4_0
/// when not given) in `dtype`, with tensor cores where the report measured them, products
/// rounding `x` to 8 bits where its adapter does, and the fused decode attention block where
/// it timed that kernel.
///
/// Errors: a GGUF Ridge cannot run (its message names the tensor), a format Ridge's kernels
/// do not run.
fn plan(
    shape: &DecoderShape,
    gguf: Option<&Path>,
    quant: Option<Quant>,
    dtype: DType,
    cal: &Calibrated,
) -> Result<DecoderPlan, Box<dyn std::error::Error>> {
    let plan = match gguf {
        Some(path) => {
            let name = path.display();
            let file = ridge_nn::file::FileBytes::open(path).map_err(|e| e.to_string())?;
            let g = ridge_nn::gguf::Gguf::parse(file).map_err(|e| format!("{name}: {e}"))?;
            DecoderPlan::from_gguf(&g, dtype).map_err(|e| format!("{name}: {e}"))?
        }
        None => {
            let quant = quant.unwrap_or(Quant::Uniform(
                ridge_model::decoder::formats::WeightFormat::Q4_0,
            ));
            let format = QuantFormat::from_name(quant.name()).ok_or_else(|| {
                format!(
                    "--quant {}: Ridge's kernels run {}; --report prices Ridge's own plan",
                    quant.name(),
                    DecoderPlan::formats_run()
                )
            })?;
            DecoderPlan::uniform(LlamaConfig::from_shape(shape), format, dtype)
        }
    };
    let tensor_cores = cal.report.measured.tensor_tflops.is_some()
        && ridge_kernels::KvAttention::tensor_cores_shape(dtype, plan.config.head_dim);
    // The fused attention block where a decoder chooses it and the report timed its kind
    // (an older report's build ran the block's three dispatches); past 512 keys it is priced
    // as `decode_attention_split`, by the roofline where the report lacks that kind.
    let storage = if dtype == DType::F16 { "f16" } else { "f32" };
    let fused = ridge_kernels::DecodeAttention::chosen();
    Ok(DecoderPlan {
        tensor_cores,
        fused_attention: fused && cal.fits_kind("decode_attention", storage),
        matvec: ridge_kernels::qmatmul::MatvecRule::of_report(&cal.report.measured),
        ..plan
    })
}

/// One op group of a phase: name, dispatches, roofline seconds, calibrated seconds, every
/// kind fitted.
struct Group {
    /// The kind it is priced as where that specializes the op's name (`qmatvec_rows`,
    /// `rms_qmatvec_int8`), else the op's name.
    name: &'static str,
    count: usize,
    roofline_s: f64,
    calibrated_s: f64,
    fitted: bool,
    /// Priced inside the op before it (a merge pass inside its split kernel's kind).
    folded: bool,
}

/// A phase's ops priced: their groups in first-seen order, and the totals.
struct Priced {
    groups: Vec<Group>,
    dispatches: usize,
    roofline_s: f64,
    calibrated_s: f64,
}

/// What a dispatch of a pipelined decode saves against a lone timestamped one, seconds: the
/// report's lone dispatch overhead less its stream floor (0 where it lacks either). Both the
/// roofline and the fitted terms carry the lone overhead (`ridge_model::calibrate`). A decode
/// step is recorded while the previous one runs, so the GPU meets its dispatches as one
/// stream; a prompt's forward is recorded while it runs, its early dispatches waiting for
/// the host, and is priced as lone dispatches (on the H200 that matched the f16 prompts'
/// time to first token within 4 %; the stream floor priced them 25 % fast).
fn stream_saving_s(cal: &Calibrated) -> f64 {
    let m = &cal.report.measured;
    match (m.dispatch_overhead_us, m.stream_dispatch_us) {
        (Some(lone), Some(stream)) => (lone - stream).max(0.0) * 1e-6,
        _ => 0.0,
    }
}

/// `ops` priced by `cal`'s terms for `dtype` storage ([`price_ops`]), as a pipelined stream
/// or not.
fn price(ops: &[PlannedOp], cal: &Calibrated, dtype: &str, stream: bool) -> Priced {
    let f16 = dtype == "f16";
    let saving = if stream { stream_saving_s(cal) } else { 0.0 };
    let roof = |kind: &str| cal.report.measured.roof_for(kind, f16).0;
    let prices = price_ops(ops, cal, dtype, roof);
    let mut groups: Vec<Group> = Vec::new();
    for (op, p) in ops.iter().zip(prices) {
        let roofline_s = roof(op.kind()).predict(&op.cost).seconds - saving;
        // A dispatch folded into the one before saves nothing of its own.
        let calibrated_s = if p.folded { 0.0 } else { p.seconds - saving };
        let (fitted, folded) = (p.fitted, p.folded);
        let name = if op.kind().starts_with(op.name) {
            op.kind()
        } else {
            op.name
        };
        match groups.iter_mut().find(|g| g.name == name) {
            Some(g) => {
                g.count += 1;
                g.roofline_s += roofline_s;
                g.calibrated_s += calibrated_s;
                g.fitted &= fitted;
                g.folded &= folded;
            }
            None => groups.push(Group {
                name,
                count: 1,
                roofline_s,
                calibrated_s,
                fitted,
                folded,
            }),
        }
    }
    Priced {
        dispatches: ops.len(),
        roofline_s: groups.iter().map(|g| g.roofline_s).sum(),
        calibrated_s: groups.iter().map(|g| g.calibrated_s).sum(),
        groups,
    }
}

/// Prints (or writes as JSON) the calibrated prediction of Ridge's plan for `shape`.
///
/// Errors: as [`plan`]; `--batch` other than 1 (Ridge's decoder runs one sequence); a
/// context past the model's.
pub fn run(
    args: &super::Args,
    shape: &DecoderShape,
    gguf: Option<&Path>,
    report: &Path,
) -> crate::CliResult {
    if args.batch.is_some_and(|b| b != 1) {
        return Err("--report prices Ridge's decoder, which runs one sequence: --batch 1".into());
    }
    let (prompt, generate) = (args.prompt(), args.generate());
    // Checked: a prompt near u64::MAX wrapped past the context and was priced (2026-12-07).
    if prompt
        .checked_add(generate)
        .is_none_or(|end| end > shape.context)
    {
        return Err(format!(
            "--prompt {prompt} + --generate {generate} is longer than {}'s {} positions",
            shape.name, shape.context
        )
        .into());
    }
    if gguf.is_some() && args.quant.is_some() {
        return Err("--quant applies to presets and config.json; a GGUF file's tensors have their own types".into());
    }
    let cal = super::load_report(report, &args.dtype)?;
    let dtype = if args.dtype == "f16" {
        DType::F16
    } else {
        DType::F32
    };
    let plan = plan(shape, gguf, args.quant, dtype, &cal)?;
    let prefill = price(&plan.ops(prompt, 0), &cal, &args.dtype, false);
    // Every decode step from depth `prompt` on, each priced at its own depth.
    let steps: Vec<Priced> = (0..generate)
        .map(|i| price(&plan.ops(1, prompt + i), &cal, &args.dtype, true))
        .collect();
    let decode_s: f64 = steps.iter().map(|s| s.calibrated_s).sum();
    let decode_roofline_s: f64 = steps.iter().map(|s| s.roofline_s).sum();
    let middle = &steps[generate / 2];
    let all_fitted = |p: &Priced| p.groups.iter().all(|g| g.fitted);
    let fitted = all_fitted(&prefill) && steps.iter().all(all_fitted);

    let formats = {
        let l = &plan.layers[0];
        let uniform = plan.layers.iter().all(|x| x == l);
        format!(
            "Q/K/V {}, O {}, gate/up {}, down {}{}, embedding {}, output {}",
            l.qkv,
            l.out,
            l.gate_up,
            l.down,
            if uniform {
                ""
            } else {
                " (layer 0; others differ)"
            },
            plan.embed,
            plan.output
        )
    };
    let adapter = &cal.report.adapter;
    if args.json {
        let groups = |p: &Priced| {
            p.groups
                .iter()
                .map(|g| {
                    serde_json::json!({
                        "name": g.name, "dispatches": g.count, "roofline_seconds": g.roofline_s,
                        "calibrated_seconds": g.calibrated_s, "fitted": g.fitted,
                        "priced_with_the_op_before": g.folded,
                    })
                })
                .collect::<Vec<_>>()
        };
        let doc = serde_json::json!({
            "model": shape, "adapter": adapter, "report": report, "dtype": args.dtype,
            "tensor_cores": plan.tensor_cores, "formats": formats,
            "int8_storage_bytes": plan.matvec.int8_storage,
            "prompt": prompt, "generate": generate,
            "prefill_tokens_per_s": prompt as f64 / prefill.calibrated_s,
            "decode_tokens_per_s": generate as f64 / decode_s,
            "time_to_first_token_s": prefill.calibrated_s,
            "every_kind_fitted": fitted,
            "stream_saving_per_dispatch_s": stream_saving_s(&cal),
            "prefill": {
                "dispatches": prefill.dispatches, "calibrated_seconds": prefill.calibrated_s,
                "roofline_seconds": prefill.roofline_s, "ops": groups(&prefill),
            },
            "decode": {
                "seconds": decode_s, "roofline_seconds": decode_roofline_s,
                "seconds_per_token": decode_s / generate as f64,
                "middle_step": {
                    "depth": prompt + generate / 2, "dispatches": middle.dispatches,
                    "calibrated_seconds": middle.calibrated_s,
                    "roofline_seconds": middle.roofline_s, "ops": groups(middle),
                },
            },
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} on Ridge's kernels, {} activations{}{}: {formats}",
        shape.name,
        args.dtype,
        if plan.tensor_cores {
            ", prompts on the tensor cores"
        } else {
            ""
        },
        if plan.matvec.int8_storage.is_some() {
            ", one token's products from K = 2048 on x rounded to 8 bits (the `_int8` kinds)"
        } else {
            ""
        }
    );
    println!(
        "priced by the terms fitted on {} ({adapter}; `~`: a kind its sweep lacks, priced by the roofline of its measured ceilings)",
        report.display()
    );
    // A prompt's products or attention missing from the sweep are priced by the roofline,
    // which runs 4–15× fast on CPU drivers (benches/NOTES.md, 2026-12-05): said, not only `~`.
    let unswept: Vec<&str> = prefill
        .groups
        .iter()
        .filter(|g| !g.fitted && (g.name.contains("qmat") || g.name.contains("attention")))
        .map(|g| g.name)
        .collect();
    if !unswept.is_empty() {
        println!(
            "not in this report's sweep, priced by their roofline (often several times fast): the prompt's {} (`ridge bench --op {}` fits them)",
            unswept.join(", "),
            unswept.join(",")
        );
    }
    if !middle.groups.iter().any(|g| g.fitted && !g.folded) {
        println!(
            "none of a decode step's kinds is in this report's sweep: each is priced by its roofline (`ridge bench --op {}` fits them)",
            ridge_kernels::sweep::DECODER_OPS.join(",")
        );
    }
    let m = &cal.report.measured;
    match (m.dispatch_overhead_us, m.stream_dispatch_us) {
        (Some(lone), Some(stream)) => println!(
            "a decode step's dispatches as a pipelined stream ({stream:.1} µs of floor each), a prompt's as lone ones ({lone:.1} µs): the report's measurements"
        ),
        _ => println!(
            "every dispatch priced as a lone one: the report lacks the stream floor (`ridge bench` measures it where it can)"
        ),
    }
    println!(
        "\n{:<8} {:>7} {:>11} {:>12} {:>14} {:>16}",
        "phase", "tokens", "dispatches", "calibrated", "tokens/s", "roofline tok/s"
    );
    println!(
        "{:<8} {prompt:>7} {:>11} {:>12} {:>14.0} {:>16.0}",
        "prefill",
        prefill.dispatches,
        time(prefill.calibrated_s),
        prompt as f64 / prefill.calibrated_s,
        prompt as f64 / prefill.roofline_s
    );
    println!(
        "{:<8} {generate:>7} {:>11} {:>12} {:>14.1} {:>16.1}",
        "decode",
        middle.dispatches,
        time(decode_s),
        generate as f64 / decode_s,
        generate as f64 / decode_roofline_s
    );
    println!(
        "time to first token {} (the prefill, its logits and argmax); a decode token {} ({} dispatches) at depth {}–{}{}",
        time(prefill.calibrated_s),
        time(decode_s / generate as f64),
        middle.dispatches,
        prompt,
        prompt + generate - 1,
        if fitted {
            ""
        } else {
            " (~ some kinds priced by the roofline)"
        }
    );
    let table = |title: String, p: &Priced| {
        println!(
            "\n{title}\n  {:<24} {:>10} {:>12} {:>13}",
            "op", "dispatches", "roofline", "calibrated"
        );
        for g in &p.groups {
            let calibrated = if g.folded {
                "with the split kernel".to_string()
            } else {
                format!(
                    "{:>12} {}",
                    time(g.calibrated_s),
                    if g.fitted { " " } else { "~" }
                )
            };
            println!(
                "  {:<24} {:>10} {:>12} {calibrated}",
                g.name,
                g.count,
                time(g.roofline_s),
            );
        }
    };
    table(format!("prefill of {prompt} tokens, per op:"), &prefill);
    table(
        format!(
            "one decode step at depth {}, per op:",
            prompt + generate / 2
        ),
        middle,
    );
    Ok(ExitCode::SUCCESS)
}
