//! `ridge demo`: MiniLM end to end — embeddings of a few sentences, their cosine-similarity
//! table, sentences per second and where the GPU time went.

use std::process::ExitCode;
use std::time::Instant;

use ridge_nn::cosine;

use crate::embed::ModelArgs;

const SENTENCES: [&str; 6] = [
    "A cat is sleeping on the windowsill.",
    "A kitten naps in the sun by the window.",
    "The stock market fell sharply on Monday.",
    "Shares dropped at the start of the week.",
    "GPUs multiply matrices very quickly.",
    "Graphics cards are fast at linear algebra.",
];

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
}

pub fn run(args: Args) -> crate::CliResult {
    let ctx = crate::context()?;
    println!("MiniLM on {}", ctx.describe());
    let load = Instant::now();
    let model = args.model.load(&ctx)?;
    println!(
        "model loaded and uploaded in {:.2} s",
        load.elapsed().as_secs_f64()
    );

    // First run compiles the pipelines; the timed run is the second.
    pollster::block_on(model.embed(&ctx, &SENTENCES, SENTENCES.len()))?;
    ctx.start_profiling();
    let start = Instant::now();
    let vectors = pollster::block_on(model.embed(&ctx, &SENTENCES, SENTENCES.len()))?;
    let seconds = start.elapsed().as_secs_f64();
    let profile = pollster::block_on(ctx.finish_profiling())?;

    println!("\ncosine similarity");
    for (i, s) in SENTENCES.iter().enumerate() {
        let row: Vec<String> = vectors
            .iter()
            .map(|v| format!("{:5.2}", cosine(&vectors[i], v)))
            .collect();
        println!("  [{i}] {}  {s}", row.join(" "));
    }
    println!(
        "\n{} sentences in {:.3} s: {:.1} sentences/s (one batch, wall clock, read-back included)",
        SENTENCES.len(),
        seconds,
        SENTENCES.len() as f64 / seconds
    );
    println!("\n{}", profile.table());
    verdict(&ctx, &model, args.model.is_default())?;
    Ok(ExitCode::SUCCESS)
}

/// sentence-transformers' embeddings of three sentences (`data/minilm_reference.json`, from
/// the reference fixture), for the demo's verdict.
const REFERENCE: &str = include_str!("../data/minilm_reference.json");

/// The demo's last word: the model files against their SHA-256 digests (the cached model) and
/// Ridge's embeddings against sentence-transformers' for the reference sentences.
///
/// Errors: a file that differs from its digest; embeddings beyond the GPU tests' bound of the
/// reference (1e-5, or 1e-3 in f16); the embedding's own errors.
fn verdict(
    ctx: &ridge_core::Context,
    model: &ridge_nn::SentenceEmbedder,
    cached: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    if cached {
        ridge_nn::fetch::verify(&ridge_nn::fetch::MINILM, &ridge_nn::fetch::minilm_dir())?;
        println!(
            "verdict: all-MiniLM-L6-v2's {} files match their SHA-256 digests",
            ridge_nn::fetch::MINILM.files.len()
        );
    }
    let doc: serde_json::Value = serde_json::from_str(REFERENCE)?;
    let sentences = doc["sentences"]
        .as_array()
        .ok_or("reference: no sentences")?;
    let texts: Vec<&str> = sentences
        .iter()
        .filter_map(|s| s["text"].as_str())
        .collect();
    let got = pollster::block_on(model.embed(ctx, &texts, texts.len()))?;
    let mut worst: f64 = 0.0;
    for (s, v) in sentences.iter().zip(&got) {
        let want = s["embedding"].as_array().ok_or("reference: no embedding")?;
        for (a, b) in v.iter().zip(want) {
            worst = worst.max((*a as f64 - b.as_f64().unwrap_or(f64::NAN)).abs());
        }
    }
    // The GPU tests' bounds: 1e-5 in f32, 1e-3 for the opt-in f16 encoder.
    let bound = if model.bert().dtype() == ridge_core::DType::F16 {
        1e-3
    } else {
        1e-5
    };
    // NaN compares false: a NaN embedding fails too.
    if worst.is_nan() || worst > bound {
        return Err(format!(
            "embeddings differ from sentence-transformers' by {worst:.2e} (more than {bound:e})"
        )
        .into());
    }
    println!(
        "verdict: embeddings of {} reference sentences within {worst:.1e} of sentence-transformers' (bound {bound:e})",
        texts.len()
    );
    Ok(())
}
