//! Sentence embeddings the way sentence-transformers computes them: tokenize (truncating at
//! `max_seq_length`), encode, mean-pool over the real tokens, L2-normalise when the pipeline
//! has a `Normalize` module.

#[cfg(not(target_arch = "wasm32"))]
use std::path::Path;
use std::path::PathBuf;

use ridge_core::{Context, DType, ReadBack, Tensor};
use ridge_kernels::MeanPool;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::bert::{Batch, Bert};
use crate::config::{BertConfig, Pipeline};
use crate::error::{Error, Result};
use crate::source::ModelSource;

/// Largest batch [`SentenceEmbedder::embed`] takes.
pub const MAX_BATCH: usize = 128;

/// A sentence-transformers model on the GPU.
pub struct SentenceEmbedder {
    tokenizer: Tokenizer,
    tokenizer_path: PathBuf,
    bert: Bert,
    pipeline: Pipeline,
}

impl SentenceEmbedder {
    /// Loads a local sentence-transformers folder (`config.json`, `model.safetensors`,
    /// `tokenizer.json`, `modules.json`, `sentence_bert_config.json`, the pooling config).
    ///
    /// Errors: as [`SentenceEmbedder::from_source`].
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(ctx: &Context, dir: &Path) -> Result<Self> {
        Self::from_source(ctx, &crate::source::ModelDir(dir.into()))
    }

    /// Loads a sentence-transformers model from any [`ModelSource`] (a folder, or files the
    /// browser fetched) and uploads its weights.
    ///
    /// Errors name the file and the problem: missing or unreadable files, malformed JSON,
    /// unsupported architectures or pipelines, truncated or corrupt weights, missing tensors
    /// or wrong shapes.
    pub fn from_source(ctx: &Context, src: &dyn ModelSource) -> Result<Self> {
        Self::from_source_as(ctx, src, DType::F32)
    }

    /// As [`SentenceEmbedder::from_source`], with the encoder in `dtype` (f32, or f16 where
    /// the adapter has `shader-f16`; see [`Bert::load`]).
    pub fn from_source_as(ctx: &Context, src: &dyn ModelSource, dtype: DType) -> Result<Self> {
        let config = BertConfig::from_source(src)?;
        let pipeline = Pipeline::from_source(src, &config)?;
        let tokenizer_path = src.path("tokenizer.json");
        let tokenizer_json = src.require("tokenizer.json")?;
        let weights = src.weights()?;
        let tok_err = |message: String| Error::Tokenizer {
            path: tokenizer_path.clone(),
            message,
        };
        let mut tokenizer =
            Tokenizer::from_bytes(&tokenizer_json).map_err(|e| tok_err(e.to_string()))?;
        // tokenizer.json may carry its own padding and truncation (all-MiniLM-L6-v2's says
        // pad to 128); sentence-transformers ignores them and truncates at max_seq_length,
        // keeping the first max_seq_length − 2 wordpieces, then [SEP].
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: pipeline.max_seq_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(|e| tok_err(e.to_string()))?;
        let mut tensors = weights.tensors()?;
        let bert = Bert::load(ctx, config, &mut tensors, dtype)?;
        Ok(Self {
            tokenizer,
            tokenizer_path,
            bert,
            pipeline,
        })
    }

    /// The encoder.
    pub fn bert(&self) -> &Bert {
        &self.bert
    }
    /// The pipeline settings.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }
    /// Embedding width.
    pub fn dim(&self) -> usize {
        self.bert.config().hidden_size
    }

    /// Token ids of `text`, `[CLS]` … `[SEP]`, truncated to `max_seq_length`.
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self.encode(text)?.get_ids().to_vec())
    }

    /// Whether `text` has more tokens than `max_seq_length` (`[CLS]` and `[SEP]` included), so
    /// that its embedding covers only its first `max_seq_length − 2` wordpieces, as
    /// sentence-transformers truncates.
    pub fn truncates(&self, text: &str) -> Result<bool> {
        Ok(!self.encode(text)?.get_overflowing().is_empty())
    }

    fn encode(&self, text: &str) -> Result<tokenizers::Encoding> {
        self.tokenizer
            .encode(text, true)
            .map_err(|e| Error::Tokenizer {
                path: self.tokenizer_path.clone(),
                message: format!("cannot encode the text: {e}"),
            })
    }

    /// Embeds `texts`, `batch_size` at a time (1 to [`MAX_BATCH`]); texts are grouped by
    /// length to limit padding, and results come back in input order. Each embedding has
    /// [`SentenceEmbedder::dim`] values.
    ///
    /// Errors: [`Error::Input`] for no texts, a batch size outside 1..=128, or an embedding
    /// that is not finite; tokenizer and GPU errors.
    pub async fn embed(
        &self,
        ctx: &Context,
        texts: &[&str],
        batch_size: usize,
    ) -> Result<Vec<Vec<f32>>> {
        self.embed_with_progress(ctx, texts, batch_size, &mut |_| {})
            .await
    }

    /// [`SentenceEmbedder::embed`], calling `on_batch` with the number of texts each batch
    /// embedded as soon as its results are back (a progress bar's sign of life).
    ///
    /// Errors: as [`SentenceEmbedder::embed`].
    pub async fn embed_with_progress(
        &self,
        ctx: &Context,
        texts: &[&str],
        batch_size: usize,
        on_batch: &mut dyn FnMut(usize),
    ) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Err(Error::Input("no texts to embed".into()));
        }
        if !(1..=MAX_BATCH).contains(&batch_size) {
            return Err(Error::Input(format!(
                "batch size {batch_size} is outside 1..={MAX_BATCH}"
            )));
        }
        let ids: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| self.tokenize(t))
            .collect::<Result<_>>()?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let lengths: Vec<usize> = order.iter().map(|&i| ids[i].len()).collect();
        let batches = plan_batches(&lengths, batch_size, self.max_batch_tokens(ctx));
        let mut out = vec![Vec::new(); texts.len()];
        // Each batch's read-back waits only after the next batch is recorded and submitted,
        // so the GPU runs that batch while the host waits and then records the one after.
        let mut pending: Option<(ReadBack, &[usize])> = None;
        for range in batches {
            let chunk = &order[range];
            let seqs: Vec<Vec<u32>> = chunk.iter().map(|&i| ids[i].clone()).collect();
            let pooled =
                self.embed_batch(ctx, &Batch::new(&seqs, self.bert.config().pad_token_id)?)?;
            let next = (pooled.read_back(ctx)?, chunk);
            if let Some((read, rows)) = pending.replace(next) {
                self.place(&read.to_f32(ctx).await?, rows, &mut out)?;
                on_batch(rows.len());
            }
        }
        if let Some((read, rows)) = pending {
            self.place(&read.to_f32(ctx).await?, rows, &mut out)?;
            on_batch(rows.len());
        }
        Ok(out)
    }

    /// Tokens a batch may hold on `ctx`: its widest activation (the Q/K/V projection or the
    /// feed-forward's, per token) must fit one storage binding and one buffer.
    pub fn max_batch_tokens(&self, ctx: &Context) -> usize {
        let c = self.bert.config();
        let widest = (3 * c.hidden_size).max(c.intermediate_size) * self.bert.dtype().size();
        let l = ctx.limits();
        let bytes = l.max_storage_buffer_binding_size.min(l.max_buffer_size);
        (bytes / widest.max(1) as u64) as usize
    }

    /// Puts a batch's pooled rows (`values`, [`SentenceEmbedder::dim`] each) at their texts'
    /// places `rows` in `out`.
    ///
    /// Errors: [`Error::Input`] for an embedding holding NaN or an infinity (corrupt weights
    /// give them; an embedding must never carry one to the caller).
    fn place(&self, values: &[f32], rows: &[usize], out: &mut [Vec<f32>]) -> Result<()> {
        for (row, &i) in values.chunks(self.dim()).zip(rows) {
            if row.iter().any(|v| !v.is_finite()) {
                return Err(Error::Input(format!(
                    "the embedding of text {i} is not finite (NaN or infinite): the model's \
                     weights may be corrupt"
                )));
            }
            out[i] = row.to_vec();
        }
        Ok(())
    }

    /// Encodes and pools one batch on the GPU: `[batch, hidden]`, not yet read back.
    pub fn embed_batch(&self, ctx: &Context, batch: &Batch) -> Result<Tensor> {
        let encoded = self.bert.forward(ctx, batch, false)?;
        let h = self.dim();
        let pool = MeanPool {
            batch: batch.batch,
            seq: batch.seq,
            hidden: h,
            normalize: self.pipeline.normalize,
        };
        ctx.set_scope("pooling");
        let pooled = Tensor::empty(ctx, &[batch.batch, h], self.bert.dtype())?;
        pool.run(ctx, &encoded.last, &encoded.lengths, &pooled)?;
        ctx.set_scope("");
        Ok(pooled)
    }
}

/// Cosine similarity of two vectors (0 when either is all zeros).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        (dot / (na * nb)) as f32
    }
}

/// Batches over texts sorted longest first (`lengths`, in that order): at most `batch_size`
/// texts each, and no more than `max_tokens` tokens once padded to the batch's longest
/// (its first). A batch the adapter cannot hold is split rather than failing after the
/// model has loaded. Returns index ranges into the sorted order.
pub fn plan_batches(
    lengths: &[usize],
    batch_size: usize,
    max_tokens: usize,
) -> Vec<std::ops::Range<usize>> {
    let mut batches = Vec::new();
    let mut start = 0;
    while start < lengths.len() {
        let fit = (max_tokens / lengths[start].max(1)).max(1);
        let end = (start + batch_size.min(fit)).min(lengths.len());
        batches.push(start..end);
        start = end;
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::plan_batches;

    #[test]
    fn batches_split_where_the_adapter_cannot_hold_them() {
        // 10 texts of 256 tokens, then 10 of 10: 1,024 tokens hold batches of 4 while the
        // batch starts with a long text (padded to it), then the short ones all at once.
        let lengths: Vec<usize> = [256; 10].into_iter().chain([10; 10]).collect();
        let b = plan_batches(&lengths, 32, 1024);
        assert_eq!(b, vec![0..4, 4..8, 8..12, 12..20]);
        assert_eq!(plan_batches(&lengths, 32, usize::MAX), vec![0..20]);
        // Even a text longer than the limit gets a batch of its own (the kernels then say
        // which limit it exceeds).
        assert_eq!(plan_batches(&[5000, 1], 8, 1024), vec![0..1, 1..2]);
    }
}
