//! `ridge predict --validate`: the decoder model against every published measurement, with
//! the terms fitted to all rows (in-sample) and with each GPU's rows left out of the fit
//! (held out: the error on a GPU the model has not seen).

use std::process::ExitCode;

use ridge_model::decoder::predict::{self, Checked, Efficiency, Phase};

/// Median errors of `checked`: all rows, then per vendor, (decode, prefill).
fn medians(checked: &[Checked], vendors: &[String]) -> Vec<(String, Option<f64>, Option<f64>)> {
    let median = |phase: Phase, vendor: Option<&str>| {
        predict::median_error(
            checked
                .iter()
                .filter(|c| c.phase == phase && vendor.is_none_or(|v| c.vendor == v)),
        )
    };
    std::iter::once(None)
        .chain(vendors.iter().map(|v| Some(v.as_str())))
        .map(|v| {
            (
                v.unwrap_or("all rows").to_string(),
                median(Phase::Decode, v),
                median(Phase::Prefill, v),
            )
        })
        .collect()
}

pub fn run(json: bool) -> crate::CliResult {
    let checked = predict::check_published();
    let held = predict::check_held_out();
    let mut vendors: Vec<String> = checked.iter().map(|c| c.vendor.clone()).collect();
    vendors.sort();
    vendors.dedup();
    let (fitted, held_out) = (medians(&checked, &vendors), medians(&held, &vendors));
    if json {
        let as_json = |m: &[(String, Option<f64>, Option<f64>)]| {
            m.iter()
                .map(|(v, d, p)| serde_json::json!({ "vendor": v, "decode": d, "prefill": p }))
                .collect::<Vec<_>>()
        };
        let doc = serde_json::json!({
            "efficiency": Efficiency::fitted(),
            "rows": checked.iter().zip(&held).map(|(c, h)| serde_json::json!({
                "row": c.row, "vendor": c.vendor, "phase": c.phase,
                "predicted_tokens_per_s": c.predicted, "ratio": c.ratio(),
                "held_out_predicted_tokens_per_s": h.predicted,
            })).collect::<Vec<_>>(),
            "median_error": {
                "decode": fitted[0].1, "prefill": fitted[0].2, "by_vendor": as_json(&fitted[1..]),
            },
            "held_out_median_error": {
                "decode": held_out[0].1, "prefill": held_out[0].2, "by_vendor": as_json(&held_out[1..]),
            },
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<27} {:<7} {:<13} {:<7} {:<7} {:>10} {:>10} {:>7} {:>9}",
        "GPU", "backend", "model", "quant", "test", "published", "predicted", "error", "held out"
    );
    for (c, h) in checked.iter().zip(&held) {
        let r = &c.row;
        println!(
            "{:<27} {:<7} {:<13} {:<7} {:<7} {:>10.1} {:>10.1} {:>+6.0}% {:>+8.0}%",
            r.gpu,
            r.backend,
            r.model,
            r.quant,
            r.test,
            r.tokens_per_s,
            c.predicted,
            100.0 * (c.ratio() - 1.0),
            100.0 * (h.ratio() - 1.0)
        );
    }
    let pct = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{:.0} %", 100.0 * v));
    println!(
        "\nmedian |predicted ÷ published − 1| (goals: decode ≤ 20 %, prefill ≤ 35 %; each vendor ≤ 30 % / 50 %),"
    );
    println!("fitted to all rows · with each GPU's rows left out of the fit:");
    for ((name, d, p), (_, hd, hp)) in fitted.iter().zip(&held_out) {
        println!(
            "  {name:<9} decode {:>4} · prefill {:>4}    held out: decode {:>4} · prefill {:>4}",
            pct(*d),
            pct(*p),
            pct(*hd),
            pct(*hp)
        );
    }
    println!(
        "\nefficiency terms per vendor and per backend on a vendor's GPUs, fitted to all rows (no per-GPU term):"
    );
    for e in Efficiency::fitted() {
        println!("  {e}");
    }
    println!("(sources of every row: crates/ridge-model/data/published.json)");
    Ok(ExitCode::SUCCESS)
}
