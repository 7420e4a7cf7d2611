//! Transformer inference on Ridge's kernels: a BERT encoder and the sentence-transformers
//! pipeline around it (all-MiniLM-L6-v2 first).
//!
//! ```no_run
//! # async fn demo() -> ridge_nn::Result<()> {
//! let ctx = ridge_core::Context::new().await?;
//! let dir = ridge_nn::fetch::minilm_dir();
//! let model = ridge_nn::SentenceEmbedder::load(&ctx, &dir)?;
//! let vectors = model.embed(&ctx, &["A cat.", "A kitten."], 32).await?;
//! println!("{}", ridge_nn::cosine(&vectors[0], &vectors[1]));
//! # Ok(()) }
//! ```

pub mod bert;
pub mod config;
pub mod error;
#[cfg(not(target_arch = "wasm32"))]
pub mod fetch;
pub mod file;
pub mod generate;
pub mod gguf;
pub mod layers;
pub mod llama;
pub mod sampling;
pub mod sentence;
pub mod source;
pub mod weights;

pub use bert::{Batch, Bert, Encoded};
pub use config::{BertConfig, Pipeline};
pub use error::{Error, Result};
pub use generate::{Finish, GenerateOptions, Session, Stats, TextGenerator, Token};
pub use llama::tokenizer::Message;
pub use llama::{KvCache, Llama, LlamaConfig};
pub use sampling::Sampling;
pub use sentence::{SentenceEmbedder, cosine};
pub use source::{ModelFiles, ModelSource};
