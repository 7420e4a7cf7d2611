//! `ridge info`: adapters, limits, features, fingerprints.

use std::process::ExitCode;

use ridge_core::RuntimeChecks;
use ridge_core::context::{self, AdapterReport};

#[derive(clap::Args)]
pub struct Args {
    /// Print JSON (one object with an `adapters` array) instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> crate::CliResult {
    let all = pollster::block_on(context::adapters());
    let selector = std::env::var(context::ADAPTER_ENV)
        .ok()
        .filter(|s| !s.is_empty());
    let selected = match &selector {
        Some(s) => context::select(all.clone(), s)
            .first()
            .map(|a| a.get_info()),
        None => all.first().map(|a| a.get_info()),
    };
    let reports: Vec<AdapterReport> = all
        .iter()
        .enumerate()
        .map(|(index, a)| {
            let info = a.get_info();
            AdapterReport::of(
                &info,
                a.features(),
                &a.limits(),
                index,
                selected.as_ref() == Some(&info),
            )
        })
        .collect();
    if args.json {
        let doc = serde_json::json!({ "adapter_env": selector, "adapters": reports });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        if reports.is_empty() {
            println!("no adapters found");
        }
        for r in &reports {
            let mark = if r.selected { "*" } else { " " };
            println!(
                "{mark}[{}] {} ({}, {})",
                r.index, r.name, r.backend, r.device_type
            );
            let fp = &r.fingerprint;
            println!(
                "    fingerprint  vendor 0x{:04x}  device 0x{:04x}  driver {:?}",
                fp.vendor_id, fp.device_id, fp.driver
            );
            println!("    features     {}", r.features.join(", "));
            println!(
                "    subgroups    {}..{} invocations",
                r.subgroup_size[0], r.subgroup_size[1]
            );
            println!(
                "    shader checks {}",
                match r.shader_checks {
                    RuntimeChecks::Naga => "naga's (indices clamped, loops bounded)",
                    RuntimeChecks::Driver => {
                        "the driver's (robust buffer access; RIDGE_SHADER_CHECKS=1 adds naga's)"
                    }
                }
            );
            for (name, value) in &r.limits {
                println!("    {name:<36} {value}");
            }
        }
        // With a selector that matches nothing no adapter is starred: the error below says
        // so, and a footer explaining the star would point at nothing.
        if selected.is_some() {
            println!(
                "\n* = the adapter Ridge uses (set {} to choose)",
                context::ADAPTER_ENV
            );
        }
    }
    if selector.is_some() && selected.is_none() {
        return Err(format!(
            "no adapter matches {}={:?}",
            context::ADAPTER_ENV,
            selector.unwrap_or_default()
        )
        .into());
    }
    Ok(ExitCode::SUCCESS)
}
