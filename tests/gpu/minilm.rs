//! all-MiniLM-L6-v2 on Ridge's kernels against PyTorch / sentence-transformers reference
//! outputs (`tests/fixtures/minilm/public.json`, see its README), on every adapter.
//!
//! Required (f32): token ids identical; hidden states within 1e-4 max abs; embeddings within
//! 1e-5 max abs and 1 − cosine ≤ 1e-6; a batched result equal to the one-at-a-time result.
//! The opt-in f16 encoder: embeddings within 1e-3 max abs.

use std::sync::OnceLock;

use ridge::core::{Context, DType, Error, Result};
use ridge::nn::source::ModelDir;
use ridge::nn::{Batch, SentenceEmbedder, cosine, fetch};
use serde_json::Value;

use crate::harness::*;

fn fixture() -> &'static Value {
    static FIXTURE: OnceLock<Value> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/minilm/public.json"
        );
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture"))
            .expect("fixture JSON")
    })
}

fn sentences() -> &'static [Value] {
    fixture()["sentences"].as_array().expect("sentences")
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().expect("number") as f32)
        .collect()
}

fn matrix(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("rows")
        .iter()
        .flat_map(floats)
        .collect()
}

pub fn model(ctx: &Context) -> Result<SentenceEmbedder> {
    model_as(ctx, DType::F32)
}

fn model_as(ctx: &Context, dtype: DType) -> Result<SentenceEmbedder> {
    let dir = fetch::minilm_dir();
    assert!(
        fetch::missing(&fetch::MINILM, &dir).is_empty(),
        "all-MiniLM-L6-v2 is not in {} (or differs from its digests): run `cargo xtask fetch-model`",
        dir.display()
    );
    SentenceEmbedder::from_source_as(ctx, &ModelDir(dir), dtype)
        .map_err(|e| Error::Gpu(e.to_string()))
}

fn nn<T>(r: ridge::nn::Result<T>) -> Result<T> {
    r.map_err(|e| Error::Gpu(e.to_string()))
}

fn max_abs(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() as f64)
        .fold(0.0, f64::max)
}

#[test]
fn token_ids_match_the_reference_tokenizer() {
    on_every_adapter("minilm_tokens", |ctx| {
        let m = model(ctx)?;
        for s in sentences() {
            let want: Vec<u32> = s["input_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            let got = nn(m.tokenize(s["text"].as_str().unwrap()))?;
            if got != want {
                return Err(Error::invalid(
                    "tokenize",
                    format!("sentence {}: {got:?} != {want:?}", s["index"]),
                ));
            }
        }
        Ok(())
    });
}

#[test]
fn embeddings_match_sentence_transformers_one_at_a_time_and_batched() {
    on_every_adapter("minilm_embeddings", |ctx| {
        let m = model(ctx)?;
        let texts: Vec<&str> = sentences()
            .iter()
            .map(|s| s["text"].as_str().unwrap())
            .collect();
        let single = block(m.embed(ctx, &texts, 1)).map_err(|e| Error::Gpu(e.to_string()))?;
        for (s, got) in sentences().iter().zip(&single) {
            let want = floats(&s["embedding"]);
            let err = max_abs(got, &want);
            let one_minus_cos = 1.0 - cosine(got, &want) as f64;
            if err > 1e-5 || one_minus_cos > 1e-6 {
                return Err(Error::invalid(
                    "embedding",
                    format!(
                        "sentence {}: max |error| {err:.2e} (≤ 1e-5), 1 − cos {one_minus_cos:.2e} (≤ 1e-6)",
                        s["index"]
                    ),
                ));
            }
        }
        // Batched with padding equals one at a time: padded keys get exactly zero attention
        // and padded tokens are not pooled; only the summation order of a softmax over a
        // longer padded row differs (≤ 1e-6). The sentences of at most 64 tokens (ten of the
        // twelve) keep this affordable on CPU drivers: all ten in one batch, then batches of 4.
        let short: Vec<usize> = (0..texts.len())
            .filter(|&i| sentences()[i]["num_tokens"].as_u64().unwrap() <= 64)
            .collect();
        assert!(short.len() >= 8);
        let short_texts: Vec<&str> = short.iter().map(|&i| texts[i]).collect();
        for batch_size in [short.len(), 4] {
            let batched = block(m.embed(ctx, &short_texts, batch_size))
                .map_err(|e| Error::Gpu(e.to_string()))?;
            for (&i, a) in short.iter().zip(&batched) {
                let err = max_abs(a, &single[i]);
                if err > 1e-6 {
                    return Err(Error::invalid(
                        "batched",
                        format!("batch {batch_size}, sentence {i}: differs by {err:.2e}"),
                    ));
                }
            }
        }
        Ok(())
    });
}

/// The opt-in f16 encoder (f16 weights and activations, f32 accumulation; tensor cores where
/// the adapter has them) keeps every embedding within 1e-3 of sentence-transformers' f32
/// one: the bound the f16 path promises. The sentences of at most 64 tokens, in one batch.
#[test]
fn f16_embeddings_stay_within_1e3_of_the_f32_reference() {
    on_every_adapter("minilm_f16", |ctx| {
        if !ctx.has_f16() {
            return Ok(());
        }
        let m = model_as(ctx, DType::F16)?;
        let short: Vec<&Value> = sentences()
            .iter()
            .filter(|s| s["num_tokens"].as_u64().unwrap() <= 64)
            .collect();
        let texts: Vec<&str> = short.iter().map(|s| s["text"].as_str().unwrap()).collect();
        let got =
            block(m.embed(ctx, &texts, texts.len())).map_err(|e| Error::Gpu(e.to_string()))?;
        for (s, got) in short.iter().zip(&got) {
            let err = max_abs(got, &floats(&s["embedding"]));
            if err > 1e-3 {
                return Err(Error::invalid(
                    "f16 embedding",
                    format!("sentence {}: max |error| {err:.2e} (≤ 1e-3)", s["index"]),
                ));
            }
        }
        Ok(())
    });
}

#[test]
fn hidden_states_match_layer_by_layer() {
    on_every_adapter("minilm_hidden_states", |ctx| {
        let m = model(ctx)?;
        for s in &sentences()[..3] {
            let ids = nn(m.tokenize(s["text"].as_str().unwrap()))?;
            let encoded = nn(m.bert().forward(ctx, &nn(Batch::new(&[ids], 0))?, true))?;
            let mut pairs = vec![(
                encoded.last.clone(),
                matrix(&s["last_hidden_state"]),
                "last".to_string(),
            )];
            if let Some(layers) = s["hidden_states"].as_array() {
                assert_eq!(
                    layers.len(),
                    encoded.hidden.len(),
                    "embedding output + one per layer"
                );
                for (l, (got, want)) in encoded.hidden.iter().zip(layers).enumerate() {
                    pairs.push((got.clone(), matrix(want), format!("hidden state {l}")));
                }
            }
            for (tensor, want, what) in pairs {
                let got = block(tensor.to_vec::<f32>(ctx))?;
                let err = max_abs(&got, &want);
                if err > 1e-4 {
                    return Err(Error::invalid(
                        "bert",
                        format!(
                            "sentence {}, {what}: max |error| {err:.2e} > 1e-4",
                            s["index"]
                        ),
                    ));
                }
            }
        }
        Ok(())
    });
}

#[test]
fn the_performance_model_plans_exactly_the_dispatches_the_encoder_makes() {
    // A context of its own: a profile on a shared one would also catch other tests' work.
    on_every_adapter_with(
        "minilm_plan_matches_profile",
        |_| ridge::core::ContextOptions::default(),
        |ctx| {
            let m = model(ctx)?;
            let texts = ["Short.", "A slightly longer sentence here."];
            let ids: Vec<Vec<u32>> = texts.iter().map(|t| m.tokenize(t).unwrap()).collect();
            let batch = nn(Batch::new(&ids, 0))?;
            ctx.start_profiling();
            let pooled = nn(m.embed_batch(ctx, &batch))?;
            block(pooled.to_vec::<f32>(ctx))?;
            let profile = block(ctx.finish_profiling())?;
            let shape = ridge::model::TransformerShape::minilm_l6();
            // GEMMs split along K where this adapter's kernel does (two dispatches each).
            let splits = ridge::kernels::Gemm::planned_splits(ctx, ridge::core::DType::F32);
            let plan = ridge::model::transformer::encoder_ops_split(
                &shape,
                batch.batch,
                batch.seq,
                true,
                4,
                &splits,
            );
            let got: Vec<(&str, &str)> = profile
                .spans
                .iter()
                .map(|s| (s.scope.as_str(), s.name.as_str()))
                .collect();
            let want: Vec<(&str, &str)> = plan
                .iter()
                .map(|o| (o.scope.as_str(), o.name.as_str()))
                .collect();
            if got != want {
                return Err(Error::invalid(
                    "plan",
                    format!("profiled {got:?}\nplanned {want:?}"),
                ));
            }
            Ok(())
        },
    );
}
