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
    let batch = args.batch.unwrap_or(32);
    if args.seq > s.max_positions {
        return Err(format!(
            "--seq {} is longer than the model's {} positions (max_position_embeddings)",
            args.seq, s.max_positions
        )
        .into());
    }
    // FLOPs and bytes are counted in integers before they become f64: past 2^53 (or past
    // usize) they would be rounded or wrap silently.
    let widest = [
        s.hidden.saturating_mul(4),
        s.intermediate.saturating_mul(2),
        args.seq.saturating_mul(s.heads),
    ]
    .into_iter()
    .max()
    .unwrap_or(1);
    let exact = batch
        .checked_mul(args.seq)
        .and_then(|t| t.checked_mul(widest))
        .and_then(|v| v.checked_mul(8))
        .is_some_and(|v| v < 1 << 53);
    if !exact {
        return Err(format!(
            "--batch {} × --seq {}: too large to count exactly (batch × seq × the widest \
             activation must stay below 2^53 bytes)",
            batch, args.seq
        )
        .into());
    }
    let spec = hardware::find(&args.adapter)?;
    let (precision, e) = if args.dtype == "f16" {
        (Precision::F16, 2)
    } else {
        (Precision::F32, 4)
    };
    let ceilings = spec.ceilings(precision);
    let ops = transformer::encoder_ops(&s, batch, args.seq, true, e);

    // Group by op name, in first-seen order.
    let mut groups: Vec<(String, usize, OpCost, f64, usize)> = Vec::new(); // name, count, cost, seconds, memory-bound count
    for op in &ops {
        let p = ceilings.predict(&op.cost);
        let memory = (p.bound == ridge_model::Bound::Memory) as usize;
        match groups.iter_mut().find(|g| g.0 == op.name) {
            Some(g) => {
                g.1 += 1;
                g.2 = g.2 + op.cost;
                g.3 += p.seconds;
                g.4 += memory;
            }
            None => groups.push((op.name.clone(), 1, op.cost, p.seconds, memory)),
        }
    }
    let total_s: f64 = groups.iter().map(|g| g.3).sum();
    let total_cost: OpCost = ops.iter().map(|o| o.cost).sum();
    let memory = InferenceMemory::of(&s, batch, args.seq, e);
    let layer = LayerFlops::of(&s, args.seq);

    if args.json {
        let doc = serde_json::json!({
            "model": s, "seq": args.seq, "batch": batch, "dtype": args.dtype,
            "adapter": spec, "ceilings": ceilings,
            "ops": ops.iter().map(|o| serde_json::json!({
                "scope": o.scope, "name": o.name, "flops": o.cost.flops, "bytes": o.cost.bytes,
                "predicted": ceilings.predict(&o.cost),
            })).collect::<Vec<_>>(),
            "total_seconds": total_s, "sequences_per_second": batch as f64 / total_s,
            "memory_bytes": memory, "layer_flops_per_sequence": layer,
            "quoted": { "attention_8nd2_4n2d": transformer::quoted_attention_flops(args.seq, s.hidden),
                        "layer_24nd2_4n2d": transformer::quoted_layer_flops(args.seq, s.hidden) },
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
        args.seq,
        args.dtype,
        spec.name,
        ceilings.peak_flops / 1e12,
        ceilings.bandwidth / 1e9,
        ceilings.ridge_point()
    );
    println!(
        "\n{:<11} {:>5} {:>12} {:>12} {:>8} {:>12} {:>7}  bound",
        "op", "count", "FLOPs", "bytes", "FLOP/B", "predicted", "share"
    );
    for (name, count, cost, seconds, mem) in &groups {
        let bound = if *mem == *count {
            "memory"
        } else if *mem == 0 {
            "compute"
        } else {
            "mixed"
        };
        println!(
            "{name:<11} {count:>5} {:>12.3e} {:>12.3e} {:>8.2} {:>12} {:>6.1}%  {bound}",
            cost.flops,
            cost.bytes,
            cost.intensity(),
            time(*seconds),
            100.0 * seconds / total_s
        );
    }
    println!(
        "{:<11} {:>5} {:>12.3e} {:>12.3e} {:>8.2} {:>12}  → {:.0} sequences/s (no dispatch overhead: datasheets do not state one)",
        "total",
        ops.len(),
        total_cost.flops,
        total_cost.bytes,
        total_cost.intensity(),
        time(total_s),
        batch as f64 / total_s
    );
    println!(
        "\nper layer and sequence: {:.3e} FLOPs op by op ({:.3e} in matmuls) · quoted 24nd²+4n²d = {:.3e} · attention 8nd²+4n²d = {:.3e}",
        layer.total(),
        layer.matmul(),
        transformer::quoted_layer_flops(args.seq, s.hidden),
        transformer::quoted_attention_flops(args.seq, s.hidden)
    );
    let mb = |b: f64| b / (1 << 20) as f64;
    println!(
        "memory: weights {:.1} MiB · activations of one layer {:.1} MiB · (a decoder's KV cache for this batch would be {:.1} MiB)",
        mb(memory.weights),
        mb(memory.activations),
        mb(memory.kv_cache)
    );
    Ok(ExitCode::SUCCESS)
}

/// A time in the unit that shows its digits: `12.3 µs`, `1.234 ms`, `2.50 s`.
fn time(seconds: f64) -> String {
    if seconds < 1e-3 {
        format!("{:.1} µs", seconds * 1e6)
    } else if seconds < 1.0 {
        format!("{:.3} ms", seconds * 1e3)
    } else {
        format!("{seconds:.2} s")
    }
}
