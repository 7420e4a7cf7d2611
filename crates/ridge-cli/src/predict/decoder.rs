//! `ridge predict` for a decoder LLM: prefill and decode tokens/s, time to first token, per-op
//! shares, memory and what fits, on a GPU of the spec table.

use std::path::Path;
use std::process::ExitCode;

use ridge_model::decoder::memory::{DecoderMemory, usable_bytes};
use ridge_model::decoder::predict::{self, PhaseTime};
use ridge_model::decoder::{DecoderShape, LayerBytes, ModelWeights};
use ridge_model::hardware;

/// A decoder to predict: its shape, and its weights when a GGUF file states them.
pub struct Model {
    pub shape: DecoderShape,
    weights: Option<ModelWeights>,
    /// The GGUF file it was read from.
    pub gguf: Option<std::path::PathBuf>,
}

/// The decoder `--model` names, or `None` for an encoder (a preset or a BERT config.json).
///
/// Errors: an unreadable file, a GGUF that is not a Llama-family decoder or is corrupt, a
/// config.json that disagrees with itself.
pub fn source(model: &str) -> Result<Option<Model>, Box<dyn std::error::Error>> {
    if let Some(shape) = DecoderShape::preset(model) {
        return Ok(Some(Model {
            shape,
            weights: None,
            gguf: None,
        }));
    }
    let path = Path::new(model);
    let is_gguf = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    if is_gguf {
        return Ok(Some(from_gguf(path)?));
    }
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("--model {model}: {e}"))?;
    if !DecoderShape::is_decoder_config(&text) {
        return Ok(None);
    }
    let name = path.display().to_string();
    let shape = DecoderShape::from_hf_config(&name, &text).map_err(|e| prefixed(&name, e))?;
    config_notes(&name, &text, &shape);
    Ok(Some(Model {
        shape,
        weights: None,
        gguf: None,
    }))
}

/// Notes on what a config.json leaves to defaults: no `max_position_embeddings` (the
/// context assumed), a `quantization_config` (its format is not read: `--quant` prices the
/// weights).
fn config_notes(name: &str, json: &str, s: &DecoderShape) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return;
    };
    if v.get("max_position_embeddings").is_none_or(|c| c.is_null()) {
        eprintln!(
            "note: {name} has no max_position_embeddings: a context of {} positions assumed",
            s.context
        );
    }
    if let Some(q) = v.get("quantization_config").filter(|q| !q.is_null()) {
        let method = q["quant_method"].as_str().unwrap_or("its own");
        eprintln!(
            "note: {name} is quantized by {method}, which Ridge does not model: its weights are priced in --quant ({} unless given)",
            predict::default_quant().name()
        );
    }
}

/// `e` as one line naming the file `name` once (many errors name it already).
fn prefixed(name: &str, e: impl std::fmt::Display) -> String {
    let e = e.to_string();
    if e.starts_with(name) {
        e
    } else {
        format!("{name}: {e}")
    }
}

/// The shape from a GGUF's metadata and the bytes from its tensors, by llama.cpp's names.
fn from_gguf(path: &Path) -> Result<Model, Box<dyn std::error::Error>> {
    let name = path.display().to_string();
    let file = ridge_nn::file::FileBytes::open(path).map_err(|e| e.to_string())?;
    let g = ridge_nn::gguf::Gguf::parse(file).map_err(|e| prefixed(&name, e))?;
    let c = ridge_nn::llama::LlamaConfig::shape_from_gguf(&g).map_err(|e| prefixed(&name, e))?;
    // The metadata against the tensors: a file whose head counts or widths disagree with its
    // weights is refused, as `ridge generate` refuses it, not priced as the metadata says.
    c.check_tensors(&g).map_err(|e| prefixed(&name, e))?;
    let tied = g.tensor("output.weight").is_none();
    let shape = DecoderShape {
        name: name.clone(),
        layers: c.layers,
        hidden: c.hidden,
        heads: c.heads,
        kv_heads: c.kv_heads,
        head_dim: c.head_dim,
        ffn: c.ffn,
        vocab: c.vocab,
        tied_embeddings: tied,
        context: c.context,
    };
    shape.check().map_err(|e| prefixed(&name, e))?;
    let mut layers = vec![LayerBytes::default(); c.layers];
    let (mut embedding, mut output, mut final_norm) = (0.0, 0.0, 0.0);
    let mut types: Vec<&str> = Vec::new();
    for t in g.tensors() {
        let bytes = t.bytes as f64;
        types.push(t.ggml_type.name);
        let n = &t.name;
        if n == "token_embd.weight" {
            embedding = bytes;
        } else if n == "output.weight" {
            output = bytes;
        } else if n == "output_norm.weight" {
            final_norm = bytes;
        } else if let Some(rest) = n.strip_prefix("blk.") {
            let (index, part) = rest.split_once('.').unwrap_or((rest, ""));
            let Some(l) = index.parse::<usize>().ok().and_then(|i| layers.get_mut(i)) else {
                return Err(format!("{name}: tensor {n} is past the {} layers", c.layers).into());
            };
            match part.trim_end_matches(".weight").trim_end_matches(".bias") {
                "attn_q" | "attn_k" | "attn_v" => l.qkv += bytes,
                "attn_output" => l.o += bytes,
                "ffn_gate" | "ffn_up" => l.gate_up += bytes,
                "ffn_down" => l.down += bytes,
                _ => l.norms += bytes,
            }
        }
    }
    types.sort();
    types.dedup();
    let weights = ModelWeights {
        format: format!("the GGUF's tensors ({})", types.join(", ")),
        embedding,
        embedding_row: embedding / c.vocab as f64,
        output: if tied { embedding } else { output },
        layers,
        final_norm,
    };
    Ok(Model {
        shape,
        weights: Some(weights),
        gguf: Some(path.to_path_buf()),
    })
}

pub fn run(args: &super::Args, model: Model) -> crate::CliResult {
    let s = &model.shape;
    let batch = args.batch.unwrap_or(1);
    if model.weights.is_some() && args.quant.is_some() {
        return Err("--quant applies to presets and config.json; a GGUF file's tensors have their own types".into());
    }
    let context = args
        .prompt()
        .checked_add(args.generate())
        .filter(|&c| c <= s.context);
    let Some(context) = context else {
        return Err(format!(
            "--prompt {} + --generate {} is longer than {}'s {} positions",
            args.prompt(),
            args.generate(),
            s.name,
            s.context
        )
        .into());
    };
    // Counts stay exact: batch × context × the widest activation well below 2^53 bytes.
    let exact = batch
        .checked_mul(context)
        .and_then(|t| t.checked_mul(s.vocab.max(s.ffn).max(s.hidden)))
        .is_some_and(|v| v < 1 << 45);
    if !exact {
        return Err(
            format!("--batch {batch} × {context} tokens: too large to count exactly").into(),
        );
    }
    if args.dtype != "f32" {
        eprintln!(
            "warning: --dtype prices an encoder, or a decoder on Ridge's kernels with --report; here a decoder's weights are priced in --quant"
        );
    }
    let gpu = hardware::find(&args.adapter)
        .map_err(|e| format!("--adapter: {e} (`--adapter list` names them)"))?;
    let quant = args.quant.unwrap_or_else(predict::default_quant);
    let w = model.weights.unwrap_or_else(|| ModelWeights::of(s, quant));
    let p = predict::predict(
        s,
        &w,
        &gpu,
        args.backend.as_deref(),
        batch,
        args.prompt(),
        args.generate(),
    );
    if let Some(b) = &args.backend {
        backend_note(&gpu, b, &p.efficiency);
    }
    let mem = DecoderMemory::of(s, &w, batch, context);
    let budget = usable_bytes(&gpu);
    let fits = budget.map(|b| mem.total() <= b);
    let largest_context = budget.map(|b| DecoderMemory::largest_context(s, &w, batch, b));
    let largest_batch = budget.map(|b| DecoderMemory::largest_batch(s, &w, context, b));

    if args.json {
        let doc = serde_json::json!({
            "model": s, "weights": w.format, "adapter": gpu,
            "batch": batch, "prompt": args.prompt(), "generate": args.generate(),
            "prefill_tokens_per_s": p.prefill.tokens_per_s,
            "decode_tokens_per_s": p.decode.tokens_per_s,
            "time_to_first_token_s": p.time_to_first_token_s,
            "prefill": p.prefill, "decode": p.decode, "efficiency": p.efficiency,
            "memory_bytes": {
                "weights": mem.weights, "kv_cache": mem.kv_cache,
                "activations": mem.activations, "total": mem.total(),
                "budget": budget, "fits": fits,
                "largest_context": largest_context, "largest_batch": largest_batch,
            },
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    let gb = |b: f64| b / 1e9;
    println!(
        "{}: {} layers, d {}, {} heads over {} KV heads, ffn {}, vocab {} ({:.2} B parameters), weights {} = {:.2} GB",
        s.name,
        s.layers,
        s.hidden,
        s.heads,
        s.kv_heads,
        s.ffn,
        s.vocab,
        s.params() / 1e9,
        w.format,
        gb(w.total(s.tied_embeddings))
    );
    println!(
        "on {} ({} GB/s, {} TFLOP/s f16), efficiency terms of {}",
        gpu.name, gpu.bandwidth_gbps, gpu.f16_tflops, p.efficiency
    );
    let (roof, bytes_per_weight) = (p.efficiency.roof, w.matrix_bytes_per_weight(s));
    println!(
        "compute roof for these weights: {:.1} TFLOP/s ({})",
        roof.tflops(&gpu, bytes_per_weight),
        roof.reason(bytes_per_weight)
    );
    println!(
        "\n{:<8} {:>7} {:>10} {:>13} {:>17} {:>15}",
        "phase", "tokens", "time", "tokens/s", "roofline tok/s", "compute-bound"
    );
    let row = |name: &str, tokens: usize, t: &PhaseTime| {
        println!(
            "{name:<8} {tokens:>7} {:>7.1} ms {:>13.1} {:>17.1} {:>14.0}%",
            1e3 * t.seconds,
            t.tokens_per_s,
            t.roofline_tokens_per_s,
            100.0 * t.compute_bound_share
        );
    };
    row("prefill", batch * args.prompt(), &p.prefill);
    row("decode", batch * args.generate(), &p.decode);
    println!(
        "time to first token {:.1} ms · batch {batch}",
        1e3 * p.time_to_first_token_s
    );
    let shares = |t: &PhaseTime| {
        let total: f64 = t.ops.iter().map(|o| o.1).sum();
        t.ops
            .iter()
            .map(|(n, s)| format!("{n} {:.0}%", 100.0 * s / total))
            .collect::<Vec<_>>()
            .join(" · ")
    };
    println!("\nprefill time by op: {}", shares(&p.prefill));
    println!("decode time by op:  {}", shares(&p.decode));
    println!(
        "\nmemory: weights {:.2} GB · KV cache {:.2} GB ({} × {context} tokens, f16) · activations {:.2} GB · total {:.2} GB",
        gb(mem.weights),
        gb(mem.kv_cache),
        batch,
        gb(mem.activations),
        gb(mem.total())
    );
    match (budget, largest_context, largest_batch) {
        (Some(b), Some(0), _) if mem.weights > b => println!(
            "does NOT fit the {:.1} GB usable on {}: the weights alone take {:.1} GB (the times above assume it did)",
            gb(b),
            gpu.name,
            gb(mem.weights)
        ),
        (Some(b), Some(0), Some(lb)) => println!(
            "does NOT fit the {:.1} GB usable on {}: at batch {batch} not one token of context fits beside the {:.1} GB of weights (KV cache and activations); at {context} tokens a batch of up to {lb} (the times above assume it did)",
            gb(b),
            gpu.name,
            gb(mem.weights)
        ),
        (Some(b), Some(lc), Some(lb)) => println!(
            "{} the {:.1} GB usable on {}: at batch {batch} a context of up to {lc} tokens fits; at {context} tokens a batch of up to {lb}",
            if fits == Some(true) {
                "fits"
            } else {
                "does NOT fit"
            },
            gb(b),
            gpu.name
        ),
        _ => println!("{}'s memory varies with the system: not checked", gpu.name),
    }
    Ok(ExitCode::SUCCESS)
}

/// Warns where `--backend` has no terms of its own on `gpu`'s vendor (`used`, the terms the
/// prediction took, are then the vendor's over all its backends); silent where the vendor's
/// rows name that backend alone (its terms are the vendor's).
fn backend_note(gpu: &hardware::GpuSpec, backend: &str, used: &predict::Efficiency) {
    let vendor = predict::vendor(gpu);
    let named = predict::backends_of(vendor);
    if named.is_empty() {
        // A vendor without published rows (Qualcomm's Adreno): the pooled terms.
        eprintln!(
            "warning: no published rows of any backend on {}: the prediction takes the terms of {}",
            gpu.name,
            used.group()
        );
        return;
    }
    let why = if used.backend.is_some() || named == [backend] {
        return;
    } else if named.iter().any(|n| n == backend) {
        format!("too few published rows or GPUs of {backend} on {vendor} GPUs")
    } else {
        format!(
            "no published rows of {backend} on {vendor} GPUs (they name {})",
            named.join(", ")
        )
    };
    eprintln!("warning: {why}: the prediction takes {vendor}'s terms over all its backends");
}
