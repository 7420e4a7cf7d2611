//! `ridge predict`: predicted times, tokens/s and memory of a Transformer on any GPU of the
//! spec table, without a GPU: encoders (MiniLM, per-op times of a batch) and decoder LLMs
//! (prefill and decode tokens/s, time to first token, what fits), and `--validate`, the
//! decoder model against published measurements.

mod decoder;
mod encoder;
mod ridge_plan;
mod validate;

use ridge_model::decoder::{DecoderShape, Quant};

/// The GPU `--adapter` names when not given.
const DEFAULT_ADAPTER: &str = "NVIDIA H200";

#[derive(clap::Args)]
pub struct Args {
    /// What to predict: an encoder (`minilm`), a decoder preset (`smollm2`, `llama-3-8b`,
    /// `qwen2.5-7b`, … — `--model list` names them), a GGUF file (its metadata and tensor
    /// types), or a Hugging Face config.json (BERT, Llama, Mistral or Qwen2).
    #[arg(long, default_value = "minilm")]
    model: String,
    /// A GPU of the spec table, by name ("NVIDIA H200", "Apple M2 Max", "RX 7900 XTX"…;
    /// `--adapter list` names them all, with their bandwidth and peaks).
    #[arg(long, default_value = DEFAULT_ADAPTER)]
    adapter: String,
    /// Sequences per batch (default: 32 for an encoder, 1 for a decoder).
    #[arg(long, value_parser = crate::at_least_one, allow_negative_numbers = true)]
    batch: Option<usize>,
    /// Encoders: tokens per sequence (1 to the model's positions; default 128).
    #[arg(long, value_parser = crate::at_least_one, allow_negative_numbers = true)]
    seq: Option<usize>,
    /// Encoders, and decoders with `--report`: the activations' precision, f32 or f16 with f32
    /// accumulation (a decoder's weights are priced in `--quant` or the GGUF's types).
    #[arg(long, default_value = "f32", value_parser = ["f32", "f16"])]
    dtype: String,
    /// Decoders: prompt tokens (the prefill; default 512).
    #[arg(long, value_parser = crate::at_least_one, allow_negative_numbers = true)]
    prompt: Option<usize>,
    /// Decoders: tokens generated after the prompt (the decode; default 128).
    #[arg(long, value_parser = crate::at_least_one, allow_negative_numbers = true)]
    generate: Option<usize>,
    /// Decoders: llama.cpp's file type for a preset or config.json, as `llama-quantize` names
    /// it (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q6_K; the mixes Q2_K, Q2_K_S,
    /// Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M, IQ1_S, IQ1_M, IQ2_XXS/XS/S/M, IQ3_XXS/XS/S/M, IQ4_NL,
    /// IQ4_XS, TQ1_0, TQ2_0, each matrix's format by llama.cpp's rules; or as `llama-bench`
    /// prints it, "Q4_K - Medium"; default Q4_K_M). A GGUF file's own tensor types are used
    /// instead.
    #[arg(long, value_parser = parse_quant)]
    quant: Option<Quant>,
    /// Decoders: the llama.cpp backend to predict for (CUDA, Metal, ROCm, SYCL, Vulkan): the
    /// efficiency terms fitted to the published rows of that backend on the GPU's vendor,
    /// where there are enough of them; without it (or without such rows) the vendor's terms
    /// over all its backends.
    #[arg(long, value_parser = parse_backend)]
    backend: Option<String>,
    /// Print the decoder model's predictions against every published measurement
    /// (crates/ridge-model/data/published.json) and its median error per vendor and phase.
    #[arg(long)]
    validate: bool,
    /// A `ridge bench --json` report of the GPU that will run the model (`--adapter` is not
    /// used). Encoders: each op is also priced by the terms fitted on the report's kernel runs
    /// (the calibrated model, `~` where its sweep lacks the op's kind) and the roofline uses
    /// the report's measured ceilings; GEMMs are planned unsplit (the split-K choice needs the
    /// GPU: `cargo bench --bench minilm -- --report FILE` plans it). Decoders: the dispatches
    /// Ridge itself would launch (its fused kernels, in Q8_0, Q4_0 or Q4_1: a GGUF's types or
    /// `--quant`, default Q4_0) priced the same way: time to first token, decode tokens/s and
    /// per-op times, batch 1. The report's sweep should hold the decoder's kinds (the full
    /// sweep does; or, on one line:
    /// `ridge bench --op qmatvec,rms_qmatvec,rms_qmatvec_swiglu,rms_qmatvec_rope,qmatvec_rows,rms_qmatvec_swiglu_rows,rms_qmatvec_rope_rows,qmatmul,rms_qmatmul_swiglu,rms_qmatmul_rope,kv_attention,kv_attention_prefill,kv_attention_split,attention_causal,qmatvec_int8,rms_qmatvec_int8,rms_qmatvec_swiglu_int8,rms_qmatvec_rope_int8,argmax --json FILE`;
    /// the `_int8` kinds are the products that round x to 8 bits, from K = 2048 on GPUs, the
    /// `_rows` kinds those of prompts of 2 to 32 tokens).
    #[arg(long)]
    report: Option<std::path::PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

fn parse_backend(s: &str) -> Result<String, String> {
    use ridge_model::decoder::predict::BACKENDS;
    BACKENDS
        .iter()
        .find(|b| b.eq_ignore_ascii_case(s))
        .map(|b| b.to_string())
        .ok_or_else(|| {
            format!(
                "not a backend with published rows to fit (llama.cpp has others: OpenCL, CANN, MUSA…); one of {}",
                BACKENDS.join(", ")
            )
        })
}

fn parse_quant(s: &str) -> Result<Quant, String> {
    Quant::parse(s)
        .ok_or_else(|| format!("not a format or mix; one of {}", Quant::names().join(", ")))
}

impl Args {
    /// Encoders' tokens per sequence.
    fn seq(&self) -> usize {
        self.seq.unwrap_or(128)
    }
    /// Decoders' prompt tokens.
    fn prompt(&self) -> usize {
        self.prompt.unwrap_or(512)
    }
    /// Decoders' generated tokens.
    fn generate(&self) -> usize {
        self.generate.unwrap_or(128)
    }
}

pub fn run(args: Args) -> crate::CliResult {
    if args.validate {
        if args.backend.is_some() {
            eprintln!(
                "warning: --backend is not used with --validate: each published row is priced with the terms of its own backend"
            );
        }
        return validate::run(args.json);
    }
    if args.adapter == "list" {
        let rows = ridge_model::hardware::table();
        if args.json {
            println!("{}", serde_json::to_string(&rows)?);
        } else {
            println!(
                "{:<36} {:>9} {:>11} {:>11}",
                "GPU", "GB/s", "f32 TFLOP/s", "f16 TFLOP/s"
            );
            for r in &rows {
                println!(
                    "{:<36} {:>9.1} {:>11.2} {:>11.2}",
                    r.name, r.bandwidth_gbps, r.f32_tflops, r.f16_tflops
                );
            }
            println!(
                "({} GPUs; each row's source: crates/ridge-model/data/gpus.json)",
                rows.len()
            );
        }
        return Ok(std::process::ExitCode::SUCCESS);
    }
    if args.model == "list" {
        let names: Vec<String> = DecoderShape::presets()
            .into_iter()
            .map(|p| p.name)
            .collect();
        if args.json {
            let doc = serde_json::json!({ "encoders": ["minilm"], "decoders": names });
            println!("{doc}");
        } else {
            println!("encoders: minilm");
            println!("decoders: {}", names.join(", "));
        }
        return Ok(std::process::ExitCode::SUCCESS);
    }
    if args.report.is_some() && args.adapter != DEFAULT_ADAPTER {
        eprintln!(
            "warning: --adapter {:?} is not used with --report: the report's adapter prices the model",
            args.adapter
        );
    }
    if args.report.is_some() && args.backend.is_some() {
        eprintln!(
            "warning: --backend is not used with --report: Ridge's own kernels, priced by the report, run the model"
        );
    }
    let source = decoder::source(&args.model)?;
    // Flags of the other kind of model: said, not silently dropped.
    let (kind, takes, unused) = if source.is_some() {
        (
            "a decoder",
            "--prompt and --generate",
            vec![("--seq", args.seq)],
        )
    } else {
        let flags = vec![("--prompt", args.prompt), ("--generate", args.generate)];
        ("an encoder", "--seq", flags)
    };
    for (flag, _) in unused.iter().filter(|(_, given)| given.is_some()) {
        eprintln!("warning: {flag} is not used for {kind}, which takes {takes}");
    }
    match (source, &args.report) {
        (Some(model), Some(report)) => {
            ridge_plan::run(&args, &model.shape, model.gguf.as_deref(), report)
        }
        (Some(model), None) => decoder::run(&args, model),
        (None, _) => encoder::run(&args),
    }
}

/// `--report FILE` with its fitted terms, to price a model stored in `dtype` (`f32`, `f16`).
///
/// Errors: an unreadable file, or one that is not a `ridge bench --json` report
/// ([`ridge_model::report::BenchReport::parse`]); f16 on an adapter the report measured
/// without f16 (no `shader-f16`: Ridge would refuse to run it there). A report without
/// reduction depths gets a warning.
fn load_report(
    path: &std::path::Path,
    dtype: &str,
) -> Result<ridge_model::calibrate::Calibrated, Box<dyn std::error::Error>> {
    let name = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("--report {name}: {e}"))?;
    let report = ridge_model::report::BenchReport::parse(&bytes)
        .map_err(|e| format!("--report {name}: {e}"))?;
    if dtype == "f16" && report.measured.f16_tflops.is_none() {
        return Err(format!(
            "--dtype f16: {}, which --report {name} measured, has no shader-f16 (Ridge runs f32 there); price --dtype f32",
            report.adapter
        )
        .into());
    }
    if !report.has_depths() {
        eprintln!(
            "warning: --report {name} predates reduction depths: its compute-bound kinds are \
             priced without the depth term (a fresh `ridge bench --json` report has it)"
        );
    }
    Ok(ridge_model::calibrate::Calibrated::new(report))
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
