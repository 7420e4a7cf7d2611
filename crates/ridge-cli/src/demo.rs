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
    Ok(ExitCode::SUCCESS)
}
