//! Predicted prefill and decode times of a decoder on a GPU of the spec table: the roofline
//! of every op ([`super::phase`]) with three efficiency terms per GPU vendor (and per
//! llama.cpp backend on a vendor's GPUs), fitted to published llama.cpp measurements
//! (`data/published.json`).
//!
//! The terms, the same for every GPU of a vendor (never per GPU):
//! - `bandwidth`: the fraction of the datasheet bandwidth a memory-bound op reaches;
//! - `compute`: the fraction of a compute roof a compute-bound op reaches, on the roof
//!   ([`Roof`]) whose best fraction fits the group's prefill rows best: the matrix engines'
//!   f16 peak (the vector f32 peak for f32 weights); the unpacking roof, for quantized
//!   weights that peak but at most [`DEQUANTIZED_MATRIX_PER_VECTOR_FLOP`] × the vector f32
//!   peak (llama.cpp's CUDA prompts: integer matrix ops on weights the vector ALUs unpack,
//!   at ~2× the vector f32 peak on every NVIDIA GPU of its scoreboard, H100 and RTX 3060
//!   alike, where the tensor-core peaks differ 2–15× from it); or the vector f32 peak (a
//!   backend whose builds ran prompts on the vector ALUs, as llama.cpp's Vulkan backend did
//!   on Intel's GPUs before PR #14001, 2025-06);
//! - `layer_overhead_s`: a fixed time per layer and forward pass (kernel launches and
//!   synchronisation: about ten kernels per layer).
//!
//! Groups: all vendors' rows; each vendor's over all its backends; each backend's on one
//! vendor's GPUs (AMD on ROCm and on Vulkan, Intel on SYCL and on Vulkan: the same GPU
//! prefills 2× faster on one than on the other), where the vendor's rows name more than one
//! backend. A prediction takes the terms of its backend on its vendor where given and fitted,
//! else its vendor's, else all vendors'. A decode of N tokens is N steps at the mean context
//! (the costs grow linearly with the context, so the mean step is exact while the bound
//! holds).
//!
//! The terms are fitted to the published rows, and the model is checked against them, in
//! `predict/fit.rs` (its terms and checks re-exported here).

mod fit;

use serde::{Deserialize, Serialize};

use super::phase::{Step, step_ops};
use super::{DecoderShape, ModelWeights, Quant};
use crate::hardware::GpuSpec;

pub use fit::{
    BACKENDS, Checked, MIN_GPUS, MIN_ROWS, Published, backends_of, check_held_out, check_published,
    median_error, published,
};

/// The efficiency terms of one vendor, or of one backend on a vendor's GPUs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Efficiency {
    /// Vendor (`NVIDIA`, `AMD`, `Apple`, `Intel`) or `all vendors`.
    pub vendor: String,
    /// llama.cpp's backend for terms of one backend on the vendor's GPUs (`Vulkan`,
    /// `SYCL`, …); `None` for the vendor's terms over all its backends.
    #[serde(default)]
    pub backend: Option<String>,
    /// Published rows the terms were fitted to (decode, prefill).
    pub rows: (usize, usize),
    /// Fraction of the datasheet bandwidth.
    pub bandwidth: f64,
    /// Fraction of the compute roof `roof`.
    pub compute: f64,
    /// Which peak `compute` is a fraction of: the one whose best fraction fits the group's
    /// prefill rows best (module docs).
    #[serde(default)]
    pub roof: Roof,
    /// Fixed time per layer and forward pass, seconds.
    pub layer_overhead_s: f64,
    /// Whether bandwidth and overhead were fitted to this group's own decode rows (else taken
    /// from the group above: a backend's from its vendor's, a vendor's from all vendors').
    #[serde(default)]
    pub own_decode_terms: bool,
    /// Whether the compute term was fitted to this group's own prefill rows.
    #[serde(default)]
    pub own_compute_term: bool,
}

/// The compute peak a group's prompts run against (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Roof {
    /// The matrix engines' f16 peak (the vector f32 peak for f32 weights).
    #[default]
    Matrix,
    /// For quantized weights, the matrix engines fed by the vector ALUs that unpack the
    /// weights: the f16 peak, at most [`DEQUANTIZED_MATRIX_PER_VECTOR_FLOP`] × the vector f32
    /// peak (as `Matrix` for float weights).
    Unpacked,
    /// The vector ALUs' f32 peak.
    Vector,
}

impl Roof {
    /// Every roof, in the order a tie keeps.
    pub const ALL: [Roof; 3] = [Roof::Matrix, Roof::Unpacked, Roof::Vector];

    /// Its peak on `gpu`, TFLOP/s, for products over weights stored at `bytes_per_weight`
    /// ([`ModelWeights::matrix_bytes_per_weight`]): f32 weights run on the vector ALUs
    /// whatever the roof; f16 and bf16 need no unpacking, so `Unpacked` is `Matrix` for them;
    /// quantized weights cap `Unpacked` at [`DEQUANTIZED_MATRIX_PER_VECTOR_FLOP`] × the vector
    /// peak.
    pub fn tflops(self, gpu: &GpuSpec, bytes_per_weight: f64) -> f64 {
        let (vector, matrix) = (gpu.f32_tflops, gpu.f16_tflops);
        match (self, Storage::of(bytes_per_weight)) {
            (_, Storage::F32) | (Roof::Vector, _) => vector,
            (Roof::Matrix, _) | (Roof::Unpacked, Storage::Float) => matrix,
            (Roof::Unpacked, Storage::Quantized) => {
                matrix.min(DEQUANTIZED_MATRIX_PER_VECTOR_FLOP * vector)
            }
        }
    }

    /// Why [`Roof::tflops`] is what it is for weights of `bytes_per_weight`, the roof named
    /// first (its fraction is the group's whatever the weights).
    pub fn reason(self, bytes_per_weight: f64) -> String {
        let why = match (self, Storage::of(bytes_per_weight)) {
            (_, Storage::F32) => "f32 weights run on the vector ALUs: the f32 peak",
            (Roof::Vector, _) => "the vector ALUs' f32 peak",
            (Roof::Matrix, _) => "the matrix engines' f16 peak",
            (Roof::Unpacked, Storage::Float) => {
                "float weights need no unpacking: the matrix engines' f16 peak"
            }
            (Roof::Unpacked, Storage::Quantized) => {
                "quantized weights: the matrix engines' f16 peak, at most 2x the f32 peak"
            }
        };
        format!("{}; {why}", self.describe())
    }

    /// How the terms' line names it.
    fn describe(self) -> &'static str {
        match self {
            Roof::Matrix => "the matrix peak",
            Roof::Unpacked => "the unpacking roof",
            Roof::Vector => "the vector f32 peak",
        }
    }
}

/// How a model's matrices are stored, as the compute roofs see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Storage {
    /// 4 bytes a weight.
    F32,
    /// f16 or bf16: 2 bytes a weight, nothing to unpack.
    Float,
    /// Under 2 bytes a weight (Q8_0's 1.0625 down), unpacked before the matrix ops.
    Quantized,
}

impl Storage {
    /// From the layers' mean bytes per weight.
    fn of(bytes_per_weight: f64) -> Storage {
        if bytes_per_weight >= 3.0 {
            Storage::F32
        } else if bytes_per_weight >= 1.9 {
            Storage::Float
        } else {
            Storage::Quantized
        }
    }
}

/// What a phase is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Processing the prompt (all its tokens in one pass).
    Prefill,
    /// Generating tokens one step at a time.
    Decode,
}

/// The vendor of a spec-table row, from its PCI vendor id.
pub fn vendor(gpu: &GpuSpec) -> &'static str {
    match gpu.vendor_id {
        0x10de => "NVIDIA",
        0x1002 => "AMD",
        0x106b => "Apple",
        0x8086 => "Intel",
        _ => "other",
    }
}

/// A phase's predicted time and rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseTime {
    /// Seconds for the whole phase.
    pub seconds: f64,
    /// Tokens per second (all sequences together).
    pub tokens_per_s: f64,
    /// Tokens per second on the bare roofline (every efficiency 1, no overhead).
    pub roofline_tokens_per_s: f64,
    /// Share of the time in compute-bound ops.
    pub compute_bound_share: f64,
    /// Time per op kind (summed over layers), seconds, in first-seen order.
    pub ops: Vec<(String, f64)>,
}

/// One op of a step at unit efficiency: its FLOPs on each [`Roof`] (the same for f32
/// weights), its bytes at the datasheet bandwidth, seconds.
#[derive(Clone, Debug)]
struct UnitOp {
    name: String,
    matrix_s: f64,
    unpacked_s: f64,
    vector_s: f64,
    memory_s: f64,
}

impl UnitOp {
    /// Its FLOPs' time on `roof` at unit efficiency.
    fn compute_s(&self, roof: Roof) -> f64 {
        match roof {
            Roof::Matrix => self.matrix_s,
            Roof::Unpacked => self.unpacked_s,
            Roof::Vector => self.vector_s,
        }
    }
}

/// How many FLOPs per vector f32 FLOP the matrix engines reach in a product whose weights
/// the kernel unpacks first (llama.cpp's quantized products: integer or f16 matrix ops on
/// weights dequantized by the vector ALUs). Measured, llama.cpp's CUDA scoreboard
/// (discussion #15013, Llama 2 7B Q4_0 pp512, `crates/ridge-model/data/published.json`):
/// 13.5 GFLOP a token at 1.6–2.3× the vector f32 peak on every GPU from the RTX 3060 to the
/// RTX 5090, the RTX A6000, the RTX PRO 6000 and the H100 (3.4× on the A100, whose SMs
/// have half the f32 lanes), while their tensor-core peaks stand 2× to 15× above the vector
/// peak: the unpacking, not the matrix engines, sets the pace. The GeForce cards' f16 rate
/// with f32 accumulation is 2× their f32 rate (Ampere, Ada and Blackwell whitepapers), so
/// this caps only engines faster than theirs: data-centre and workstation tensor cores,
/// Intel's XMX.
pub const DEQUANTIZED_MATRIX_PER_VECTOR_FLOP: f64 = 2.0;

/// Per-op times of one step at unit efficiency.
fn unit_times(s: &DecoderShape, w: &ModelWeights, gpu: &GpuSpec, step: Step) -> Vec<UnitOp> {
    let bytes_per_weight = w.matrix_bytes_per_weight(s);
    let rate = |roof: Roof| 1e12 * roof.tflops(gpu, bytes_per_weight);
    let (matrix, unpacked, vector) = (rate(Roof::Matrix), rate(Roof::Unpacked), rate(Roof::Vector));
    let bw = 1e9 * gpu.bandwidth_gbps;
    step_ops(s, w, step)
        .into_iter()
        .map(|o| UnitOp {
            name: o.name,
            matrix_s: o.cost.flops / matrix,
            unpacked_s: o.cost.flops / unpacked,
            vector_s: o.cost.flops / vector,
            memory_s: o.cost.bytes / bw,
        })
        .collect()
}

/// A phase of `batch` sequences: prefill of `tokens` after `past`, or decode of `tokens`
/// steps after `past`.
fn phase_time(
    units: &[UnitOp],
    steps: f64,
    tokens: f64,
    layers: usize,
    e: &Efficiency,
) -> PhaseTime {
    let mut ops: Vec<(String, f64)> = Vec::new();
    let (mut total, mut compute, mut roof) = (0.0, 0.0, 0.0);
    for u in units {
        let c = u.compute_s(e.roof);
        let m = u.memory_s;
        let t = (c / e.compute).max(m / e.bandwidth);
        total += t;
        roof += u.matrix_s.max(m);
        if c / e.compute >= m / e.bandwidth {
            compute += t;
        }
        match ops.iter_mut().find(|o| o.0 == u.name) {
            Some(o) => o.1 += t * steps,
            None => ops.push((u.name.clone(), t * steps)),
        }
    }
    let seconds = steps * (total + layers as f64 * e.layer_overhead_s);
    PhaseTime {
        seconds,
        tokens_per_s: tokens / seconds,
        roofline_tokens_per_s: tokens / (steps * roof),
        compute_bound_share: compute / total.max(f64::MIN_POSITIVE),
        ops,
    }
}

/// The unit-efficiency op times of `phase` for `batch` sequences after `past` cached tokens,
/// and its step count: a prefill of `tokens` is one pass; a decode of `tokens`, that many
/// steps, priced at the mean context (the costs grow linearly with it).
fn phase_units(
    s: &DecoderShape,
    w: &ModelWeights,
    gpu: &GpuSpec,
    phase: Phase,
    [batch, tokens, past]: [usize; 3],
) -> (Vec<UnitOp>, f64) {
    let (step, steps) = match phase {
        Phase::Prefill => ((tokens.max(1), past), 1.0),
        Phase::Decode => (
            (1, past + tokens.saturating_sub(1) / 2),
            tokens.max(1) as f64,
        ),
    };
    let step = Step {
        batch,
        tokens: step.0,
        past: step.1,
    };
    (unit_times(s, w, gpu, step), steps)
}

/// The prediction of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecoderPrediction {
    /// Prefill of the prompt.
    pub prefill: PhaseTime,
    /// Decode of the generated tokens.
    pub decode: PhaseTime,
    /// Time to the first token: the prefill (its last position's logits give it).
    pub time_to_first_token_s: f64,
    /// The efficiency terms used.
    pub efficiency: Efficiency,
}

/// Predicts `batch` sequences: a prefill of `prompt` tokens, then `generate` decode steps,
/// with the terms of llama.cpp's `backend` on `gpu`'s vendor where the published rows have
/// them, else the vendor's ([`Efficiency::for_gpu`]).
pub fn predict(
    s: &DecoderShape,
    w: &ModelWeights,
    gpu: &GpuSpec,
    backend: Option<&str>,
    batch: usize,
    prompt: usize,
    generate: usize,
) -> DecoderPrediction {
    let e = Efficiency::for_gpu(gpu, backend);
    let (units, steps) = phase_units(s, w, gpu, Phase::Prefill, [batch, prompt, 0]);
    let prefill = phase_time(&units, steps, (batch * prompt) as f64, s.layers, &e);
    let (units, steps) = phase_units(s, w, gpu, Phase::Decode, [batch, generate, prompt]);
    let decode = phase_time(&units, steps, batch as f64 * steps, s.layers, &e);
    DecoderPrediction {
        time_to_first_token_s: prefill.seconds,
        prefill,
        decode,
        efficiency: e,
    }
}

impl std::fmt::Display for Efficiency {
    /// `NVIDIA, fitted to 11 decode + 11 prefill rows: 94 % of bandwidth, 87 % of the matrix peak,
    /// 85 µs per layer and pass`; `AMD on Vulkan, …` for a backend's terms.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}, fitted to {} decode + {} prefill rows: {:.0} % of bandwidth, {:.0} % of {}, {:.0} µs per layer and pass",
            self.group(),
            self.rows.0,
            self.rows.1,
            100.0 * self.bandwidth,
            100.0 * self.compute,
            self.roof.describe(),
            1e6 * self.layer_overhead_s
        )?;
        let above = match self.backend {
            Some(_) => format!("{}'s rows", self.vendor),
            None => "all vendors' rows".into(),
        };
        let borrowed = match (self.own_decode_terms, self.own_compute_term) {
            (false, false) => "every term",
            (false, true) => "bandwidth and overhead",
            (true, false) => "compute",
            (true, true) => return Ok(()),
        };
        write!(
            f,
            " ({borrowed} from {above}: too few rows or GPUs of its own)"
        )
    }
}

impl Efficiency {
    /// `NVIDIA`, or `NVIDIA on Vulkan` for a backend's terms.
    pub fn group(&self) -> String {
        match &self.backend {
            Some(b) => format!("{} on {b}", self.vendor),
            None => self.vendor.clone(),
        }
    }

    /// The terms for `gpu` ([`Efficiency::fitted`]): those of `backend` on its vendor's GPUs
    /// where the published rows have them, else its vendor's over all backends, else those of
    /// all vendors.
    pub fn for_gpu(gpu: &GpuSpec, backend: Option<&str>) -> Efficiency {
        Self::of(Self::fitted(), vendor(gpu), backend).clone()
    }

    /// The terms of `backend` on `vendor`'s GPUs among `fits`, else `vendor`'s, else the
    /// pooled ones (always among a [`Efficiency::fit_all`]'s).
    fn of<'a>(fits: &'a [Efficiency], vendor: &str, backend: Option<&str>) -> &'a Efficiency {
        let find = |v: &str, b: Option<&str>| {
            fits.iter().find(|e| {
                e.vendor == v
                    && e.backend.as_deref().map(str::to_lowercase) == b.map(str::to_lowercase)
            })
        };
        backend
            .and_then(|b| find(vendor, Some(b)))
            .or_else(|| find(vendor, None))
            .or_else(|| find("all vendors", None))
            .expect("fit_all always fits all vendors' rows")
    }
}

/// The default format of a preset when none is given: llama.cpp's most used mix.
pub fn default_quant() -> Quant {
    Quant::Q4_K_M
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware;

    #[test]
    fn quantized_prompts_on_cuda_are_priced_on_the_unpacking_roof() {
        // llama.cpp's CUDA scoreboard (discussion #15013, Llama 2 7B Q4_0, pp512): an H100
        // SXM 9,918 tokens/s, an RTX 4090 11,993, though the H100's tensor-core peak is 6×
        // the 4090's: both ~2× their vector f32 peak. Priced on the matrix engines' peak the
        // H100 came out 3.8× too fast.
        let gpu = |name: &str| hardware::find(name).unwrap();
        let s = DecoderShape::preset("llama-2-7b").unwrap();
        let q4 = ModelWeights::of(&s, Quant::parse("Q4_0").unwrap());
        let f16 = ModelWeights::of(&s, Quant::parse("F16").unwrap());
        for (name, published) in [("H100 SXM", 9918.34), ("RTX 4090", 11992.70)] {
            let p = predict(&s, &q4, &gpu(name), Some("CUDA"), 1, 512, 128);
            assert_eq!(p.efficiency.roof, Roof::Unpacked, "{:?}", p.efficiency);
            let r = p.prefill.tokens_per_s / published;
            assert!((0.8..1.25).contains(&r), "{name}: {r}");
        }
        // Float weights need no unpacking: an H100's f16 prompt runs on its full tensor
        // peak, 3× a 4090's at least; a decode does not depend on the roof (memory-bound).
        let h100 = predict(&s, &f16, &gpu("H100 SXM"), Some("CUDA"), 1, 512, 128);
        let rtx = predict(&s, &f16, &gpu("RTX 4090"), Some("CUDA"), 1, 512, 128);
        assert!(h100.prefill.tokens_per_s > 3.0 * rtx.prefill.tokens_per_s);
        let a100 = gpu("A100 SXM4 80GB");
        let on = |roof, phase| {
            let e = Efficiency {
                roof,
                ..Efficiency::for_gpu(&a100, Some("CUDA"))
            };
            let (units, steps) = phase_units(&s, &q4, &a100, phase, [1, 512, 0]);
            phase_time(&units, steps, 512.0, s.layers, &e).tokens_per_s
        };
        assert!(on(Roof::Unpacked, Phase::Prefill) < 0.2 * on(Roof::Matrix, Phase::Prefill));
        let (d, m) = (
            on(Roof::Unpacked, Phase::Decode),
            on(Roof::Matrix, Phase::Decode),
        );
        assert!((d / m - 1.0).abs() < 0.01, "{d} {m}");
    }

    #[test]
    fn decode_is_memory_bound_and_prefill_compute_bound_on_a_big_gpu() {
        let s = DecoderShape::preset("llama-3-8b").unwrap();
        let w = ModelWeights::of(&s, Quant::Q4_K_M);
        let gpu = hardware::find("RTX 4090").unwrap();
        let p = predict(&s, &w, &gpu, None, 1, 512, 128);
        assert!(p.prefill.compute_bound_share > 0.8, "{:?}", p.prefill);
        assert!(p.decode.compute_bound_share < 0.1, "{:?}", p.decode);
        // Batch walks decode toward the ridge point: 64 sequences share each weight read.
        let batched = predict(&s, &w, &gpu, None, 64, 512, 128);
        assert!(batched.decode.tokens_per_s > 10.0 * p.decode.tokens_per_s);
        assert!(p.decode.tokens_per_s < p.decode.roofline_tokens_per_s);
    }
}
