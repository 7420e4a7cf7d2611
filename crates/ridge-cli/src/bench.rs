//! `ridge bench`: every kernel's measured time next to its roofline prediction.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::PossibleValuesParser;

use ridge_kernels::{bench, ceilings, sweep};
use ridge_model::calibrate::Calibration;
use ridge_model::report::{Accuracy, Row};

#[derive(clap::Args)]
pub struct Args {
    /// Sweep size: `quick` (default on CPU drivers: two or three sizes a kind, minutes),
    /// `medium` (every kind of `full`, with enough sizes to fit each kind's calibrated terms,
    /// at sizes a CPU driver runs: GEMM to 512³, prompts to 512 tokens; ~10 minutes on
    /// lavapipe with 2 cores) or `full` (GEMM to 4096³, prompts to 4096 tokens; default on GPUs).
    #[arg(long, value_parser = ["quick", "medium", "full"])]
    size: Option<String>,
    /// Only these ops (comma separated): gemm, layer_norm, rms_norm, softmax, gelu, add,
    /// transpose, nchw_to_nhwc, nhwc_to_nchw, attention, sparse_attention; the encoder's
    /// Linear layers as it launches them: linear (x·Wᵀ + b), linear_residual (the residual
    /// add fused), linear_gelu (GELU fused) (MiniLM's products, 128 to 4096 rows); and the
    /// decoder's kernels as its forward launches them: qmatvec, rms_qmatvec,
    /// rms_qmatvec_swiglu, rms_qmatvec_rope (decode), qmatmul, rms_qmatmul_swiglu,
    /// rms_qmatmul_rope (prompts), kv_attention (decode up to 512 keys), kv_attention_split
    /// (longer), kv_attention_prefill (prompts), attention_causal (prompts from 1024 tokens:
    /// dense) (SmolLM2-135M/360M/1.7B and Qwen2.5-0.5B widths, Q4_1 weights), and where the
    /// adapter rounds x to 8 bits for one-token products from K = 2048 (GPUs with packed dot
    /// products) those as kinds of their own: qmatvec_int8, rms_qmatvec_int8,
    /// rms_qmatvec_swiglu_int8, rms_qmatvec_rope_int8 (the full sweep adds Qwen2.5-1.5B,
    /// Llama-3.2-1B/3B and Llama-3-8B widths); and the products of short prompts (2 to 32
    /// tokens, which the matrix-vector kernel takes 8 rows a workgroup) as kinds of their
    /// own: qmatvec_rows, rms_qmatvec_swiglu_rows, rms_qmatvec_rope_rows; and greedy
    /// decoding's argmax over a row of logits (32,000 to 256,000 values); and on GPUs the
    /// opt-in fused decode attention block, decode_attention (up to 512 keys, one dispatch)
    /// and decode_attention_split (longer: its spans and their merge). The Linear and
    /// decoder kinds run in the full and medium sweeps, or when named here. Where the adapter
    /// has `shader-f16`, GEMMs and Linear layers run in f16 too, and in the full and medium
    /// sweeps or when named so do the norms, softmax, gelu, add and attention (the f16
    /// encoder's kinds).
    #[arg(long, value_delimiter = ',', value_parser = PossibleValuesParser::new(sweep::OPS))]
    op: Vec<String>,
    /// Timed launches per case (median reported; 1 to 1000).
    #[arg(long, default_value_t = 10, value_parser = crate::repeats, allow_negative_numbers = true)]
    repeats: usize,
    /// Write the JSON report (adapter fingerprint, ceilings, every case, accuracy) here;
    /// `-` prints it instead of the table.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// With --op and --json: write REPORT (a `ridge bench --json` report of this adapter)
    /// with the swept kinds' rows replaced by this sweep's, its ceilings and other kinds
    /// kept, each new row's roofline priced by its ceilings, and its accuracy and per-op
    /// terms computed again: for kinds swept again after their kernel changed. The sweep's
    /// own rows are measured in this machine's state of the moment; the report's other rows
    /// in theirs.
    #[arg(long, value_name = "REPORT", requires_all = ["op", "json"])]
    onto: Option<PathBuf>,
    /// Write the plot (SVG) here: a log-log roofline of GFLOP/s over arithmetic intensity
    /// against the measured and datasheet roofs (f32, f16, tensor cores), and for ops
    /// without FLOPs (layout conversions) GB/s over bytes moved against the copy's curve.
    /// Runs above their roof are drawn hollow, with a note saying why.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

fn ms(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| {
        if v >= 100.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.4}")
        }
    })
}

pub fn run(args: Args) -> crate::CliResult {
    let ctx = crate::context()?;
    let cpu = ctx.is_cpu_driver();
    let size = match args.size.as_deref().and_then(sweep::SweepSize::parse) {
        Some(size) => size,
        None if cpu => sweep::SweepSize::Quick,
        None => sweep::SweepSize::Full,
    };
    let quiet = args.json.as_deref() == Some(std::path::Path::new("-"));
    // The report to merge into is read before the sweep (a bad file fails now) and
    // before the output is opened (it may be the same file).
    let onto = match &args.onto {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let report = ridge_model::report::BenchReport::parse(&bytes)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let fp = ctx.fingerprint();
            let here = (&fp.name, &fp.backend, &fp.driver);
            if (&report.adapter, &report.backend, &report.driver) != here {
                return Err(format!(
                    "{}: a report of {} ({}, {}), not of this adapter, {} ({}, {})",
                    path.display(),
                    report.adapter,
                    report.backend,
                    report.driver,
                    here.0,
                    here.1,
                    here.2
                )
                .into());
            }
            Some((path, report))
        }
        None => None,
    };
    // The output files are opened before the sweep: a bad path fails now, not after it.
    let json_file = match &args.json {
        Some(path) if !quiet => Some(crate::create(path)?),
        _ => None,
    };
    if let Some(path) = &args.svg {
        crate::create(path)?;
    }
    let say = |s: String| {
        if !quiet {
            println!("{s}");
        }
    };
    say(format!(
        "ridge bench on {} ({} sweep, median of {} launch{}, the faster of two passes)",
        ctx.describe(),
        size.name(),
        args.repeats,
        if args.repeats == 1 { "" } else { "es" }
    ));

    let max_copy = if cpu { 64 << 20 } else { 1 << 30 };
    // On stderr, drawn only on a terminal: a full sweep on a CPU adapter takes tens of minutes.
    let bar = indicatif::ProgressBar::new_spinner()
        .with_message("measuring the ceilings (copy, FMA peaks, dispatch)");
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let m = pollster::block_on(ceilings::measure(&ctx, max_copy, args.repeats))?;
    bar.finish_and_clear();
    let measured_ceilings = m.ceilings(false);
    let spec = bench::spec(&ctx);
    say(format!(
        "measured ceilings: {:.1} GB/s copy, {:.3} TFLOP/s f32 FMA{}{}, {} µs GPU time per dispatch ({} µs in a stream of dependent ones, {} µs of host time); ridge point {:.2} FLOP/B",
        m.bandwidth_gbps,
        m.f32_tflops,
        m.f16_tflops
            .map_or(String::new(), |t| format!(", {t:.3} TFLOP/s f16")),
        m.tensor_tflops.map_or(String::new(), |t| format!(
            ", {t:.1} TFLOP/s f16 tensor cores (cooperative matrices)"
        )),
        m.dispatch_overhead_us
            .map_or("n/a".into(), |v| format!("{v:.1}")),
        m.stream_dispatch_us
            .map_or("n/a".into(), |v| format!("{v:.1}")),
        m.host_overhead_us
            .map_or("n/a".into(), |v| format!("{v:.1}")),
        measured_ceilings.ridge_point()
    ));
    say(format!(
        "  copy bandwidth by size (GB/s): {}",
        m.bandwidth_curve
            .iter()
            .map(|p| format!("{} KiB {:.1}", p.bytes >> 10, p.gbps))
            .collect::<Vec<_>>()
            .join(" · ")
    ));
    match &spec {
        Some(s) => say(format!(
            "spec ceilings ({}): {} GB/s, {} TFLOP/s f32, {} TFLOP/s f16 — {}",
            s.name, s.bandwidth_gbps, s.f32_tflops, s.f16_tflops, s.source
        )),
        None => say("spec ceilings: no row of the spec table matches this adapter".into()),
    }

    say(
        "\ntimes in ms: predicted from the spec sheet's and from the measured roofline, measured; \
         shapes: GEMM and products [M, N, K] (with RoPE [M, heads, KV heads, K]), norms and \
         softmax [rows, cols], element-wise [n], layouts the input's, attention [batch, heads, \
         tokens, head width], KV-cache attention [tokens, heads, KV heads, head width, position], \
         dense causal attention (attention_causal) [tokens, heads, KV heads, head width]"
            .to_string(),
    );
    say(format!(
        "{:<20} {:<20} {:<4} {:>10} {:>10} {:>8} {:>10} {:>10} {:>10} {:>8} {:<7} {:>6}",
        "op",
        "shape",
        "type",
        "FLOPs",
        "bytes",
        "FLOP/B",
        "pred spec",
        "pred meas",
        "measured",
        "meas/pred",
        "bound",
        "%roof"
    ));
    // Two passes, the faster kept (`ridge_kernels::bench::time_cases`: an idle-clock gap).
    let cases = sweep::cases(&ctx, size, &args.op);
    let bar = indicatif::ProgressBar::new(2 * cases.len() as u64).with_style(
        indicatif::ProgressStyle::with_template(
            "pass {prefix}/2 {msg:<32} [{bar:30}] {pos}/{len} runs, {elapsed}, about {eta} left",
        )
        .expect("template")
        .progress_chars("=> "),
    );
    let timed = pollster::block_on(bench::time_cases(
        &ctx,
        cases,
        args.repeats,
        2,
        |pass, case| {
            bar.set_prefix((pass + 1).to_string());
            bar.set_message(format!("{} {:?} {}", case.op, case.shape, case.dtype));
            bar.inc(1);
        },
    ))?;
    bar.finish_and_clear();
    let mut rows = Vec::new();
    for t in &timed {
        let row = bench::row(&ctx, t, &m, spec.as_ref());
        say(format!(
            "{:<20} {:<20} {:<4} {:>10.3e} {:>10.3e} {:>8.2} {:>10} {:>10} {:>10} {:>8} {:<7} {:>6}",
            row.op,
            format!("{:?}", row.shape),
            row.dtype,
            row.flops,
            row.bytes,
            row.intensity(),
            ms(row.predicted_spec_ms),
            ms(Some(row.predicted_measured_ms)),
            ms(row.measured_ms),
            row.measured_ms.map_or("n/a".into(), |t| format!(
                "{:.2}",
                t / row.predicted_measured_ms
            )),
            row.bound.to_string(),
            row.roofline_fraction
                .map_or("n/a".into(), |f| format!("{:.1}", 100.0 * f)),
        ));
        rows.push(row);
    }

    print_sparse_vs_dense(&rows, &say);
    let mut report = bench::report(&ctx, m, rows);
    if let Some((path, base)) = &onto {
        report = base
            .with_kinds_of(&report)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        say(format!(
            "\nmerged into {}: its other kinds' rows and its ceilings kept; the accuracy and terms below are the merged report's",
            path.display()
        ));
    }
    let fmt = |a: &Accuracy| {
        let f =
            |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.2} ({:.2}×)", 2f64.powf(v)));
        format!(
            "all {} · memory-bound {} · compute-bound {}",
            f(a.all),
            f(a.memory),
            f(a.compute)
        )
    };
    say("\nmodel accuracy, median |log2(measured ÷ predicted)| (goal for memory-bound with measured ceilings: ≤ 0.32, i.e. 1.25×):".to_string());
    say(format!(
        "  measured ceilings: {}",
        fmt(&report.accuracy_measured)
    ));
    say(format!(
        "  spec ceilings:     {}",
        fmt(&report.accuracy_spec)
    ));
    if let Some(c) = &report.calibration {
        print_calibration(c, &say);
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)?;
        match json_file {
            Some(mut file) => {
                use std::io::Write;
                file.write_all(text.as_bytes())
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                println!("report written to {}", path.display());
            }
            None => println!("{text}"),
        }
    }
    if let Some(path) = &args.svg {
        crate::plot::roofline_svg(&report, path).map_err(|e| format!("{}: {e}", path.display()))?;
        say(format!("roofline written to {}", path.display()));
    }
    Ok(ExitCode::SUCCESS)
}

/// The per-op terms fitted on this run and their errors (`ridge_model::calibrate`).
fn print_calibration(c: &Calibration, say: &dyn Fn(String)) {
    use ridge_model::calibrate::MIN_ROWS_FOR_LATENCY;
    const GOAL: f64 = 1.15;
    say(format!(
        "\ncalibrated per-op model, fitted on this run: t = {:.1} µs dispatch + fixed cost + work ÷ (roof × efficiency) + depth × time per step + units × time per unit.\n\
         The fixed cost is fitted for kinds with {MIN_ROWS_FOR_LATENCY} or more runs, the time per step of reduction depth (K of a product, \
         keys of attention) for compute-bound kinds with one more, and for memory-bound ones where it predicts \
         their runs held out better (— otherwise: an efficiency of — is no work term, the time following the depth); \
         the time per unit (a workgroup, wg, or an invocation, inv: the units a kind's launches state) where it predicts them held out better; \
         waves: for compute-bound kinds whose launches state their workgroups, the workgroups fitted to run at once where pricing whole waves of them predicts the runs held out better; \
         an efficiency above 100 % means faster than the measured roof (a working set held in cache).\n\
         Errors are median factors (1.00× exact); held out = each run predicted by a fit without it; * above the {GOAL}× goal:",
        c.overhead_s * 1e6
    ));
    say(format!(
        "  {:<24} {:>4} {:>8} {:>7} {:>11} {:>10} {:>13} {:>6} {:>9} {:>7} {:>11}  ",
        "op",
        "runs",
        "bound",
        "eff.",
        "fixed cost",
        "per step",
        "per unit",
        "waves",
        "roofline",
        "fitted",
        "held out"
    ));
    for k in &c.kinds {
        let fixed = if k.rows >= MIN_ROWS_FOR_LATENCY {
            format!("{:.1} µs", k.latency_s * 1e6)
        } else {
            "—".into()
        };
        // The star stands after the column, so starred and plain values line up.
        let held = k.held_out_error.map_or("n/a (1 run)  ".into(), |e| {
            format!("{e:.2}×{}", if e > GOAL { " *" } else { "  " })
        });
        let step = if k.depth_s >= 1e-6 {
            format!("{:.1} µs", k.depth_s * 1e6)
        } else if k.depth_s > 0.0 {
            format!("{:.1} ns", k.depth_s * 1e9)
        } else {
            "—".into()
        };
        let unit = if k.workgroup_s > 0.0 {
            let name = if k.per_invocation { "inv" } else { "wg" };
            if k.workgroup_s >= 1e-6 {
                format!("{:.1} µs/{name}", k.workgroup_s * 1e6)
            } else {
                format!("{:.1} ns/{name}", k.workgroup_s * 1e9)
            }
        } else {
            "—".into()
        };
        let waves = if k.concurrent_workgroups > 0.0 {
            format!("{:.0}", k.concurrent_workgroups)
        } else {
            "—".into()
        };
        let efficiency = if k.efficiency >= ridge_model::calibrate::NO_WORK_TERM {
            "—".into()
        } else {
            format!("{:.1}%", 100.0 * k.efficiency)
        };
        say(format!(
            "  {:<24} {:>4} {:>8} {:>7} {:>11} {:>10} {:>13} {:>6} {:>8.2}× {:>6.2}× {:>13}",
            format!("{} {}", k.op, k.dtype),
            k.rows,
            k.bound.to_string(),
            efficiency,
            fixed,
            step,
            unit,
            waves,
            k.roofline_error,
            k.fitted_error,
            held
        ));
    }
}

/// Dense vs block-sparse attention by sequence length: measured and predicted time ratios,
/// the layout's density, and where sparse starts to pay.
fn print_sparse_vs_dense(rows: &[Row], say: &dyn Fn(String)) {
    let find = |op: &str, n: usize| {
        rows.iter()
            .find(|r| r.op == op && r.shape.get(2) == Some(&n))
    };
    let mut lines = Vec::new();
    // The shortest sequence from which sparse is at least 5 % faster (timing noise on equal
    // work stays under that), measured and predicted.
    let (mut pays_measured, mut pays_predicted) = (None, None);
    for dense in rows.iter().filter(|r| r.op == "attention") {
        let n = dense.shape[2];
        let Some(sparse) = find("sparse_attention", n) else {
            continue;
        };
        let density = ridge_kernels::sweep::bigbird(n).density();
        let measured = sparse
            .measured_ms
            .zip(dense.measured_ms)
            .map(|(s, d)| s / d);
        let predicted = sparse.predicted_measured_ms / dense.predicted_measured_ms;
        if measured.is_some_and(|m| m <= 0.95) {
            pays_measured = pays_measured.or(Some(n));
        }
        if predicted <= 0.95 {
            pays_predicted = pays_predicted.or(Some(n));
        }
        lines.push(format!(
            "  n {n:>5}: density {density:.3} · sparse ÷ dense measured {} (goal ≤ 1.3·density = {:.3}) · predicted {predicted:.3}",
            measured.map_or("n/a".into(), |m| format!("{m:.3}")),
            1.3 * density
        ));
    }
    if !lines.is_empty() {
        say(format!(
            "\nBigBird (block {}, 2 global, window 1, 3 random) vs dense attention, 12 heads of 64:",
            ridge_kernels::sweep::BIGBIRD_BLOCK
        ));
        for l in lines {
            say(l);
        }
        let at = |n: Option<usize>| {
            n.map_or("at none of these lengths".into(), |n| {
                format!("from n = {n}")
            })
        };
        say(format!(
            "  sparse at least 5 % faster than dense: measured {}, predicted {}",
            at(pays_measured),
            at(pays_predicted)
        ));
    }
}
