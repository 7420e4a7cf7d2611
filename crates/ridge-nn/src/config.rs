//! Model configuration: the BERT `config.json` and the sentence-transformers pipeline
//! (`modules.json`, `sentence_bert_config.json`, `1_Pooling/config.json`).

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::source::ModelSource;

/// A BERT encoder's hyper-parameters, as in Hugging Face's `BertConfig` (`config.json`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct BertConfig {
    /// Width of every token vector (d_model).
    pub hidden_size: usize,
    /// Encoder layers.
    pub num_hidden_layers: usize,
    /// Attention heads per layer; `hidden_size` must be a multiple.
    pub num_attention_heads: usize,
    /// Width of the feed-forward block.
    pub intermediate_size: usize,
    /// Longest sequence the position table holds.
    pub max_position_embeddings: usize,
    /// Layer-norm epsilon.
    pub layer_norm_eps: f64,
    /// Feed-forward activation; Ridge runs `gelu` (the erf form).
    pub hidden_act: String,
    /// Rows of the word-embedding table.
    pub vocab_size: usize,
    /// Rows of the token-type table.
    #[serde(default = "one")]
    pub type_vocab_size: usize,
    /// `bert` for BERT-family models.
    #[serde(default)]
    pub model_type: Option<String>,
    /// Must be `absolute` (or absent).
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    /// Id of the padding token.
    #[serde(default)]
    pub pad_token_id: u32,
}

fn one() -> usize {
    1
}

impl BertConfig {
    /// all-MiniLM-L6-v2 (Wang et al., "MiniLM", 2020; sentence-transformers' checkpoint):
    /// 6 layers, hidden 384, 12 heads, FFN 1536, erf GELU, eps 1e-12, WordPiece vocab 30,522.
    pub fn minilm_l6() -> Self {
        Self {
            hidden_size: 384,
            num_hidden_layers: 6,
            num_attention_heads: 12,
            intermediate_size: 1536,
            max_position_embeddings: 512,
            layer_norm_eps: 1e-12,
            hidden_act: "gelu".into(),
            vocab_size: 30522,
            type_vocab_size: 2,
            model_type: Some("bert".into()),
            position_embedding_type: Some("absolute".into()),
            pad_token_id: 0,
        }
    }

    /// Parses and validates `config.json`; `path` names it in errors.
    ///
    /// Errors: [`Error::Config`] for malformed JSON or impossible values,
    /// [`Error::Unsupported`] for another architecture, activation or position encoding.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self> {
        let config: Self = parse_json(bytes, path)?;
        config.validate(path)?;
        Ok(config)
    }

    /// Reads and validates a model folder's `config.json`.
    ///
    /// Errors: as [`BertConfig::parse`], and [`Error::Io`] when it is missing or unreadable.
    pub fn from_source(src: &dyn ModelSource) -> Result<Self> {
        Self::parse(&src.require("config.json")?, &src.path("config.json"))
    }

    /// Checks that Ridge can run this configuration.
    pub fn validate(&self, path: &Path) -> Result<()> {
        let unsupported = |message: String| {
            Err(Error::Unsupported {
                path: path.into(),
                message,
            })
        };
        match self.model_type.as_deref() {
            None | Some("bert") => {}
            Some(other) => {
                return unsupported(format!(
                    "model_type {other:?} (Ridge runs BERT-family encoders: \"bert\")"
                ));
            }
        }
        if self.hidden_act != "gelu" {
            return unsupported(format!(
                "hidden_act {:?} (Ridge runs \"gelu\", the erf form)",
                self.hidden_act
            ));
        }
        if let Some(p) = self
            .position_embedding_type
            .as_deref()
            .filter(|p| *p != "absolute")
        {
            return unsupported(format!("position_embedding_type {p:?} (only \"absolute\")"));
        }
        let bad = |message: String| {
            Err(Error::Config {
                path: path.into(),
                message,
            })
        };
        if self.hidden_size == 0 || self.num_attention_heads == 0 || self.num_hidden_layers == 0 {
            return bad(
                "hidden_size, num_attention_heads and num_hidden_layers must be > 0".into(),
            );
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return bad(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if !(self.layer_norm_eps >= 0.0 && self.layer_norm_eps.is_finite()) {
            return bad(format!(
                "layer_norm_eps {} must be finite and ≥ 0",
                self.layer_norm_eps
            ));
        }
        if self.vocab_size == 0 || self.max_position_embeddings == 0 || self.type_vocab_size == 0 {
            return bad(
                "vocab_size, max_position_embeddings and type_vocab_size must be > 0".into(),
            );
        }
        Ok(())
    }

    /// Dimension of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

/// The sentence-transformers pipeline around the encoder.
#[derive(Clone, Debug, PartialEq)]
pub struct Pipeline {
    /// Tokens kept per text, `[CLS]` and `[SEP]` included (longer texts are truncated).
    pub max_seq_length: usize,
    /// Whether a `Normalize` module follows pooling (L2 normalisation).
    pub normalize: bool,
}

#[derive(Deserialize)]
struct Module {
    #[serde(default)]
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

#[derive(Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
}

fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8], path: &Path) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| Error::Config {
        path: path.into(),
        message: e.to_string(),
    })
}

fn read_json<T: serde::de::DeserializeOwned>(
    src: &dyn ModelSource,
    file: &str,
) -> Result<Option<T>> {
    src.read(file)?
        .map(|bytes| parse_json(&bytes, &src.path(file)))
        .transpose()
}

impl Pipeline {
    /// Reads the pipeline of a sentence-transformers folder: `modules.json` must be
    /// Transformer → Pooling(mean) [→ Normalize]; `sentence_bert_config.json` gives
    /// `max_seq_length` (capped by the position table). Without `modules.json` the folder is
    /// taken as a plain BERT model with mean pooling and no normalisation.
    ///
    /// Errors: [`Error::Unsupported`] for other modules or pooling modes, [`Error::Config`]
    /// and [`Error::Io`] for unreadable files.
    pub fn from_source(src: &dyn ModelSource, bert: &BertConfig) -> Result<Self> {
        let modules_path = src.path("modules.json");
        let mut normalize = false;
        if let Some(modules) = read_json::<Vec<Module>>(src, "modules.json")? {
            let unsupported = |message: String| Error::Unsupported {
                path: modules_path.clone(),
                message,
            };
            let kinds: Vec<&str> = modules
                .iter()
                .map(|m| m.kind.rsplit('.').next().unwrap_or(""))
                .collect();
            match kinds.as_slice() {
                ["Transformer", "Pooling"] => {}
                ["Transformer", "Pooling", "Normalize"] => normalize = true,
                other => {
                    return Err(unsupported(format!(
                        "pipeline {other:?} (Ridge runs Transformer → Pooling [→ Normalize])"
                    )));
                }
            }
            let pooling_file = format!("{}/config.json", modules[1].path.trim_end_matches('/'));
            let pooling_path = src.path(&pooling_file);
            let pooling: PoolingConfig = parse_json(&src.require(&pooling_file)?, &pooling_path)?;
            let only_mean = pooling.pooling_mode_mean_tokens
                && !pooling.pooling_mode_cls_token
                && !pooling.pooling_mode_max_tokens
                && !pooling.pooling_mode_mean_sqrt_len_tokens;
            if !only_mean {
                return Err(Error::Unsupported {
                    path: pooling_path,
                    message: "pooling other than mean over tokens".into(),
                });
            }
        }
        let sbert_path = src.path("sentence_bert_config.json");
        let configured = read_json::<SentenceBertConfig>(src, "sentence_bert_config.json")?
            .and_then(|c| c.max_seq_length);
        let max_seq_length = configured
            .unwrap_or(bert.max_position_embeddings)
            .min(bert.max_position_embeddings);
        if max_seq_length < 2 {
            return Err(Error::Config {
                path: sbert_path,
                message: format!(
                    "max_seq_length {max_seq_length} leaves no room for [CLS] and [SEP]"
                ),
            });
        }
        Ok(Self {
            max_seq_length,
            normalize,
        })
    }
}
