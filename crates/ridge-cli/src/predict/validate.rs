//! `ridge predict --validate`: the decoder model against every published measurement.

use std::process::ExitCode;

use ridge_model::decoder::predict::{self, Efficiency, Phase};

pub fn run(json: bool) -> crate::CliResult {
    let checked = predict::check_published();
    let mut vendors: Vec<String> = checked.iter().map(|c| c.vendor.clone()).collect();
    vendors.sort();
    vendors.dedup();
    let median = |phase: Phase, vendor: Option<&str>| {
        predict::median_error(
            checked
                .iter()
                .filter(|c| c.phase == phase && vendor.is_none_or(|v| c.vendor == v)),
        )
    };
    if json {
        let doc = serde_json::json!({
            "efficiency": Efficiency::fitted(),
            "rows": checked.iter().map(|c| serde_json::json!({
                "row": c.row, "vendor": c.vendor, "phase": c.phase,
                "predicted_tokens_per_s": c.predicted, "ratio": c.ratio(),
            })).collect::<Vec<_>>(),
            "median_error": {
                "decode": median(Phase::Decode, None), "prefill": median(Phase::Prefill, None),
                "by_vendor": vendors.iter().map(|v| serde_json::json!({
                    "vendor": v, "decode": median(Phase::Decode, Some(v)),
                    "prefill": median(Phase::Prefill, Some(v)),
                })).collect::<Vec<_>>(),
            },
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<27} {:<7} {:<13} {:<7} {:<7} {:>10} {:>10} {:>7}",
        "GPU", "backend", "model", "quant", "test", "published", "predicted", "error"
    );
    for c in &checked {
        let r = &c.row;
        println!(
            "{:<27} {:<7} {:<13} {:<7} {:<7} {:>10.1} {:>10.1} {:>+6.0}%",
            r.gpu,
            r.backend,
            r.model,
            r.quant,
            r.test,
            r.tokens_per_s,
            c.predicted,
            100.0 * (c.ratio() - 1.0)
        );
    }
    let pct = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{:.0} %", 100.0 * v));
    println!(
        "\nmedian |predicted ÷ published − 1| (goals: decode ≤ 20 %, prefill ≤ 35 %; each vendor ≤ 30 % / 50 %):"
    );
    println!(
        "  all rows: decode {} · prefill {}",
        pct(median(Phase::Decode, None)),
        pct(median(Phase::Prefill, None))
    );
    for v in &vendors {
        println!(
            "  {v:<8} decode {} · prefill {}",
            pct(median(Phase::Decode, Some(v))),
            pct(median(Phase::Prefill, Some(v)))
        );
    }
    println!("\nefficiency terms per vendor, fitted to these rows (no per-GPU term):");
    for e in Efficiency::fitted() {
        println!("  {e}");
    }
    println!(
        "(rows fitted and checked are the same: these errors are in-sample; sources in crates/ridge-model/data/published.json)"
    );
    Ok(ExitCode::SUCCESS)
}
