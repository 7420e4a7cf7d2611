//! Reading `model.safetensors`: memory-mapped natively, from bytes in the browser; every
//! tensor checked for presence, dtype and shape before upload.

use std::path::Path;

use half::{bf16, f16};
use safetensors::{Dtype, SafeTensors};

use crate::error::{Error, Result};
use crate::file::FileBytes;

/// A safetensors file's bytes.
pub struct WeightsFile(FileBytes);

impl WeightsFile {
    /// Memory-maps `path`.
    ///
    /// Errors: [`Error::Io`] when it cannot be opened or mapped.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: &Path) -> Result<Self> {
        FileBytes::open(path).map(Self)
    }

    /// Wraps bytes already in memory (the browser fetches them); `path` names them in errors.
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Self {
        Self(FileBytes::from_bytes(path, bytes))
    }

    /// Parses the header.
    ///
    /// Errors: [`Error::Weights`] for a truncated or corrupt file.
    pub fn tensors(&self) -> Result<Weights<'_>> {
        let st = SafeTensors::deserialize(self.0.bytes()).map_err(|e| Error::Weights {
            path: self.0.path().into(),
            message: format!("not a valid safetensors file ({e})"),
        })?;
        Ok(Weights {
            st,
            path: self.0.path(),
            prefix: String::new(),
            used: Default::default(),
        })
    }
}

/// The tensors of a parsed safetensors file.
pub struct Weights<'a> {
    st: SafeTensors<'a>,
    path: &'a Path,
    prefix: String,
    /// The names read so far (for [`Weights::unused`]).
    used: std::cell::RefCell<std::collections::HashSet<String>>,
}

impl Weights<'_> {
    /// The weights file's path.
    pub fn path(&self) -> &Path {
        self.path
    }

    /// The file's tensors that no [`Weights::get`] has read, but for those matching one of
    /// `ignored` (name prefixes or suffixes a model is known to leave out, such as a pooler
    /// that sentence-transformers does not use), sorted.
    pub fn unused(&self, ignored: &[&str]) -> Vec<String> {
        let used = self.used.borrow();
        let mut names: Vec<String> = self
            .st
            .names()
            .into_iter()
            .filter(|n| !used.contains(*n))
            .filter(|n| {
                let bare = n.strip_prefix(self.prefix.as_str()).unwrap_or(n);
                !ignored
                    .iter()
                    .any(|i| bare.starts_with(i) || bare.ends_with(i))
            })
            .map(str::to_string)
            .collect();
        names.sort();
        names
    }

    /// Uses `prefix` before every name when the file has `prefix + probe` but not `probe`
    /// (checkpoints saved from `BertForX` prefix the encoder with `bert.`).
    pub fn detect_prefix(&mut self, probe: &str, prefix: &str) {
        let names = self.st.names();
        if !names.contains(&probe) && names.contains(&format!("{prefix}{probe}").as_str()) {
            self.prefix = prefix.to_string();
        }
    }

    /// The tensor `name` as f32 (converted from f16 or bf16), checked against `shape`.
    ///
    /// Errors: [`Error::Weights`] naming the tensor when it is missing, has another shape,
    /// holds a dtype other than F32, F16 or BF16, or holds NaN or an infinity.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let full = format!("{}{name}", self.prefix);
        self.used.borrow_mut().insert(full.clone());
        let err = |message: String| Error::Weights {
            path: self.path.into(),
            message,
        };
        let view = self
            .st
            .tensor(&full)
            .map_err(|_| err(format!("missing tensor {full:?}")))?;
        if view.shape() != shape {
            return Err(err(format!(
                "tensor {full:?} has shape {:?}, expected {shape:?}",
                view.shape()
            )));
        }
        let data = view.data();
        let values = match view.dtype() {
            Dtype::F32 => bytemuck_f32(data),
            Dtype::F16 => data
                .chunks_exact(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Dtype::BF16 => data
                .chunks_exact(2)
                .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => {
                return Err(err(format!(
                    "tensor {full:?} has dtype {other:?}; Ridge reads F32, F16 and BF16"
                )));
            }
        };
        // A corrupt file (a flipped exponent bit) would carry NaN or ∞ into every output.
        if let Some(at) = values.iter().position(|v| !v.is_finite()) {
            return Err(err(format!(
                "tensor {full:?} holds a non-finite value ({}) at element {at}: the file is corrupt",
                values[at]
            )));
        }
        Ok(values)
    }
}

fn bytemuck_f32(data: &[u8]) -> Vec<f32> {
    data.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// A safetensors file of seeded random weights for `config`, under Hugging Face `BertModel`
/// names: for timing the encoder where the real weights cannot travel (the GPU machine takes
/// at most 64 MiB). Values are uniform in ±0.05 (±1 for layer-norm scales around 1), small
/// enough that activations stay in range.
pub fn random_bert_safetensors(config: &crate::config::BertConfig, seed: u64) -> Vec<u8> {
    use rand::{RngExt, SeedableRng, rngs::StdRng};
    let mut rng = StdRng::seed_from_u64(seed);
    let (h, i) = (config.hidden_size, config.intermediate_size);
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    let mut add = |name: String, shape: Vec<usize>, center: f32| {
        let n: usize = shape.iter().product();
        let bytes = (0..n)
            .flat_map(|_| (center + rng.random_range(-0.05f32..0.05)).to_le_bytes())
            .collect();
        tensors.push((name, shape, bytes));
    };
    add(
        "embeddings.word_embeddings.weight".into(),
        vec![config.vocab_size, h],
        0.0,
    );
    add(
        "embeddings.position_embeddings.weight".into(),
        vec![config.max_position_embeddings, h],
        0.0,
    );
    add(
        "embeddings.token_type_embeddings.weight".into(),
        vec![config.type_vocab_size, h],
        0.0,
    );
    let norm = |add: &mut dyn FnMut(String, Vec<usize>, f32), p: &str| {
        add(format!("{p}.weight"), vec![h], 1.0);
        add(format!("{p}.bias"), vec![h], 0.0);
    };
    norm(&mut add, "embeddings.LayerNorm");
    for l in 0..config.num_hidden_layers {
        let p = format!("encoder.layer.{l}");
        for part in ["query", "key", "value"] {
            add(format!("{p}.attention.self.{part}.weight"), vec![h, h], 0.0);
            add(format!("{p}.attention.self.{part}.bias"), vec![h], 0.0);
        }
        add(
            format!("{p}.attention.output.dense.weight"),
            vec![h, h],
            0.0,
        );
        add(format!("{p}.attention.output.dense.bias"), vec![h], 0.0);
        norm(&mut add, &format!("{p}.attention.output.LayerNorm"));
        add(format!("{p}.intermediate.dense.weight"), vec![i, h], 0.0);
        add(format!("{p}.intermediate.dense.bias"), vec![i], 0.0);
        add(format!("{p}.output.dense.weight"), vec![h, i], 0.0);
        add(format!("{p}.output.dense.bias"), vec![h], 0.0);
        norm(&mut add, &format!("{p}.output.LayerNorm"));
    }
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(n, s, b)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(Dtype::F32, s.clone(), b)
                    .expect("consistent sizes"),
            )
        })
        .collect();
    safetensors::serialize(views, None).expect("serialisable")
}
