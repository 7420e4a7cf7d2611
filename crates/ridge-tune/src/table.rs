//! Tuning tables: JSON files of measured (or heuristic) kernel variants per adapter family,
//! each entry stamped with a hash of its kernel's WGSL so that an edited kernel invalidates
//! it. Precedence: the user's table (measured on this very adapter) > the shipped table of
//! its family > the kernels' own heuristics.

use std::collections::BTreeMap;

use ridge_core::{DType, Fingerprint, Tuning, VariantParams};
use serde::{Deserialize, Serialize};

use crate::key;

/// Where an entry comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Measured by the autotuner on `device` on `date`.
    Measured {
        /// Adapter name.
        device: String,
        /// ISO date.
        date: String,
    },
    /// A vendor-guided default, not measured.
    Heuristic,
}

/// One table entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Op name (`gemm`, `layer_norm`, `rms_norm`, `softmax`).
    pub op: String,
    /// Shape bucket (see [`key::bucket`]).
    pub bucket: Vec<usize>,
    /// `f32` or `f16`.
    pub dtype: String,
    /// The variant's parameters.
    pub params: BTreeMap<String, u32>,
    /// First 16 hex digits of the SHA-256 of the kernel's WGSL when it was tuned; `*` for
    /// heuristic entries, which hold for any version of the kernel.
    pub shader_hash: String,
    /// Median time at the bucket's shape when measured, ms.
    #[serde(default)]
    pub ms: Option<f64>,
    /// The time, measured in the same run, of the choice that was in force before this entry
    /// (a shipped entry or the heuristic), ms: the autotuner writes an entry only when it is
    /// faster, and `ridge tune --show` flags an older entry that is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_ms: Option<f64>,
    /// Measured or heuristic.
    pub origin: Origin,
}

/// A tuning table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// Format version (1).
    pub version: u32,
    /// Adapter family (`llvmpipe`, `nvidia-hopper`, …).
    pub family: String,
    /// The exact adapter for user tables (shipped tables serve a whole family).
    #[serde(default)]
    pub fingerprint: Option<Fingerprint>,
    /// Entries.
    pub entries: Vec<Entry>,
}

/// Why a table (or some of its entries) was not used; reported as warnings.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TableWarning {
    /// The file is not a valid table.
    #[error("{source_name}: not a valid tuning table ({message}); using the fallback")]
    Corrupt {
        /// File or table name.
        source_name: String,
        /// Parser message.
        message: String,
    },
    /// The table was made on another adapter.
    #[error("{source_name}: made for {other}, not this adapter; ignored")]
    Foreign {
        /// File or table name.
        source_name: String,
        /// The other adapter.
        other: String,
    },
    /// Entries whose kernel source changed since they were tuned.
    #[error(
        "{source_name}: {count} entries are stale (their kernel changed since tuning) and are ignored"
    )]
    Stale {
        /// File or table name.
        source_name: String,
        /// How many.
        count: usize,
    },
}

/// SHA-256 (first 16 hex digits) of the WGSL that runs `op` with `params` (for GEMM the
/// tensor-core shader when `COOP` is 1, else the tiled one, and split-K's reduction when
/// `SPLITS` > 1), so that editing one kernel invalidates only its own entries.
pub fn shader_hash(op: &str, params: &BTreeMap<String, u32>) -> String {
    use sha2::{Digest, Sha256};
    let sources: Vec<&ridge_core::ShaderSource> = match op {
        "gemm" if params.get("COOP") == Some(&1) => vec![&ridge_kernels::shaders::GEMM_COOP],
        "gemm" if params.get("SPLITS").is_some_and(|&s| s > 1) => vec![
            &ridge_kernels::shaders::GEMM,
            &ridge_kernels::shaders::GEMM_REDUCE,
        ],
        "gemm" => vec![&ridge_kernels::shaders::GEMM],
        "layer_norm" | "rms_norm" => vec![&ridge_kernels::shaders::NORM],
        "softmax" => vec![&ridge_kernels::shaders::SOFTMAX],
        "attention" => vec![&ridge_kernels::shaders::ATTENTION_TILED],
        _ => vec![],
    };
    let mut h = Sha256::new();
    for s in sources {
        h.update(s.body.as_bytes());
    }
    h.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Table {
    /// An empty table.
    pub fn new(family: &str, fingerprint: Option<Fingerprint>) -> Self {
        Self {
            version: 1,
            family: family.into(),
            fingerprint,
            entries: Vec::new(),
        }
    }

    /// Parses a table, checking its version.
    pub fn parse(source_name: &str, json: &str) -> Result<Self, TableWarning> {
        let corrupt = |message: String| TableWarning::Corrupt {
            source_name: source_name.into(),
            message,
        };
        let t: Table = serde_json::from_str(json).map_err(|e| corrupt(e.to_string()))?;
        if t.version != 1 {
            return Err(corrupt(format!(
                "version {} (this Ridge reads 1)",
                t.version
            )));
        }
        Ok(t)
    }

    /// Keeps only entries whose kernel is unchanged; returns a warning if any were dropped.
    pub fn drop_stale(&mut self, source_name: &str) -> Option<TableWarning> {
        let before = self.entries.len();
        self.entries
            .retain(|e| e.shader_hash == "*" || e.shader_hash == shader_hash(&e.op, &e.params));
        let count = before - self.entries.len();
        (count > 0).then(|| TableWarning::Stale {
            source_name: source_name.into(),
            count,
        })
    }

    /// Inserts or replaces the entry for (op, bucket, dtype).
    pub fn insert(&mut self, entry: Entry) {
        self.entries
            .retain(|e| !(e.op == entry.op && e.bucket == entry.bucket && e.dtype == entry.dtype));
        self.entries.push(entry);
    }

    /// The entry for `op`/`shape`/`dtype`: same bucket, else the nearest bucket of the same
    /// op and dtype (log2 distance).
    pub fn lookup(&self, op: &str, shape: &[usize], dtype: DType) -> Option<&Entry> {
        let b = key::bucket(shape);
        let d = key::dtype_name(dtype);
        self.entries
            .iter()
            .filter(|e| e.op == op && e.dtype == d)
            .filter_map(|e| Some((key::distance(&e.bucket, &b)?, e)))
            .min_by(|x, y| x.0.total_cmp(&y.0))
            .map(|(_, e)| e)
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("tables serialise")
    }
}

/// The tables consulted for one adapter, in precedence order.
#[derive(Clone, Debug, Default)]
pub struct TableSet {
    /// (name, table), highest precedence first: the user's, then the shipped one.
    pub layers: Vec<(String, Table)>,
}

impl TableSet {
    /// Where the variant for a problem comes from: the name of the table that has it.
    pub fn find(&self, op: &str, shape: &[usize], dtype: DType) -> Option<(&str, &Entry)> {
        self.layers
            .iter()
            .find_map(|(name, t)| t.lookup(op, shape, dtype).map(|e| (name.as_str(), e)))
    }
}

impl Tuning for TableSet {
    fn variant(&self, op: &str, shape: &[usize], dtype: DType) -> Option<VariantParams> {
        self.find(op, shape, dtype).map(|(_, e)| e.params.clone())
    }
}
