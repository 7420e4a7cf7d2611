//! `ridge tune`: measure the best kernel variants for this adapter into the user's tuning
//! table, or show the tables in use.

use std::process::ExitCode;
use std::time::Duration;

use clap::builder::PossibleValuesParser;
use ridge_core::DType;
use ridge_tune::autotune::{self, Roofs, TuneOptions};
use ridge_tune::{Table, cache};

#[derive(clap::Args)]
pub struct Args {
    /// Ops to tune (comma separated): gemm, layer_norm, rms_norm, softmax, attention. Default:
    /// all.
    #[arg(long, value_delimiter = ',', value_parser = PossibleValuesParser::new(autotune::OPS))]
    op: Vec<String>,
    /// Storage types to tune (comma separated): f32, f16. Default: both (f16 where the adapter
    /// has `shader-f16`).
    #[arg(long, value_delimiter = ',', value_parser = ["f32", "f16"])]
    dtype: Vec<String>,
    /// Time budget, e.g. 60s, 5m (a plain number is seconds), shared out over the problems as
    /// it goes: each gets what is left over the problems left, and always its first candidate.
    #[arg(long, default_value = "120s", allow_hyphen_values = true)]
    budget: String,
    /// Timed launches per candidate (median; 1 to 1000).
    #[arg(long, default_value_t = 5, value_parser = crate::repeats, allow_negative_numbers = true)]
    repeats: usize,
    /// Print the tables in use and where each representative problem's variant comes from;
    /// tune nothing.
    #[arg(long)]
    show: bool,
}

/// `--budget`: a plain number of seconds or a humantime duration, more than zero (a negative
/// value reaches here as a value, not as an unknown flag).
fn budget(s: &str) -> Result<Duration, String> {
    let d = s
        .parse::<u64>()
        .map(Duration::from_secs)
        .or_else(|_| humantime::parse_duration(s))
        .map_err(|_| {
            format!(
                "--budget {s:?}: not a time; give seconds (60) or a duration such as 90s, 5m, 1h"
            )
        })?;
    if d.is_zero() {
        return Err(format!("--budget {s:?}: the budget must be more than zero"));
    }
    // A deadline is the budget added to the clock: past a year it could overflow the
    // clock's range (and no tuning run needs it).
    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
    if d > YEAR {
        return Err(format!(
            "--budget {s:?}: more than a year; give at most 365 days"
        ));
    }
    Ok(d)
}

pub fn run(args: Args) -> crate::CliResult {
    // --show tunes nothing, so it takes no budget.
    let budget = if args.show {
        Duration::ZERO
    } else {
        budget(&args.budget)?
    };
    let ctx = crate::context()?;
    let fp = ctx.fingerprint();
    let (tables, _) = ridge_tune::install(&ctx);
    let dtypes: Vec<DType> = args
        .dtype
        .iter()
        .map(|d| if d == "f16" { DType::F16 } else { DType::F32 })
        .collect();
    let problems = autotune::problems(&ctx, &args.op, &dtypes);
    if args.show {
        println!(
            "tuning for {} — user table: {}",
            ctx.describe(),
            cache::path(&fp).display()
        );
        if tables.layers.is_empty() {
            println!("no table applies: every kernel uses its heuristic");
        }
        for (name, t) in &tables.layers {
            let n = t.entries.len();
            println!(
                "\n{name} ({n} {})",
                if n == 1 { "entry" } else { "entries" }
            );
            for e in &t.entries {
                let origin = match &e.origin {
                    ridge_tune::Origin::Measured { device, date } => {
                        format!("measured on {device}, {date}")
                    }
                    ridge_tune::Origin::Heuristic => "vendor-heuristic default".into(),
                };
                let ms = e.ms.map_or(String::new(), |ms| format!(" {ms:.4} ms"));
                let replaced = match (e.ms, e.baseline_ms) {
                    (Some(ms), Some(before)) if ms >= before => format!(
                        "; SLOWER than the choice it replaced ({before:.4} ms): retune or delete it"
                    ),
                    (_, Some(before)) => format!("; replaced one of {before:.4} ms"),
                    _ => String::new(),
                };
                println!(
                    "  {:<10} {:<18} {:<4} {:?}{ms}  ({origin}{replaced})",
                    e.op,
                    format!("{:?}", e.bucket),
                    e.dtype,
                    e.params
                );
            }
        }
        println!("\nrepresentative problems:");
        for p in &problems {
            let from =
                tables
                    .find(&p.op, &p.shape, p.dtype)
                    .map_or("heuristic".to_string(), |(n, e)| {
                        let unused = match autotune::usable(&ctx, p, &e.params) {
                            true => "",
                            false => " (does not fit this adapter: the heuristic runs instead)",
                        };
                        format!("{n}: {:?}{unused}", e.params)
                    });
            println!(
                "  {:<10} {:<18} {:<4} ← {from}",
                p.op,
                format!("{:?}", p.shape),
                p.dtype
            );
        }
        return Ok(ExitCode::SUCCESS);
    }

    if problems.is_empty() {
        let why = if dtypes.contains(&DType::F16) && !ctx.has_f16() {
            format!(
                "{} has no `shader-f16`, so there is nothing to tune in f16",
                ctx.describe()
            )
        } else {
            "no representative problem matches --op and --dtype".to_string()
        };
        return Err(format!("nothing to tune: {why}").into());
    }
    // Where the table goes, checked before the tuning rather than after it.
    cache::writable(&fp).map_err(|e| format!("{}: {e}", cache::path(&fp).display()))?;
    let spec = ridge_model::hardware::lookup(fp.vendor_id, fp.device_id, &fp.name);
    // The rooflines that stop a problem's search early: the spec table's f16 figure is the
    // tensor cores' where a GPU has them; measured, it is their measured peak.
    let roofs = match &spec {
        Some(s) => Roofs {
            f32: s.ceilings(ridge_model::Precision::F32),
            f16: s.ceilings(ridge_model::Precision::F16),
        },
        None => {
            eprintln!("measuring this adapter's ceilings for the roofline…");
            let m = pollster::block_on(ridge_kernels::ceilings::measure(&ctx, 16 << 20, 3))?;
            Roofs {
                f32: m.ceilings(false),
                f16: m.ceilings_for(true, true),
            }
        }
    };
    let opts = TuneOptions {
        ops: args.op.clone(),
        budget,
        repeats: args.repeats,
        good_enough: 0.9,
    };
    let family = ridge_tune::shipped::family(&fp).unwrap_or("unknown");
    let bar = indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template(
            "{msg:<40} [{bar:30}] {pos}/{len} candidates, {elapsed}",
        )
        .expect("template")
        .progress_chars("=> "),
    );
    let (fresh, trials) = pollster::block_on(autotune::autotune(
        &ctx,
        &problems,
        &opts,
        Some(&roofs),
        family,
        &|p| {
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
            bar.set_message(p.problem);
        },
    ))?;
    bar.finish_and_clear();
    for t in &trials {
        let r = match &t.result {
            Ok(ms) => format!("{ms:.4} ms"),
            Err(e) => e.clone(),
        };
        let what = match (t.in_force, t.params.is_empty()) {
            (true, true) => "in force: the launcher's heuristic".to_string(),
            (true, false) => format!("in force: {:?}", t.params),
            (false, _) => format!("{:?}", t.params),
        };
        println!(
            "{:<10} {:<18} {:<4} {what}: {r}",
            t.problem.op,
            format!("{:?}", t.problem.shape),
            t.problem.dtype,
        );
    }
    let problems_kept = fresh.entries.len();
    // Merge into the existing user table (new measurements replace old ones).
    let mut table = cache::read(&fp)
        .and_then(|(name, json)| Table::parse(&name, &json).ok())
        .filter(|t| t.fingerprint.as_ref() == Some(&fp))
        .unwrap_or_else(|| Table::new(family, Some(fp.clone())));
    for e in fresh.entries {
        table.insert(e);
    }
    let path =
        cache::write(&fp, &table).map_err(|e| format!("{}: {e}", cache::path(&fp).display()))?;
    if !table.entries.is_empty() {
        println!("\nbest variants:");
    }
    for e in &table.entries {
        println!(
            "  {:<10} bucket {:<18} {:<4} {:?} {:.4} ms",
            e.op,
            format!("{:?}", e.bucket),
            e.dtype,
            e.params,
            e.ms.unwrap_or(f64::NAN)
        );
    }
    let kept = if problems_kept == problems.len() {
        "every problem got an entry".to_string()
    } else if problems_kept == 0 {
        format!(
            "no problem got an entry: the choice in force stays everywhere (no candidate beat it \
             by {:.0} % twice)",
            100.0 * ridge_tune::autotune::MARGIN
        )
    } else {
        format!(
            "{problems_kept} of {} problems got an entry; the others keep the choice in force \
             (no candidate beat it by {:.0} % twice)",
            problems.len(),
            100.0 * ridge_tune::autotune::MARGIN
        )
    };
    println!("user table written to {} ({kept})", path.display());
    Ok(ExitCode::SUCCESS)
}
