//! The `ridge bench --json` report: what was measured on one adapter, next to what the model
//! predicted. The dashboard loads these from several machines to compare them.

use serde::{Deserialize, Serialize};

use crate::hardware::GpuSpec;
use crate::roofline::{Bound, Ceilings};

mod merge;

/// One bandwidth-curve point.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Bytes copied.
    pub bytes: u64,
    /// GB/s (read + write).
    pub gbps: f64,
}

/// Ceilings measured on the adapter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Copy bandwidth by size.
    pub bandwidth_curve: Vec<CurvePoint>,
    /// Device-memory bandwidth (largest copy), GB/s.
    pub bandwidth_gbps: f64,
    /// f32 FMA peak, TFLOP/s.
    pub f32_tflops: f64,
    /// f16 FMA peak, TFLOP/s.
    pub f16_tflops: Option<f64>,
    /// f16 × f16 → f32 cooperative-matrix (tensor-core) multiply-add peak, TFLOP/s, where
    /// the adapter offers them (reports from before this field read as `None`).
    #[serde(default)]
    pub tensor_tflops: Option<f64>,
    /// GPU time of a trivial dispatch, µs (added to every prediction).
    pub dispatch_overhead_us: Option<f64>,
    /// Host wall-clock time per dispatch in a stream, µs.
    pub host_overhead_us: Option<f64>,
    /// GPU time per dispatch in a stream of dependent trivial dispatches recorded ahead of
    /// the GPU (queued behind a blocker), µs: the floor under each dispatch of a pipelined
    /// decode, below [`Measured::dispatch_overhead_us`], which a lone timestamped dispatch
    /// pays (reports from before this field read as `None`).
    #[serde(default)]
    pub stream_dispatch_us: Option<f64>,
    /// Where the adapter's one-row quantized products may round `x` to 8 bits (a GPU whose
    /// WGSL has packed integer dot products: `ridge_kernels::qmatmul::MatvecShape::int8_storage`),
    /// its workgroup memory in bytes, which decides which products do; `None` where none do
    /// (CPU drivers, browsers without the feature) or the report predates the field.
    #[serde(default)]
    pub int8_storage_bytes: Option<u32>,
    /// Whether the adapter's one-row quantized products take a row of W a lane (a CPU
    /// driver: `ridge_kernels::qmatmul::MatvecShape::LANE_ROWS`); reports from before the
    /// field read `false`, the GPU shapes their rows were swept with.
    #[serde(default)]
    pub lane_rows: bool,
    /// Whether the adapter's products of 2 to 32 rows of x (short prompts) take a row of W a
    /// lane (Mesa's llvmpipe: `ridge_kernels::qmatmul::MatvecShape::PROMPT_LANE_ROWS`);
    /// reports from before the field read `false`, the GPU shape their rows were swept with.
    #[serde(default)]
    pub prompt_lane_rows: bool,
}

impl Measured {
    /// Roofline ceilings at f32 or f16 (f16 falls back to f32 without `shader-f16`).
    pub fn ceilings(&self, f16: bool) -> Ceilings {
        let tflops = if f16 {
            self.f16_tflops.unwrap_or(self.f32_tflops)
        } else {
            self.f32_tflops
        };
        self.roof(tflops, "measured by ridge bench")
    }

    /// Roofline ceilings of a kernel on the tensor cores (f16 inputs, f32 accumulation): the
    /// measured cooperative-matrix peak and the measured bandwidth; `None` where the adapter
    /// has none (or the report predates the measurement).
    pub fn tensor_ceilings(&self) -> Option<Ceilings> {
        self.tensor_tflops
            .map(|tflops| self.roof(tflops, "measured by ridge bench (tensor cores)"))
    }

    /// The roof of a kernel in f16 or f32 storage, on the tensor cores or not: the tensor
    /// cores' where `tensor_cores` and their peak was measured, else [`Measured::ceilings`].
    pub fn ceilings_for(&self, f16: bool, tensor_cores: bool) -> Ceilings {
        self.tensor_ceilings()
            .filter(|_| tensor_cores)
            .unwrap_or_else(|| self.ceilings(f16))
    }

    /// The roof a launch of `op` in f16 or f32 storage is held against, and its name: the
    /// tensor cores' for an f16 op of [`tensor_core_op`] where their peak was measured
    /// (Ridge runs those on them there), else the storage type's FMA peak.
    pub fn roof_for(&self, op: &str, f16: bool) -> (Ceilings, &'static str) {
        let tensor = tensor_core_op(op) && f16 && self.tensor_tflops.is_some();
        let name = match (tensor, f16 && self.f16_tflops.is_some()) {
            (true, _) => "measured tensor cores",
            (false, true) => "measured f16 FMA",
            (false, false) => "measured f32 FMA",
        };
        (self.ceilings_for(f16, tensor), name)
    }

    /// A compute roof of `tflops` over the measured bandwidth and dispatch overhead.
    fn roof(&self, tflops: f64, source: &str) -> Ceilings {
        Ceilings::new(
            tflops,
            self.bandwidth_gbps,
            self.dispatch_overhead_us.unwrap_or(0.0) * 1e-6,
            crate::roofline::CeilingSource::Measured(source.into()),
        )
    }
}

/// Whether Ridge runs `op` on cooperative matrices (tensor cores) in f16 where an adapter has
/// them: the GEMM and the Linear layers' products (`linear` with any fused epilogue), a
/// prompt's quantized products (`qmatmul` with any fused prologue or epilogue) and its
/// attention over the KV cache (`kv_attention_prefill`).
pub fn tensor_core_op(op: &str) -> bool {
    op == "gemm"
        || op.starts_with("linear")
        || op.contains("qmatmul")
        || op == "kv_attention_prefill"
}

/// The colour (RGB) each op kind of `ridge bench` is drawn in, in the sweep's order: the
/// roofline plot (`ridge bench --svg`) and the dashboard's plots share it, so that an op has
/// one colour everywhere. Tableau 10 (told apart in print and by most colour-blind readers)
/// with the GEMM's blue followed by three more blues for the encoder's Linear layers, then a
/// brown and olive, then for the decoder's kernels the darker and lighter members of Tableau
/// 20, a navy, a purple and a green; no black or white, so that every colour reads on a light
/// page and on the dashboard's dark one. Yellow is moved away from orange so that no two ops
/// of the same kind (layer_norm and add) get look-alike colours.
pub const OP_COLOURS: [(&str, [u8; 3]); 35] = [
    ("gemm", [0x4e, 0x79, 0xa7]),
    ("linear", [0x17, 0xbe, 0xcf]),
    ("linear_residual", [0x2e, 0x5e, 0x8e]),
    ("linear_gelu", [0x6b, 0xae, 0xd6]),
    ("layer_norm", [0xf2, 0x8e, 0x2b]),
    ("rms_norm", [0xe1, 0x57, 0x59]),
    ("softmax", [0x76, 0xb7, 0xb2]),
    ("gelu", [0x59, 0xa1, 0x4f]),
    ("add", [0x79, 0x70, 0x6e]),
    ("transpose", [0xb0, 0x7a, 0xa1]),
    ("nchw_to_nhwc", [0xff, 0x9d, 0xa7]),
    ("nhwc_to_nchw", [0x9c, 0x75, 0x5f]),
    ("attention", [0xed, 0xc9, 0x48]),
    ("sparse_attention", [0x8c, 0x2d, 0x04]),
    ("qmatvec", [0x80, 0x80, 0x00]),
    ("rms_qmatvec", [0xa0, 0xcb, 0xe8]),
    ("rms_qmatvec_swiglu", [0xff, 0xbe, 0x7d]),
    ("rms_qmatvec_rope", [0x8c, 0xd1, 0x7d]),
    ("qmatmul", [0xb6, 0x99, 0x2d]),
    ("rms_qmatmul_swiglu", [0x49, 0x98, 0x94]),
    ("rms_qmatmul_rope", [0xd3, 0x72, 0x95]),
    ("kv_attention", [0xd4, 0xa6, 0xc8]),
    ("kv_attention_prefill", [0x1f, 0x2a, 0x6b]),
    ("kv_attention_split", [0x5a, 0x2d, 0x82]),
    ("attention_causal", [0x00, 0x80, 0x60]),
    ("qmatvec_int8", [0x4d, 0x4d, 0x00]),
    ("rms_qmatvec_int8", [0x5b, 0x8d, 0xb8]),
    ("rms_qmatvec_swiglu_int8", [0xd9, 0x8c, 0x3a]),
    ("rms_qmatvec_rope_int8", [0x4f, 0x9a, 0x44]),
    ("qmatvec_rows", [0xc0, 0xc0, 0x40]),
    ("rms_qmatvec_swiglu_rows", [0xff, 0xd9, 0xb0]),
    ("rms_qmatvec_rope_rows", [0xb5, 0xe3, 0xb0]),
    ("argmax", [0x3a, 0x3a, 0x3a]),
    ("decode_attention", [0xe3, 0x4a, 0x33]),
    ("decode_attention_split", [0x7a, 0x1f, 0x14]),
];

/// The colour of op kind `op` ([`OP_COLOURS`]); `None` for a name that is no sweep kind.
pub fn op_colour(op: &str) -> Option<[u8; 3]> {
    OP_COLOURS.iter().find(|(o, _)| *o == op).map(|(_, c)| *c)
}

/// One measured case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Op name.
    pub op: String,
    /// Problem shape.
    pub shape: Vec<usize>,
    /// `f32` or `f16`.
    pub dtype: String,
    /// FLOPs of one launch.
    pub flops: f64,
    /// Fewest bytes of one launch.
    pub bytes: f64,
    /// Reduction depth of one launch ([`crate::OpCost::depth`]; 0 in reports that predate it).
    #[serde(default)]
    pub depth: f64,
    /// FLOPs of the whole tiles launched ([`crate::OpCost::tiled_flops`]; absent, 0, where the
    /// sweep did not know the kernel's tiling, and in reports that predate it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tiled_flops: f64,
    /// Workgroups launched ([`crate::OpCost::workgroups`]; absent, 0, where the cost does not
    /// state them, and in reports that predate it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub workgroups: f64,
    /// Invocations launched ([`crate::OpCost::invocations`]; absent, 0, where the cost does
    /// not state them, and in reports that predate it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub invocations: f64,
    /// Median measured time, ms (`None`: could not be timed).
    pub measured_ms: Option<f64>,
    /// Predicted from the spec table, ms.
    pub predicted_spec_ms: Option<f64>,
    /// Predicted from the measured ceilings, ms.
    pub predicted_measured_ms: f64,
    /// Which roof applies (measured ceilings).
    pub bound: Bound,
    /// Share of the measured roofline reached, 0–1.
    pub roofline_fraction: Option<f64>,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

impl Row {
    /// The launch's cost.
    pub fn cost(&self) -> crate::OpCost {
        crate::OpCost {
            tiled_flops: self.tiled_flops,
            workgroups: self.workgroups,
            invocations: self.invocations,
            ..crate::OpCost::new(self.flops, self.bytes).with_depth(self.depth)
        }
    }
    /// FLOP/byte.
    pub fn intensity(&self) -> f64 {
        self.cost().intensity()
    }
    /// Achieved GFLOP/s.
    pub fn gflops(&self) -> Option<f64> {
        self.measured_ms.and_then(|ms| self.cost().gflops(ms))
    }
    /// Achieved GB/s.
    pub fn gbps(&self) -> Option<f64> {
        self.measured_ms.and_then(|ms| self.cost().gbps(ms))
    }
}

/// Model accuracy: median |log2(measured ÷ predicted)| (0 perfect, 0.32 = within 1.25×).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Accuracy {
    /// Over every case.
    pub all: Option<f64>,
    /// Over memory-bound cases.
    pub memory: Option<f64>,
    /// Over compute-bound cases.
    pub compute: Option<f64>,
}

impl Accuracy {
    /// Accuracy of `predicted(row)` against the measured times.
    pub fn of(rows: &[Row], predicted: impl Fn(&Row) -> Option<f64>) -> Self {
        let pairs = |bound: Option<Bound>| -> Vec<(f64, f64)> {
            rows.iter()
                .filter(|r| bound.is_none_or(|b| r.bound == b))
                .filter_map(|r| Some((r.measured_ms?, predicted(r)?)))
                .collect()
        };
        let m = |b| crate::roofline::median_abs_log2_error(&pairs(b));
        Self {
            all: m(None),
            memory: m(Some(Bound::Memory)),
            compute: m(Some(Bound::Compute)),
        }
    }
}

/// A whole `ridge bench` report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// Ridge version that wrote it.
    pub ridge_version: String,
    /// Adapter name.
    pub adapter: String,
    /// Backend.
    pub backend: String,
    /// PCI vendor id.
    pub vendor_id: u32,
    /// PCI device id.
    pub device_id: u32,
    /// Driver.
    pub driver: String,
    /// How times were measured.
    pub timing: String,
    /// The spec-table row matched, if any.
    pub spec: Option<GpuSpec>,
    /// Ceilings measured on the adapter.
    pub measured: Measured,
    /// f32 roofline from the measured ceilings.
    pub measured_ceilings: Ceilings,
    /// Every case.
    pub rows: Vec<Row>,
    /// Accuracy of the predictions from measured ceilings.
    pub accuracy_measured: Accuracy,
    /// Accuracy of the predictions from the spec table.
    pub accuracy_spec: Accuracy,
    /// Per-op terms fitted on these rows and their errors, as `ridge bench` printed them
    /// (`None` in reports from before the fit). Derived data: [`BenchReport::parse`] replaces
    /// them with its rows' fit, so that terms and rows cannot disagree.
    #[serde(default)]
    pub calibration: Option<crate::calibrate::Calibration>,
}

/// Why a text is not a usable `ridge bench --json` report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Not JSON of a report's shape (a truncated file, not JSON at all).
    #[error("not a `ridge bench --json` report ({0})")]
    Json(#[from] serde_json::Error),
    /// A field of the wrong type, or missing, at `path` (`measured.lane_rows`).
    #[error("not a `ridge bench --json` report ({path}: {source})")]
    Field {
        /// The field's path.
        path: String,
        /// What serde found there.
        source: serde_json::Error,
    },
    /// A row's FLOPs, bytes, depth or measured time that no launch can have.
    #[error(
        "row {row} ({op} {shape:?} {dtype}): {what} is {value}, not what a launch can measure (finite and bounded; bytes and times above 0)"
    )]
    Value {
        /// Index of the row.
        row: usize,
        /// Its op.
        op: String,
        /// Its shape.
        shape: Vec<usize>,
        /// Its storage type.
        dtype: String,
        /// The field.
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// A measured ceiling that no adapter can have.
    #[error("measured.{what} is {value}: not a ceiling an adapter can have (finite, above 0)")]
    Ceiling {
        /// The field of [`Measured`].
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// A sweep launching the matrix-vector products as the report's rows were not, merged
    /// without every kind that launch rule governs ([`BenchReport::with_kinds_of`]).
    #[error(
        "the sweep's measured.{field} differs from the report's: sweep {kinds} again with it (the report's rows of them were launched the other way)"
    )]
    StaleKinds {
        /// The launch rule's field of [`Measured`].
        field: &'static str,
        /// The report's kinds it governs that the sweep lacks, comma separated.
        kinds: String,
    },
    /// Rows of one adapter merged into another's report ([`BenchReport::with_kinds_of`]).
    #[error("a sweep of {sweep} cannot replace rows of a report of {report}")]
    OtherAdapter {
        /// The report's adapter, backend and driver.
        report: String,
        /// The sweep's.
        sweep: String,
    },
}

/// Whether a report's number `v` is one no measurement gives: not finite, above `max`, below
/// 0, or 0 where `zero_ok` is false.
fn impossible(v: f64, zero_ok: bool, max: f64) -> bool {
    !(v.is_finite() && v <= max && (v > 0.0 || (zero_ok && v == 0.0)))
}

impl BenchReport {
    /// A report from the bytes of a `ridge bench --json` file, its measured ceilings checked
    /// (finite, above 0; overheads 0 or more), every row's FLOPs, bytes, reduction depth,
    /// tiled FLOPs and measured time checked (finite, bounded; bytes and times above 0), and
    /// its per-op terms
    /// ([`BenchReport::calibration`]) fitted again on its rows: whatever terms the file
    /// carries, an older fit's or a hand-edited one's, are replaced.
    ///
    /// Errors: [`ReportError::Json`] for bytes that are not a report's text (not UTF-8, not
    /// JSON, truncated), [`ReportError::Field`] for a field missing or mistyped (named by its
    /// path), [`ReportError::Ceiling`] for an impossible ceiling, [`ReportError::Value`] for
    /// the first row holding an impossible number.
    pub fn parse(bytes: &[u8]) -> Result<Self, ReportError> {
        // The path of a mistyped or missing field (`measured.lane_rows`), not only where in
        // the text it failed (a report minified on one line said "column 841").
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let mut report: Self = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            // Only a value of the wrong shape has a field to name; a cut or malformed text
            // is said where it breaks.
            let path = e.path().to_string();
            let data = e.inner().classify() == serde_json::error::Category::Data;
            if data && path != "." {
                ReportError::Field {
                    path,
                    source: e.into_inner(),
                }
            } else {
                ReportError::Json(e.into_inner())
            }
        })?;
        de.end()?;
        // A ceiling a GPU can have: finite, above 0 (overheads: 0 or more), and below a bound
        // no adapter approaches (10⁶ GB/s, 10⁶ TFLOP/s, a second per dispatch).
        let m = &report.measured;
        let ceilings = [
            ("bandwidth_gbps", Some(m.bandwidth_gbps), false, 1e6),
            ("f32_tflops", Some(m.f32_tflops), false, 1e6),
            ("f16_tflops", m.f16_tflops, false, 1e6),
            ("tensor_tflops", m.tensor_tflops, false, 1e6),
            ("dispatch_overhead_us", m.dispatch_overhead_us, true, 1e6),
            ("host_overhead_us", m.host_overhead_us, true, 1e6),
            ("stream_dispatch_us", m.stream_dispatch_us, true, 1e6),
        ];
        for (what, value, zero_ok, max) in ceilings {
            if let Some(v) = value.filter(|&v| impossible(v, zero_ok, max)) {
                return Err(ReportError::Ceiling { what, value: v });
            }
        }
        for (i, r) in report.rows.iter().enumerate() {
            // Counts below 10²⁴ (a 4096³ GEMM is 1.4·10¹¹ FLOPs), every launch moving bytes,
            // a measured time above 0 and below 10⁷ ms (hours: no launch's).
            let fields = [
                ("FLOPs", Some(r.flops), true, 1e24),
                ("bytes", Some(r.bytes), false, 1e24),
                ("depth", Some(r.depth), true, 1e24),
                ("tiled FLOPs", Some(r.tiled_flops), true, 1e24),
                ("workgroups", Some(r.workgroups), true, 1e24),
                ("invocations", Some(r.invocations), true, 1e24),
                ("measured_ms", r.measured_ms, false, 1e7),
            ];
            for (what, value, zero_ok, max) in fields {
                if let Some(v) = value.filter(|&v| impossible(v, zero_ok, max)) {
                    return Err(ReportError::Value {
                        row: i,
                        op: r.op.clone(),
                        shape: r.shape.clone(),
                        dtype: r.dtype.clone(),
                        what,
                        value: v,
                    });
                }
            }
        }
        report.calibration = Some(crate::calibrate::Calibration::fit(&report));
        Ok(report)
    }

    /// Whether its rows carry reduction depths ([`Row::depth`]): false where a row of a kind
    /// that reduces (a product or an attention: its K, its keys) reads 0, as in reports
    /// written before depths, whose compute-bound kinds are fitted without the depth term. A
    /// report of kinds without a reduction (element-wise, layouts) has nothing to miss.
    pub fn has_depths(&self) -> bool {
        let reduces = |op: &str| {
            ["gemm", "linear", "qmat", "attention"]
                .iter()
                .any(|k| op.contains(k))
        };
        !self.rows.iter().any(|r| reduces(&r.op) && r.depth <= 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Impossible numbers in a row are refused, naming the row and the field; a report
    /// without depths (written before them) parses, and says so; bytes that are not UTF-8
    /// or are cut short are no report.
    #[test]
    fn parse_checks_every_rows_numbers() {
        let text = include_str!("../../../benches/reports/h200.json");
        let good = BenchReport::parse(text.as_bytes()).unwrap();
        assert!(good.has_depths());
        let mut json: serde_json::Value = serde_json::from_str(text).unwrap();
        json["rows"][3]["depth"] = serde_json::json!(-5.0);
        let e = BenchReport::parse(json.to_string().as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("row 3 (gemm [512, 512, 512] f32): depth is -5"),
            "{e}"
        );
        json["rows"][3]["depth"] = serde_json::json!(512.0);
        json["rows"][4]["tiled_flops"] = serde_json::json!(-1.0);
        let e = BenchReport::parse(json.to_string().as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("row 4 (") && e.contains("tiled FLOPs is -1"),
            "{e}"
        );
        json["rows"][4]["tiled_flops"] = serde_json::json!(0.0);
        // A hand-edited report whose numbers would price ops at NaN, inf or below zero.
        let refused = |field: &str, value: serde_json::Value| {
            let mut bad = json.clone();
            let (section, key) = field.split_once('.').unwrap();
            if section == "measured" {
                bad["measured"][key] = value;
            } else {
                bad["rows"][2][key] = value;
            }
            BenchReport::parse(bad.to_string().as_bytes())
                .unwrap_err()
                .to_string()
        };
        for (field, value) in [
            ("measured.bandwidth_gbps", serde_json::json!(0.0)),
            ("measured.bandwidth_gbps", serde_json::json!(-5.0)),
            ("measured.f32_tflops", serde_json::json!(0.0)),
            ("measured.f16_tflops", serde_json::json!(1e300)),
            ("measured.dispatch_overhead_us", serde_json::json!(-100.0)),
        ] {
            let e = refused(field, value);
            assert!(e.starts_with(field), "{e}");
        }
        for (field, value) in [
            ("rows.measured_ms", serde_json::json!(0.0)),
            ("rows.measured_ms", serde_json::json!(1e308)),
            ("rows.bytes", serde_json::json!(0.0)),
            ("rows.flops", serde_json::json!(1e300)),
        ] {
            let e = refused(field, value);
            assert!(e.starts_with("row 2 ("), "{field}: {e}");
        }
        // Overheads may be 0 (a driver that reports none).
        let mut zero = json.clone();
        zero["measured"]["dispatch_overhead_us"] = serde_json::json!(0.0);
        assert!(BenchReport::parse(zero.to_string().as_bytes()).is_ok());
        for row in json["rows"].as_array_mut().unwrap() {
            row.as_object_mut().unwrap().remove("depth");
        }
        assert!(
            !BenchReport::parse(json.to_string().as_bytes())
                .unwrap()
                .has_depths()
        );
        // A report of element-wise kinds alone lacks nothing (it warned of old depths once).
        json["rows"]
            .as_array_mut()
            .unwrap()
            .retain(|row| row["op"] == "add" || row["op"] == "layer_norm");
        assert!(!json["rows"].as_array().unwrap().is_empty());
        assert!(
            BenchReport::parse(json.to_string().as_bytes())
                .unwrap()
                .has_depths()
        );
        let e = BenchReport::parse(&text.as_bytes()[..text.len() / 2])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("not a `ridge bench --json` report (EOF"),
            "{e}"
        );
        let adapter = text.find("\"adapter\": \"").unwrap() + 13;
        let mut latin1 = text.as_bytes().to_vec();
        latin1[adapter] = 0xE9;
        let e = BenchReport::parse(&latin1).unwrap_err().to_string();
        assert!(
            e.starts_with("not a `ridge bench --json` report (invalid unicode"),
            "{e}"
        );
    }

    /// A field of the wrong type is named by its path, on a report minified to one line too
    /// (a new user's `"prompt_lane_rows": "yes"` was said as "line 1 column 841").
    #[test]
    fn a_mistyped_field_is_named() {
        let text = include_str!("../../../benches/reports/lavapipe.json");
        let mut json: serde_json::Value = serde_json::from_str(text).unwrap();
        json["measured"]["prompt_lane_rows"] = serde_json::json!("yes");
        let e = BenchReport::parse(json.to_string().as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "not a `ridge bench --json` report (measured.prompt_lane_rows: invalid type"
            ),
            "{e}"
        );
        json["measured"]["prompt_lane_rows"] = serde_json::json!(true);
        json["rows"][2]["shape"] = serde_json::json!("big");
        let e = BenchReport::parse(json.to_string().as_bytes())
            .unwrap_err()
            .to_string();
        assert!(e.contains("rows[2].shape: invalid type"), "{e}");
    }

    /// The terms a file carries are replaced by its rows' fit: a report whose stored terms
    /// were edited (every kind 10× as efficient) is priced as its rows say.
    #[test]
    fn parse_refits_the_stored_terms() {
        let text = include_str!("../../../benches/reports/h200.json");
        let mut json: serde_json::Value = serde_json::from_str(text).unwrap();
        let kinds = json["calibration"]["kinds"].as_array_mut().unwrap();
        assert!(!kinds.is_empty());
        for k in kinds {
            let e = k["efficiency"].as_f64().unwrap();
            k["efficiency"] = serde_json::json!(e * 10.0);
        }
        let edited = BenchReport::parse(json.to_string().as_bytes()).unwrap();
        let fresh = crate::calibrate::Calibration::fit(&edited);
        let stored = edited.calibration.as_ref().unwrap();
        assert_eq!(stored.kinds.len(), fresh.kinds.len());
        for (s, f) in stored.kinds.iter().zip(&fresh.kinds) {
            assert_eq!(
                (s.efficiency, s.latency_s),
                (f.efficiency, f.latency_s),
                "{}",
                s.op
            );
        }
    }

    /// A report written before the tensor-core peak was measured still loads, without a
    /// tensor roof; with the peak, the roof is the peak at the same bandwidth.
    #[test]
    fn tensor_roof_comes_from_the_measured_peak_and_is_optional() {
        let mut json: serde_json::Value =
            serde_json::from_str(include_str!("../../../benches/reports/h200.json")).unwrap();
        json["measured"]
            .as_object_mut()
            .unwrap()
            .remove("tensor_tflops");
        let old: BenchReport = serde_json::from_value(json).unwrap();
        assert_eq!(old.measured.tensor_tflops, None);
        assert!(old.measured.tensor_ceilings().is_none());
        // Without a measured peak a tensor-core kernel falls back to the f16 FMA roof.
        assert_eq!(
            old.measured.ceilings_for(true, true),
            old.measured.ceilings(true)
        );

        let mut m = old.measured.clone();
        m.tensor_tflops = Some(640.0);
        let t = m.tensor_ceilings().unwrap();
        assert_eq!(t.peak_flops, 640e12);
        assert_eq!(t.bandwidth, m.ceilings(true).bandwidth);
        assert!(t.ridge_point() > 5.0 * m.ceilings(true).ridge_point());
        assert_eq!(m.ceilings_for(true, true), t);
        assert_eq!(m.ceilings_for(true, false), m.ceilings(true));
        assert_eq!(m.ceilings_for(false, false), m.ceilings(false));
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<Measured>(&json).unwrap(), m);
    }
}
