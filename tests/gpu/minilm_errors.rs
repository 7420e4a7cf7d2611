//! Bad model folders and bad input: a clear error naming the file and the problem, never a
//! panic or a wrong answer.

use std::path::Path;

use ridge::core::{Context, Error as GpuError, Result};
use ridge::nn::{Error, ModelFiles, SentenceEmbedder, fetch};
use safetensors::{Dtype, tensor::TensorView};

use crate::harness::*;

const SMALL_FILES: [&str; 6] = [
    "config.json",
    "modules.json",
    "sentence_bert_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "1_Pooling/config.json",
];

/// A copy of the cached model folder (the weights are linked, not copied).
fn model_copy() -> tempfile::TempDir {
    let src = fetch::minilm_dir();
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("1_Pooling")).unwrap();
    for f in SMALL_FILES {
        std::fs::copy(src.join(f), dir.path().join(f))
            .unwrap_or_else(|e| panic!("{f}: {e} (run cargo xtask fetch-model)"));
    }
    std::os::unix::fs::symlink(
        src.join("model.safetensors"),
        dir.path().join("model.safetensors"),
    )
    .unwrap();
    dir
}

fn edit_json(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(path, v.to_string()).unwrap();
}

/// Loads `dir` and checks that the error is `kind` and its message names `file` and says `says`.
fn expect_load_error(
    ctx: &Context,
    dir: &Path,
    file: &str,
    says: &str,
    kind: fn(&Error) -> bool,
) -> Result<()> {
    match SentenceEmbedder::load(ctx, dir) {
        Ok(_) => Err(GpuError::invalid(
            "load",
            format!("loaded, but {file} should have been refused ({says})"),
        )),
        Err(e) => {
            let msg = e.to_string();
            if kind(&e) && msg.contains(file) && msg.contains(says) {
                Ok(())
            } else {
                Err(GpuError::invalid(
                    "load",
                    format!("wrong error for {file}/{says}: {msg}"),
                ))
            }
        }
    }
}

fn replace_weights(dir: &Path, bytes: &[u8]) {
    let path = dir.join("model.safetensors");
    std::fs::remove_file(&path).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The real weights with one tensor changed by `edit` (None removes it).
fn edited_weights(
    dir: &Path,
    name: &str,
    edit: impl Fn(&TensorView) -> Option<(Dtype, Vec<usize>, Vec<u8>)>,
) {
    let bytes = std::fs::read(fetch::minilm_dir().join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut owned: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (n, view) in st.tensors() {
        if n == name {
            if let Some((dtype, shape, data)) = edit(&view) {
                owned.push((n, dtype, shape, data));
            }
        } else {
            owned.push((n, view.dtype(), view.shape().to_vec(), view.data().to_vec()));
        }
    }
    let views: Vec<(String, TensorView)> = owned
        .iter()
        .map(|(n, d, s, data)| (n.clone(), TensorView::new(*d, s.clone(), data).unwrap()))
        .collect();
    replace_weights(dir, &safetensors::serialize(views, None).unwrap());
}

#[test]
fn broken_model_folders_are_refused_with_the_file_and_the_problem() {
    on_every_adapter("minilm_bad_folders", |ctx| {
        let io = |e: &Error| matches!(e, Error::Io { .. });
        let config = |e: &Error| matches!(e, Error::Config { .. });
        let unsupported = |e: &Error| matches!(e, Error::Unsupported { .. });
        let weights = |e: &Error| matches!(e, Error::Weights { .. });

        let empty = tempfile::tempdir().unwrap();
        expect_load_error(ctx, empty.path(), "config.json", "file not found", io)?;

        // The browser's path: the same files, already in memory, one missing.
        let dir = fetch::minilm_dir();
        let mut files = ModelFiles {
            base: "http://127.0.0.1/model".into(),
            files: Default::default(),
        };
        for f in SMALL_FILES.iter().chain(&["model.safetensors"]) {
            if *f != "1_Pooling/config.json" {
                files
                    .files
                    .insert(f.to_string(), std::fs::read(dir.join(f)).unwrap());
            }
        }
        match SentenceEmbedder::from_source(ctx, &files) {
            Err(e @ Error::Io { .. })
                if e.to_string()
                    == "http://127.0.0.1/model/1_Pooling/config.json: file not found" => {}
            other => {
                return Err(GpuError::invalid(
                    "load",
                    format!(
                        "in-memory files without the pooling config: {:?}",
                        other.err()
                    ),
                ));
            }
        }

        let d = model_copy();
        std::fs::write(d.path().join("config.json"), "{ not json").unwrap();
        expect_load_error(ctx, d.path(), "config.json", "key must be a string", config)?;

        let d = model_copy();
        edit_json(&d.path().join("config.json"), |v| {
            v["model_type"] = "gpt2".into()
        });
        expect_load_error(ctx, d.path(), "config.json", "gpt2", unsupported)?;

        // A configuration with fewer layers than the weights: half the model would run.
        let d = model_copy();
        edit_json(&d.path().join("config.json"), |v| {
            v["num_hidden_layers"] = 3.into()
        });
        expect_load_error(
            ctx,
            d.path(),
            "model.safetensors",
            "48 tensors that config.json's model does not use",
            weights,
        )?;

        let d = model_copy();
        edit_json(&d.path().join("config.json"), |v| {
            v["hidden_act"] = "relu".into()
        });
        expect_load_error(ctx, d.path(), "config.json", "relu", unsupported)?;

        let d = model_copy();
        edit_json(&d.path().join("config.json"), |v| {
            v["num_attention_heads"] = 7.into()
        });
        expect_load_error(ctx, d.path(), "config.json", "not a multiple", config)?;

        let d = model_copy();
        edit_json(&d.path().join("1_Pooling/config.json"), |v| {
            v["pooling_mode_cls_token"] = true.into();
            v["pooling_mode_mean_tokens"] = false.into();
        });
        expect_load_error(
            ctx,
            d.path(),
            "1_Pooling/config.json",
            "pooling",
            unsupported,
        )?;

        let d = model_copy();
        edit_json(&d.path().join("modules.json"), |v| {
            v.as_array_mut().unwrap().push(serde_json::json!({"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}));
        });
        expect_load_error(ctx, d.path(), "modules.json", "Dense", unsupported)?;

        let d = model_copy();
        std::fs::write(d.path().join("tokenizer.json"), "{}").unwrap();
        expect_load_error(ctx, d.path(), "tokenizer.json", "", |e| {
            matches!(e, Error::Tokenizer { .. })
        })?;

        let d = model_copy();
        let real = std::fs::read(fetch::minilm_dir().join("model.safetensors")).unwrap();
        replace_weights(d.path(), &real[..real.len() / 2]);
        expect_load_error(
            ctx,
            d.path(),
            "model.safetensors",
            "not a valid safetensors",
            weights,
        )?;
        replace_weights(d.path(), &real[..5]);
        expect_load_error(
            ctx,
            d.path(),
            "model.safetensors",
            "not a valid safetensors",
            weights,
        )?;
        let mut garbage = real[..4096].to_vec();
        garbage[8..40].fill(b'#');
        replace_weights(d.path(), &garbage);
        expect_load_error(
            ctx,
            d.path(),
            "model.safetensors",
            "not a valid safetensors",
            weights,
        )?;

        let d = model_copy();
        let name = "encoder.layer.3.attention.self.key.weight";
        edited_weights(d.path(), name, |_| None);
        expect_load_error(
            ctx,
            d.path(),
            "model.safetensors",
            &format!("missing tensor \"{name}\""),
            weights,
        )?;
        edited_weights(d.path(), name, |v| {
            Some((
                v.dtype(),
                vec![384, 383],
                v.data()[..384 * 383 * 4].to_vec(),
            ))
        });
        expect_load_error(
            ctx,
            d.path(),
            "model.safetensors",
            "shape [384, 383]",
            weights,
        )?;
        edited_weights(d.path(), name, |v| {
            Some((Dtype::I32, v.shape().to_vec(), v.data().to_vec()))
        });
        expect_load_error(ctx, d.path(), "model.safetensors", "dtype I32", weights)?;
        // One weight turned NaN (a flipped exponent): refused at load, never a NaN embedding.
        edited_weights(d.path(), name, |v| {
            let mut data = v.data().to_vec();
            data[4000..4004].copy_from_slice(&f32::NAN.to_le_bytes());
            Some((v.dtype(), v.shape().to_vec(), data))
        });
        expect_load_error(
            ctx,
            d.path(),
            "model.safetensors",
            "non-finite value (NaN) at element 1000",
            weights,
        )
    });
}

#[test]
fn bad_input_is_refused_and_long_text_is_truncated() {
    on_every_adapter("minilm_bad_input", |ctx| {
        let m = super::minilm::model(ctx)?;
        let input = |r: ridge::nn::Result<Vec<Vec<f32>>>| match r {
            Err(Error::Input(_)) => Ok(()),
            other => Err(GpuError::invalid(
                "input",
                format!("expected an input error, got {:?}", other.map(|v| v.len())),
            )),
        };
        input(block(m.embed(ctx, &[], 8)))?;
        input(block(m.embed(ctx, &["a"], 0)))?;
        input(block(m.embed(ctx, &["a"], 129)))?;
        // Longer than max_seq_length (256): the first 254 wordpieces, then [SEP] (id 102).
        let long = "word ".repeat(1000);
        let ids = m
            .tokenize(&long)
            .map_err(|e| GpuError::Gpu(e.to_string()))?;
        assert_eq!((ids.len(), ids[0], ids[255]), (256, 101, 102));
        Ok(())
    });
}

/// A batch the adapter cannot hold is split, not refused after the model has loaded: 33 texts
/// of 256 tokens at batch 33 on a device whose storage bindings hold 8,192 tokens of the
/// widest activation (48 MiB) embed, and the text left for the second batch embeds as it does
/// alone.
#[test]
fn batches_past_the_binding_limit_are_split() {
    let texts: Vec<String> = (0..33)
        .map(|i| format!("{i} ") + &"the quick brown fox jumps over the lazy dog ".repeat(40))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    on_every_adapter_with(
        "minilm_split_batches",
        |a| with_limits(a, |l| l.max_storage_buffer_binding_size = 48 << 20),
        |ctx| {
            let nn = |e: Error| GpuError::invalid("embed", e.to_string());
            let m = super::minilm::model(ctx)?;
            if m.max_batch_tokens(ctx) >= 33 * 256 {
                return Err(GpuError::invalid(
                    "limits",
                    "the lowered limit holds the whole batch",
                ));
            }
            let got = block(m.embed(ctx, &refs, 33)).map_err(nn)?;
            let alone = block(m.embed(ctx, &refs[32..], 1)).map_err(nn)?;
            let worst = got[32]
                .iter()
                .zip(&alone[0])
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            if got.len() != 33 || worst > 1e-6 {
                return Err(GpuError::invalid(
                    "split",
                    format!("{} embeddings, differs by {worst}", got.len()),
                ));
            }
            Ok(())
        },
    );
}
