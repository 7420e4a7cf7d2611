//! MiniLM throughput: sentences per second at batch 1 and batch 32, 128 tokens each, with
//! the per-op GPU time breakdown. Not a test; run with `cargo bench --bench minilm`
//! (`-- --batches 1,8` to choose). Needs the model in the cache (`cargo xtask fetch-model`).

use std::time::Instant;

use ridge::core::Context;
use ridge::nn::{Batch, SentenceEmbedder, fetch};

/// Token ids of `len` tokens: [CLS], wordpieces of a real sentence repeated, [SEP].
fn ids(model: &SentenceEmbedder, len: usize) -> Vec<u32> {
    let words = model
        .tokenize("The quick brown fox jumps over the lazy dog near the riverbank at dawn.")
        .expect("tokenize");
    let body: Vec<u32> = words[1..words.len() - 1]
        .iter()
        .copied()
        .cycle()
        .take(len - 2)
        .collect();
    let (cls, sep) = (words[0], words[words.len() - 1]);
    std::iter::once(cls)
        .chain(body)
        .chain(std::iter::once(sep))
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let batches: Vec<usize> = args
        .iter()
        .position(|a| a == "--batches")
        .and_then(|i| args.get(i + 1))
        .map(|s| {
            s.split(',')
                .map(|b| b.parse().expect("batch size"))
                .collect()
        })
        .unwrap_or(vec![1, 32]);
    let seq = 128;
    let ctx = pollster::block_on(Context::new()).expect("adapter");
    let model = SentenceEmbedder::load(&ctx, &fetch::minilm_dir())
        .expect("model (run cargo xtask fetch-model)");
    println!("MiniLM on {}, {seq} tokens per sentence", ctx.describe());
    for batch in batches {
        let seqs = vec![ids(&model, seq); batch];
        let input = Batch::new(&seqs, 0).expect("batch");
        let run = || {
            let pooled = model.embed_batch(&ctx, &input).expect("forward");
            pollster::block_on(pooled.to_vec::<f32>(&ctx)).expect("read back");
        };
        run(); // compiles pipelines
        let start = Instant::now();
        run();
        let seconds = start.elapsed().as_secs_f64();
        ctx.start_profiling();
        run();
        let profile = pollster::block_on(ctx.finish_profiling()).expect("profile");
        println!(
            "\nbatch {batch}: {seconds:.3} s per batch, {:.2} sentences/s (wall clock, read-back included)",
            batch as f64 / seconds
        );
        print!("{}", profile.table());
    }
}
