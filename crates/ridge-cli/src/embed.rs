//! `ridge embed`, `ridge similarity`.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use ridge_core::{Context, DType};
use ridge_nn::{SentenceEmbedder, cosine, fetch};

#[derive(clap::Args)]
pub struct ModelArgs {
    /// A local sentence-transformers folder (BERT family). Default: all-MiniLM-L6-v2 from
    /// the cache folder (`ridge fetch-model` puts it there).
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// Run the encoder in f16 (weights and activations; f32 accumulation; tensor cores where
    /// the adapter has them): faster on GPUs, embeddings within 1e-3 of f32. Needs
    /// `shader-f16`.
    #[arg(long)]
    f16: bool,
}

impl ModelArgs {
    /// Whether the model is the cached all-MiniLM-L6-v2 (no `--model`).
    pub fn is_default(&self) -> bool {
        self.model.is_none()
    }

    pub fn load(&self, ctx: &Context) -> Result<SentenceEmbedder, Box<dyn std::error::Error>> {
        let dir = match &self.model {
            Some(dir) => dir.clone(),
            None => {
                let dir = fetch::minilm_dir();
                if !dir.join("model.safetensors").exists() {
                    return Err(format!(
                        "all-MiniLM-L6-v2 is not in the cache ({}): run `ridge fetch-model` or `cargo xtask fetch-model`, or pass --model DIR",
                        dir.display()
                    )
                    .into());
                }
                fetch::verify(&fetch::MINILM, &dir)?;
                dir
            }
        };
        let dtype = if self.f16 { DType::F16 } else { DType::F32 };
        Ok(SentenceEmbedder::from_source_as(
            ctx,
            &ridge_nn::source::ModelDir(dir),
            dtype,
        )?)
    }
}

#[derive(clap::Args)]
pub struct EmbedArgs {
    /// Texts to embed (each argument is one text).
    texts: Vec<String>,
    /// Read texts from a file, one per line (empty lines are kept as empty texts); `-` reads
    /// standard input.
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Texts encoded together on the GPU (1–128).
    #[arg(long, default_value_t = 32, value_parser = batch_size, allow_negative_numbers = true)]
    batch_size: usize,
    /// JSON Lines: one {"index", "text", "embedding"} object per text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    model: ModelArgs,
}

pub fn embed(args: EmbedArgs) -> crate::CliResult {
    let mut texts = args.texts.clone();
    if let Some(file) = &args.file {
        let (name, content) = if file.as_os_str() == "-" {
            let mut content = String::new();
            std::io::stdin()
                .read_to_string(&mut content)
                .map_err(|e| format!("standard input: {e}"))?;
            ("standard input".to_string(), content)
        } else {
            let content =
                std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
            (file.display().to_string(), content)
        };
        // A byte-order mark (Windows editors write one) is not part of the first text.
        let content = content.strip_prefix('\u{feff}').unwrap_or(&content);
        if content.is_empty() && texts.is_empty() {
            return Err(format!("{name}: no texts (it is empty)").into());
        }
        texts.extend(content.lines().map(str::to_string));
    }
    if texts.is_empty() {
        return Err("nothing to embed: give texts as arguments or --file FILE".into());
    }
    let ctx = crate::context()?;
    let model = args.model.load(&ctx)?;
    warn_truncated(&model, &texts)?;
    // Results stream: texts go through the model a few batches at a time (sorted by length
    // within each slice, as sentence-transformers sorts) and each slice's lines are written
    // in input order as soon as it is done; the progress bar on stderr moves with every
    // batch, whenever there is more than one.
    let slice = args.batch_size * 8;
    let bar = if texts.len() > args.batch_size {
        let bar = indicatif::ProgressBar::new(texts.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "embedding [{bar:40}] {pos}/{len} texts, {per_sec}, {eta} left",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut out = crate::stdout();
    for (start, chunk) in texts.chunks(slice).enumerate().map(|(c, t)| (c * slice, t)) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let vectors = pollster::block_on(model.embed_with_progress(
            &ctx,
            &refs,
            args.batch_size,
            &mut |n| bar.inc(n as u64),
        ))?;
        write_lines(&mut out, start, chunk, &vectors, args.json)?;
        out.flush()?;
    }
    bar.finish_and_clear();
    Ok(ExitCode::SUCCESS)
}

/// One JSON Lines record: f32 values in their shortest exact form (through a `Value` they
/// would become f64 and print 17 digits).
#[derive(serde::Serialize)]
struct Line<'a> {
    index: usize,
    text: &'a str,
    embedding: &'a [f32],
}

fn write_lines(
    out: &mut impl Write,
    start: usize,
    texts: &[String],
    vectors: &[Vec<f32>],
    json: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    for (i, (text, v)) in texts
        .iter()
        .zip(vectors)
        .enumerate()
        .map(|(i, x)| (start + i, x))
    {
        if json {
            let line = Line {
                index: i,
                text,
                embedding: v,
            };
            writeln!(out, "{}", serde_json::to_string(&line)?)?;
        } else {
            let head: Vec<String> = v.iter().take(6).map(|x| format!("{x:+.5}")).collect();
            writeln!(
                out,
                "[{i}] {} dims [{}, …]  {}",
                v.len(),
                head.join(", "),
                preview(text)
            )?;
        }
    }
    Ok(())
}

/// One line on stderr naming the texts longer than the model's `max_seq_length` tokens: their
/// embeddings cover only the beginning (as sentence-transformers computes them too).
fn warn_truncated(
    model: &SentenceEmbedder,
    texts: &[String],
) -> Result<(), Box<dyn std::error::Error>> {
    let mut cut = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        if model.truncates(text)? {
            cut.push(i.to_string());
        }
    }
    if !cut.is_empty() {
        let shown = cut.len().min(10);
        let more = if cut.len() > shown { ", …" } else { "" };
        eprintln!(
            "warning: texts over {} tokens are embedded from their first {} wordpieces only, \
             as sentence-transformers does: {} of {} (index {}{more})",
            model.pipeline().max_seq_length,
            model.pipeline().max_seq_length - 2,
            cut.len(),
            texts.len(),
            cut[..shown].join(", "),
        );
    }
    Ok(())
}

fn preview(text: &str) -> String {
    let mut s: String = text.chars().take(60).collect();
    if text.chars().count() > 60 {
        s.push('…');
    }
    format!("{s:?}")
}

#[derive(clap::Args)]
pub struct SimilarityArgs {
    /// First text.
    a: String,
    /// Second text.
    b: String,
    /// Print {"a", "b", "cosine"} as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    model: ModelArgs,
}

pub fn similarity(args: SimilarityArgs) -> crate::CliResult {
    let ctx = crate::context()?;
    let model = args.model.load(&ctx)?;
    warn_truncated(&model, &[args.a.clone(), args.b.clone()])?;
    let v = pollster::block_on(model.embed(&ctx, &[&args.a, &args.b], 2))?;
    let c = cosine(&v[0], &v[1]);
    if args.json {
        println!(
            "{}",
            serde_json::json!({ "a": args.a, "b": args.b, "cosine": c })
        );
    } else {
        println!("{c:.6}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Parses `--batch-size`: 1 to the embedder's largest batch.
fn batch_size(s: &str) -> Result<usize, String> {
    let most = ridge_nn::sentence::MAX_BATCH;
    match s.parse::<i128>() {
        Ok(n) if (1..=most as i128).contains(&n) => Ok(n as usize),
        Ok(_) => Err(format!("must be 1 to {most}")),
        Err(_) => Err("not a whole number".into()),
    }
}
