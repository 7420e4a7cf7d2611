//! `ridge predict`: predicted times, tokens/s and memory of a Transformer on any GPU of the
//! spec table, without a GPU: encoders (MiniLM, per-op times of a batch) and decoder LLMs
//! (prefill and decode tokens/s, time to first token, what fits), and `--validate`, the
//! decoder model against published measurements.

mod decoder;
mod encoder;
mod validate;

use ridge_model::decoder::{DecoderShape, Quant};

#[derive(clap::Args)]
pub struct Args {
    /// What to predict: an encoder (`minilm`), a decoder preset (`smollm2`, `llama-3-8b`,
    /// `qwen2.5-7b`, … — `--model list` names them), a GGUF file (its metadata and tensor
    /// types), or a Hugging Face config.json (BERT, Llama, Mistral or Qwen2).
    #[arg(long, default_value = "minilm")]
    model: String,
    /// A GPU of the spec table, by name ("NVIDIA H200", "Apple M2 Max", "RX 7900 XTX"…).
    #[arg(long, default_value = "NVIDIA H200")]
    adapter: String,
    /// Sequences per batch (default: 32 for an encoder, 1 for a decoder).
    #[arg(long, value_parser = crate::at_least_one, allow_negative_numbers = true)]
    batch: Option<usize>,
    /// Encoders: tokens per sequence (1 to the model's positions).
    #[arg(long, default_value_t = 128, value_parser = crate::at_least_one, allow_negative_numbers = true)]
    seq: usize,
    /// Encoders: storage precision, f32 or f16 with f32 accumulation.
    #[arg(long, default_value = "f32", value_parser = ["f32", "f16"])]
    dtype: String,
    /// Decoders: prompt tokens (the prefill).
    #[arg(long, default_value_t = 512, value_parser = crate::at_least_one, allow_negative_numbers = true)]
    prompt: usize,
    /// Decoders: tokens generated after the prompt (the decode).
    #[arg(long, default_value_t = 128, value_parser = crate::at_least_one, allow_negative_numbers = true)]
    generate: usize,
    /// Decoders: weight format or llama.cpp mix for a preset or config.json (F32, F16, BF16,
    /// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K … Q6_K, Q4_K_M, Q4_K_S, Q5_K_M; default Q4_K_M). A
    /// GGUF file's own tensor types are used instead.
    #[arg(long, value_parser = parse_quant)]
    quant: Option<Quant>,
    /// Print the decoder model's predictions against every published measurement
    /// (crates/ridge-model/data/published.json) and its median error per vendor and phase.
    #[arg(long)]
    validate: bool,
    /// Encoders: a `ridge bench --json` report of the GPU that will run the model. Each op is
    /// then also priced by the terms fitted on the report's kernel runs (the calibrated
    /// model, `~` where its sweep lacks the op's kind), and the roofline uses the report's
    /// measured ceilings instead of the spec table's (`--adapter` is not used). GEMMs are
    /// planned unsplit: the split-K choice needs the GPU (`cargo bench --bench minilm --
    /// --report FILE` plans it).
    #[arg(long)]
    report: Option<std::path::PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

fn parse_quant(s: &str) -> Result<Quant, String> {
    Quant::parse(s)
        .ok_or_else(|| format!("not a format or mix; one of {}", Quant::names().join(", ")))
}

pub fn run(args: Args) -> crate::CliResult {
    if args.validate {
        return validate::run(args.json);
    }
    if args.model == "list" {
        println!("encoders: minilm");
        let names: Vec<String> = DecoderShape::presets()
            .into_iter()
            .map(|p| p.name)
            .collect();
        println!("decoders: {}", names.join(", "));
        return Ok(std::process::ExitCode::SUCCESS);
    }
    match decoder::source(&args.model)? {
        Some(_) if args.report.is_some() => Err("--report prices an encoder's ops on Ridge's \
             kernels; a decoder's forward on the GPU is priced by `cargo bench --bench generate \
             -- --report FILE`"
            .into()),
        Some(model) => decoder::run(&args, model),
        None => encoder::run(&args),
    }
}
