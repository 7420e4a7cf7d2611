//! `ridge predict` for an encoder: per-op predicted times, totals and memory of a batch on a
//! GPU of the spec table.

use std::path::PathBuf;
use std::process::ExitCode;

use ridge_model::transformer::{self, InferenceMemory, LayerFlops, TransformerShape};
use ridge_model::{OpCost, Precision, hardware};

fn shape(model: &str) -> Result<TransformerShape, Box<dyn std::error::Error>> {
    match model {
        "minilm" | "all-MiniLM-L6-v2" => Ok(TransformerShape::minilm_l6()),
        path => {
            let text = std::fs::read_to_string(PathBuf::from(path)).map_err(|e| {
                format!(
                    "--model {path}: not a preset (`--model list` names them) and not a readable file: {e}"
                )
            })?;
            Ok(TransformerShape::from_hf_config(&text).map_err(|e| format!("{path}: {e}"))?)
        }
    }
}

pub fn run(args: &super::Args) -> crate::CliResult {
    let s = shape(&args.model)?;
    if args.quant.is_some() {
        eprintln!("warning: --quant prices a decoder's weights; an encoder is priced in --dtype");
    }
    if args.backend.is_some() {
        eprintln!(
            "warning: --backend picks the terms fitted to llama.cpp's published decoder rows; an encoder is priced by the roofline (or --report)"
        );
    }
    let batch = args.batch.unwrap_or(32);
    if args.seq() > s.max_positions {
        return Err(format!(
            "--seq {} is longer than the model's {} positions (max_position_embeddings)",
            args.seq(),
            s.max_positions
        )
        .into());
    }
    // FLOPs and bytes are counted in integers before they become f64: past 2^53 (or past
    // usize) they would be rounded or wrap silently.
    let widest = [
        s.hidden.saturating_mul(4),
        s.intermediate.saturating_mul(2),
        args.seq().saturating_mul(s.heads),
    ]
    .into_iter()
    .max()
    .unwrap_or(1);
    let exact = batch
        .checked_mul(args.seq())
        .and_then(|t| t.checked_mul(widest))
        .and_then(|v| v.checked_mul(8))
        .is_some_and(|v| v < 1 << 53);
    if !exact {
        return Err(format!(
            "--batch {} × --seq {}: too large to count exactly (batch × seq × the widest \
             activation must stay below 2^53 bytes)",
            batch,
            args.seq()
        )
        .into());
    }
    let (precision, e) = if args.dtype == "f16" {
        (Precision::F16, 2)
    } else {
        (Precision::F32, 4)
    };
    let f16 = args.dtype == "f16";
    let calibrated = args
        .report
        .as_deref()
        .map(|r| super::load_report(r, &args.dtype))
        .transpose()?;
    // The adapter, its ceilings and its usable memory where the spec table states it (a
    // report's adapter: unknown).
    let (adapter, ceilings, budget) = match (&calibrated, &args.report) {
        (Some(c), Some(path)) => (
            serde_json::json!({ "name": c.report.adapter, "report": path }),
            c.report.measured.ceilings(f16),
            None,
        ),
        _ => {
            let spec = hardware::find(&args.adapter)
                .map_err(|e| format!("--adapter: {e} (`--adapter list` names them)"))?;
            let ceilings = spec.ceilings(precision);
            let budget = ridge_model::decoder::memory::usable_bytes(&spec);
            (serde_json::to_value(spec)?, ceilings, budget)
        }
    };
    let adapter_name = adapter["name"].as_str().unwrap_or("?").to_string();
    // The roof an op is held against: with a report, the one `ridge bench` held its kind
    // against (an f16 GEMM: the measured tensor cores, where they were measured).
    let roof = |name: &str| match &calibrated {
        Some(c) => c.report.measured.roof_for(name, f16).0,
        None => ceilings.clone(),
    };
    let ops = transformer::encoder_ops(&s, batch, args.seq(), true, e);
    // The calibrated time of one op, s, and whether its kind was fitted (else the roofline).
    let calibrate = |op: &transformer::PlannedOp| {
        calibrated
            .as_ref()
            .map(|c| c.price(&op.name, &args.dtype, &op.cost, &roof(&op.name)))
    };

    // Group by op name, in first-seen order: name, count, cost, seconds, memory-bound count,
    // calibrated (seconds, every op fitted).
    let mut groups: Vec<Group> = Vec::new();
    for op in &ops {
        let p = roof(&op.name).predict(&op.cost);
        let memory = (p.bound == ridge_model::Bound::Memory) as usize;
        let cal = calibrate(op);
        match groups.iter_mut().find(|g| g.0 == op.name) {
            Some(g) => {
                g.1 += 1;
                g.2 = g.2 + op.cost;
                g.3 += p.seconds;
                g.4 += memory;
                g.5 = g.5.zip(cal).map(|(a, b)| (a.0 + b.0, a.1 && b.1));
            }
            None => groups.push((op.name.clone(), 1, op.cost, p.seconds, memory, cal)),
        }
    }
    let total_s: f64 = groups.iter().map(|g| g.3).sum();
    let calibrated_total = groups.iter().try_fold((0.0, true), |(t, all), g| {
        g.5.map(|(s, fitted)| (t + s, all && fitted))
    });
    let total_cost: OpCost = ops.iter().map(|o| o.cost).sum();
    let memory = InferenceMemory::of(&s, batch, args.seq(), e);
    let layer = LayerFlops::of(&s, args.seq());
    // The weights and one layer's live activations against the GPU's memory.
    let needed = memory.weights + memory.activations;
    let fits = budget.map(|b| needed <= b);

    if args.json {
        let doc = serde_json::json!({
            "model": s, "seq": args.seq(), "batch": batch, "dtype": args.dtype,
            "adapter": adapter, "ceilings": ceilings,
            "ops": ops.iter().map(|o| serde_json::json!({
                "scope": o.scope, "name": o.name, "flops": o.cost.flops, "bytes": o.cost.bytes,
                "predicted": roof(&o.name).predict(&o.cost),
                "calibrated": calibrate(o).map(|(s, fitted)| serde_json::json!({ "seconds": s, "fitted": fitted })),
            })).collect::<Vec<_>>(),
            "total_seconds": total_s, "sequences_per_second": batch as f64 / total_s,
            "calibrated_total_seconds": calibrated_total.map(|c| c.0),
            "calibrated_sequences_per_second": calibrated_total.map(|c| batch as f64 / c.0),
            "memory_bytes": memory, "budget": budget, "fits": fits,
            "layer_flops_per_sequence": layer,
            "quoted": { "attention_8nd2_4n2d": transformer::quoted_attention_flops(args.seq(), s.hidden),
                        "layer_24nd2_4n2d": transformer::quoted_layer_flops(args.seq(), s.hidden) },
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} layers, d {}, {} heads, d_ff {} · batch {} × {} tokens · {} on {} ({:.1} TFLOP/s, {:.0} GB/s, ridge point {:.1} FLOP/B)",
        s.layers,
        s.hidden,
        s.heads,
        s.intermediate,
        batch,
        args.seq(),
        args.dtype,
        adapter_name,
        ceilings.peak_flops / 1e12,
        ceilings.bandwidth / 1e9,
        ceilings.ridge_point()
    );
    if let Some(path) = &args.report {
        let gemm = roof("gemm");
        if gemm.peak_flops != ceilings.peak_flops {
            println!(
                "GEMMs held against the measured tensor cores: {:.1} TFLOP/s",
                gemm.peak_flops / 1e12
            );
        }
        println!(
            "measured ceilings and fitted terms from {} (calibrated: dispatch + fixed cost + work ÷ (roof × fraction) + reduction depth × time per step, per op kind; ~ where the sweep lacks the kind: the roofline)",
            path.display()
        );
    }
    println!(
        "\n{:<15} {:>5} {:>12} {:>12} {:>8} {:>12} {:>7}  {:<8}{}",
        "op",
        "count",
        "FLOPs",
        "bytes",
        "FLOP/B",
        "predicted",
        "share",
        "bound",
        if calibrated.is_some() {
            "  calibrated"
        } else {
            ""
        }
    );
    let cal_cell = |c: Option<(f64, bool)>| {
        c.map_or(String::new(), |(s, fitted)| {
            format!(
                "  {:>10} {}",
                super::time(s),
                if fitted { " " } else { "~" }
            )
        })
    };
    for (name, count, cost, seconds, mem, cal) in &groups {
        let bound = if *mem == *count {
            "memory"
        } else if *mem == 0 {
            "compute"
        } else {
            "mixed"
        };
        println!(
            "{name:<15} {count:>5} {:>12.3e} {:>12.3e} {:>8.2} {:>12} {:>6.1}%  {bound:<8}{}",
            cost.flops,
            cost.bytes,
            cost.intensity(),
            super::time(*seconds),
            100.0 * seconds / total_s,
            cal_cell(*cal)
        );
    }
    println!(
        "{:<15} {:>5} {:>12.3e} {:>12.3e} {:>8.2} {:>12}  → {:.0} sequences/s{}",
        "total",
        ops.len(),
        total_cost.flops,
        total_cost.bytes,
        total_cost.intensity(),
        super::time(total_s),
        batch as f64 / total_s,
        match calibrated_total {
            Some((cal, fitted)) => format!(
                "; calibrated {} {}→ {:.0} sequences/s",
                super::time(cal),
                if fitted { "" } else { "~ " },
                batch as f64 / cal
            ),
            None => " (no dispatch overhead: datasheets do not state one)".into(),
        }
    );
    println!(
        "\nper layer and sequence: {:.3e} FLOPs op by op ({:.3e} in matmuls) · quoted 24nd²+4n²d = {:.3e} · attention 8nd²+4n²d = {:.3e}",
        layer.total(),
        layer.matmul(),
        transformer::quoted_layer_flops(args.seq(), s.hidden),
        transformer::quoted_attention_flops(args.seq(), s.hidden)
    );
    let mb = |b: f64| b / (1 << 20) as f64;
    println!(
        "memory: weights {:.1} MiB · activations of one layer {:.1} MiB · (a decoder's KV cache for this batch would be {:.1} MiB)",
        mb(memory.weights),
        mb(memory.activations),
        mb(memory.kv_cache)
    );
    if let Some(b) = budget {
        println!(
            "{} the {:.1} GB usable on {adapter_name}: weights and one layer's activations take {:.1} GB",
            if needed <= b { "fits" } else { "does NOT fit" },
            b / 1e9,
            needed / 1e9
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// An op group: name, count, cost, roofline seconds, memory-bound count, calibrated
/// (seconds, every op's kind fitted).
type Group = (String, usize, OpCost, f64, usize, Option<(f64, bool)>);
