//! `ridge check`: the kernel suite against the f64 references, with times and rates.

use std::process::ExitCode;

use ridge_kernels::suite;

#[derive(clap::Args)]
pub struct Args {
    /// Timed launches per case (the median is reported; 1 to 1000).
    #[arg(long, default_value_t = 10, value_parser = crate::repeats, allow_negative_numbers = true)]
    repeats: usize,
    /// Print JSON (adapter fingerprint, timing method, one object per case) instead of a table.
    #[arg(long)]
    json: bool,
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("n/a".to_string(), |v| format!("{v:.digits$}"))
}

pub fn run(args: Args) -> crate::CliResult {
    let ctx = crate::context()?;
    let method = if ctx.has_timestamps() {
        "GPU timestamps"
    } else {
        "wall clock (synchronised)"
    };
    // Progress on stderr (hidden when it is not a terminal): every case is checked, then timed.
    let bar = indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template(
            "{msg:<44} [{bar:30}] {pos}/{len} steps, {elapsed}, about {eta} left",
        )
        .expect("template")
        .progress_chars("=> "),
    );
    let results = pollster::block_on(suite::run_with_progress(&ctx, args.repeats, &|p| {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
        bar.set_message(p.step);
    }))?;
    bar.finish_and_clear();
    let failed = results.iter().filter(|r| !r.passed).count();
    if args.json {
        let doc = serde_json::json!({
            "adapter": ctx.fingerprint(),
            "timing": method,
            "repeats": args.repeats,
            "cases": results,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "kernel suite on {} — times: median of {} launch{}, {method}, every case timed \
             back to back after the checks (a GPU warmed first)",
            ctx.describe(),
            args.repeats,
            if args.repeats == 1 { "" } else { "es" }
        );
        println!(
            "{:<16} {:<24} {:<4} {:>10} {:>8} {:>5} {:>10} {:>9} {:>8}",
            "op", "shape", "type", "max|err|", "err/tol", "ok", "time ms", "GFLOP/s", "GB/s"
        );
        for r in &results {
            println!(
                "{:<16} {:<24} {:<4} {:>10.2e} {:>8.3} {:>5} {:>10} {:>9} {:>8}",
                r.op,
                r.shape,
                r.dtype,
                r.max_abs_error,
                r.worst_ratio,
                if r.passed { "yes" } else { "NO" },
                opt(r.ms, 3),
                opt(r.gflops(), 1),
                opt(r.gbps(), 1),
            );
        }
        println!(
            "\nerr/tol: the worst element's error over its bound (each op's `error_bound`); ≤ 1 passes."
        );
        for r in results.iter().filter(|r| !r.passed) {
            println!("FAILED {} {} {}: {}", r.op, r.shape, r.dtype, r.detail);
        }
        println!(
            "verdict: {} of {} kernel cases within their error bounds against the f64 references",
            results.len() - failed,
            results.len()
        );
    }
    if failed > 0 {
        return Err(format!("{failed} kernel case(s) exceeded their error bound").into());
    }
    Ok(ExitCode::SUCCESS)
}
