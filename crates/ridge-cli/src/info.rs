//! `ridge info`: adapters, limits, features, fingerprints.

use std::process::ExitCode;

use ridge_core::context::{self, Fingerprint};
use serde::Serialize;

#[derive(clap::Args)]
pub struct Args {
    /// Print JSON (one object with an `adapters` array) instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct AdapterReport {
    index: usize,
    selected: bool,
    name: String,
    backend: String,
    device_type: String,
    fingerprint: Fingerprint,
    features: Vec<&'static str>,
    subgroup_size: [u32; 2],
    limits: Vec<(&'static str, u64)>,
}

const FEATURES: [wgpu::Features; 6] = [
    wgpu::Features::SHADER_F16,
    wgpu::Features::TIMESTAMP_QUERY,
    wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES,
    wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS,
    wgpu::Features::SUBGROUP,
    wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX,
];

use ridge_core::wgpu;

fn limits(l: &wgpu::Limits) -> Vec<(&'static str, u64)> {
    vec![
        (
            "maxStorageBufferBindingSize",
            l.max_storage_buffer_binding_size,
        ),
        ("maxBufferSize", l.max_buffer_size),
        (
            "maxComputeWorkgroupStorageSize",
            l.max_compute_workgroup_storage_size as u64,
        ),
        (
            "maxComputeInvocationsPerWorkgroup",
            l.max_compute_invocations_per_workgroup as u64,
        ),
        (
            "maxComputeWorkgroupSizeX",
            l.max_compute_workgroup_size_x as u64,
        ),
        (
            "maxComputeWorkgroupSizeY",
            l.max_compute_workgroup_size_y as u64,
        ),
        (
            "maxComputeWorkgroupsPerDimension",
            l.max_compute_workgroups_per_dimension as u64,
        ),
        (
            "maxStorageBuffersPerShaderStage",
            l.max_storage_buffers_per_shader_stage as u64,
        ),
        (
            "maxUniformBufferBindingSize",
            l.max_uniform_buffer_binding_size,
        ),
    ]
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
            let features = a.features();
            AdapterReport {
                index,
                selected: selected.as_ref() == Some(&info),
                name: info.name.clone(),
                backend: info.backend.to_str().to_string(),
                device_type: format!("{:?}", info.device_type),
                fingerprint: Fingerprint::of(&info),
                features: FEATURES
                    .iter()
                    .filter(|f| features.contains(**f))
                    .map(|f| context::feature_name(*f))
                    .collect(),
                subgroup_size: [info.subgroup_min_size, info.subgroup_max_size],
                limits: limits(&a.limits()),
            }
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
            for (name, value) in &r.limits {
                println!("    {name:<36} {value}");
            }
        }
        println!(
            "\n* = the adapter Ridge uses (set {} to choose)",
            context::ADAPTER_ENV
        );
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
