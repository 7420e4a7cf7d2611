//! Weight storage formats and llama.cpp's quantization mixes: bytes per weight from the
//! formats' block layouts (`ggml-common.h`: a block of `block` weights takes `block_bytes`).

use serde::{Deserialize, Serialize};

/// A tensor's storage format (GGML's type names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(non_camel_case_types)]
pub enum WeightFormat {
    /// 32-bit float.
    F32,
    /// IEEE half.
    F16,
    /// bfloat16.
    BF16,
    /// Blocks of 32: f16 scale + 32 int8 (34 bytes).
    Q8_0,
    /// Blocks of 32: f16 scale + 32 nibbles (18 bytes).
    Q4_0,
    /// Blocks of 32: f16 scale and min + 32 nibbles (20 bytes).
    Q4_1,
    /// Blocks of 32: f16 scale + 32 nibbles + 32 high bits (22 bytes).
    Q5_0,
    /// Blocks of 32: f16 scale and min + 5-bit quants (24 bytes).
    Q5_1,
    /// Super-blocks of 256: 2-bit quants, 4-bit scales (84 bytes).
    Q2_K,
    /// Super-blocks of 256: 3-bit quants, 6-bit scales (110 bytes).
    Q3_K,
    /// Super-blocks of 256: 4-bit quants, 6-bit scales and mins (144 bytes).
    Q4_K,
    /// Super-blocks of 256: 5-bit quants, 6-bit scales and mins (176 bytes).
    Q5_K,
    /// Super-blocks of 256: 6-bit quants, 8-bit scales (210 bytes).
    Q6_K,
    /// Super-blocks of 256 on an importance-weighted 1-bit grid (50 bytes, 1.5625 bits).
    IQ1_S,
    /// Super-blocks of 256, 1.75 bits (56 bytes).
    IQ1_M,
    /// Super-blocks of 256 on the E8 lattice, 2.0625 bits (66 bytes).
    IQ2_XXS,
    /// Super-blocks of 256, 2.3125 bits (74 bytes).
    IQ2_XS,
    /// Super-blocks of 256, 2.5625 bits (82 bytes).
    IQ2_S,
    /// Super-blocks of 256, 3.0625 bits (98 bytes).
    IQ3_XXS,
    /// Super-blocks of 256, 3.4375 bits (110 bytes).
    IQ3_S,
    /// Blocks of 32 on a non-linear 4-bit grid (18 bytes, 4.5 bits).
    IQ4_NL,
    /// Super-blocks of 256 on the non-linear grid, 4.25 bits (136 bytes).
    IQ4_XS,
    /// Ternary super-blocks of 256, 1.6875 bits (54 bytes).
    TQ1_0,
    /// Ternary super-blocks of 256, 2.0625 bits (66 bytes).
    TQ2_0,
    /// Microscaling FP4 blocks of 32: an 8-bit exponent + 32 4-bit floats (17 bytes).
    MXFP4,
}

impl WeightFormat {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [WeightFormat; 25] = [
        WeightFormat::F32,
        WeightFormat::F16,
        WeightFormat::BF16,
        WeightFormat::Q8_0,
        WeightFormat::Q4_0,
        WeightFormat::Q4_1,
        WeightFormat::Q5_0,
        WeightFormat::Q5_1,
        WeightFormat::Q2_K,
        WeightFormat::Q3_K,
        WeightFormat::Q4_K,
        WeightFormat::Q5_K,
        WeightFormat::Q6_K,
        WeightFormat::IQ1_S,
        WeightFormat::IQ1_M,
        WeightFormat::IQ2_XXS,
        WeightFormat::IQ2_XS,
        WeightFormat::IQ2_S,
        WeightFormat::IQ3_XXS,
        WeightFormat::IQ3_S,
        WeightFormat::IQ4_NL,
        WeightFormat::IQ4_XS,
        WeightFormat::TQ1_0,
        WeightFormat::TQ2_0,
        WeightFormat::MXFP4,
    ];

    /// (weights per block, bytes per block), from the block structs of ggml's
    /// `ggml-common.h` (`block_q4_0` = f16 d + 16 bytes of nibbles, `block_q4_K` = 2 f16 +
    /// 12 bytes of scales + 128 of nibbles, `block_iq4_xs` = f16 d + 2 + 4 bytes of scales +
    /// 128 of indices, …).
    pub fn block(self) -> (usize, usize) {
        match self {
            WeightFormat::F32 => (1, 4),
            WeightFormat::F16 | WeightFormat::BF16 => (1, 2),
            WeightFormat::Q8_0 => (32, 34),
            WeightFormat::Q4_0 | WeightFormat::IQ4_NL => (32, 18),
            WeightFormat::Q4_1 => (32, 20),
            WeightFormat::Q5_0 => (32, 22),
            WeightFormat::Q5_1 => (32, 24),
            WeightFormat::MXFP4 => (32, 17),
            WeightFormat::Q2_K => (256, 84),
            WeightFormat::Q3_K | WeightFormat::IQ3_S => (256, 110),
            WeightFormat::Q4_K => (256, 144),
            WeightFormat::Q5_K => (256, 176),
            WeightFormat::Q6_K => (256, 210),
            WeightFormat::IQ1_S => (256, 50),
            WeightFormat::IQ1_M => (256, 56),
            WeightFormat::IQ2_XXS | WeightFormat::TQ2_0 => (256, 66),
            WeightFormat::IQ2_XS => (256, 74),
            WeightFormat::IQ2_S => (256, 82),
            WeightFormat::IQ3_XXS => (256, 98),
            WeightFormat::IQ4_XS => (256, 136),
            WeightFormat::TQ1_0 => (256, 54),
        }
    }

    /// Bytes per weight (a Q4_0 weight is 18/32 = 0.5625 bytes, 4.5 bits).
    pub fn bytes_per_weight(self) -> f64 {
        let (n, b) = self.block();
        b as f64 / n as f64
    }

    /// Whether it is block-quantized (not F32, F16 or BF16).
    pub fn is_quantized(self) -> bool {
        self.block().0 > 1
    }

    /// The GGML name (`Q4_K`), as GGUF files and `--quant` spell it.
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::F32 => "F32",
            WeightFormat::F16 => "F16",
            WeightFormat::BF16 => "BF16",
            WeightFormat::Q8_0 => "Q8_0",
            WeightFormat::Q4_0 => "Q4_0",
            WeightFormat::Q4_1 => "Q4_1",
            WeightFormat::Q5_0 => "Q5_0",
            WeightFormat::Q5_1 => "Q5_1",
            WeightFormat::Q2_K => "Q2_K",
            WeightFormat::Q3_K => "Q3_K",
            WeightFormat::Q4_K => "Q4_K",
            WeightFormat::Q5_K => "Q5_K",
            WeightFormat::Q6_K => "Q6_K",
            WeightFormat::IQ1_S => "IQ1_S",
            WeightFormat::IQ1_M => "IQ1_M",
            WeightFormat::IQ2_XXS => "IQ2_XXS",
            WeightFormat::IQ2_XS => "IQ2_XS",
            WeightFormat::IQ2_S => "IQ2_S",
            WeightFormat::IQ3_XXS => "IQ3_XXS",
            WeightFormat::IQ3_S => "IQ3_S",
            WeightFormat::IQ4_NL => "IQ4_NL",
            WeightFormat::IQ4_XS => "IQ4_XS",
            WeightFormat::TQ1_0 => "TQ1_0",
            WeightFormat::TQ2_0 => "TQ2_0",
            WeightFormat::MXFP4 => "MXFP4",
        }
    }

    /// The format of a GGML type name, any case.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name))
    }

    /// What llama.cpp's quantizer stores instead where a row of `row` weights is not whole
    /// blocks of this format (`llama_tensor_get_type`'s fallbacks: a 256-weight super-block
    /// format on SmolLM2's rows of 576 becomes a 32-weight one, Q4_K → Q5_0, Q6_K → Q8_0),
    /// F16 where that does not divide the row either.
    fn fitting(self, row: usize) -> Self {
        use WeightFormat::*;
        if row.is_multiple_of(self.block().0) {
            return self;
        }
        let fallback = match self {
            TQ1_0 | TQ2_0 => Q4_0,
            IQ1_S | IQ1_M | IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ4_XS | Q2_K | Q3_K => {
                IQ4_NL
            }
            Q4_K => Q5_0,
            Q5_K => Q5_1,
            Q6_K => Q8_0,
            other => other,
        };
        if row.is_multiple_of(fallback.block().0) {
            fallback
        } else {
            F16
        }
    }
}

/// Which weight of a decoder layer stack a tensor is (llama.cpp's tensor names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TensorKind {
    /// `token_embd`: the embedding table.
    Embedding,
    /// `output`: the LM head (absent when tied to the embedding).
    Output,
    /// `attn_q`, `attn_k`.
    AttnQK,
    /// `attn_v`.
    AttnV,
    /// `attn_output`.
    AttnOutput,
    /// `ffn_gate`, `ffn_up`.
    FfnGateUp,
    /// `ffn_down`.
    FfnDown,
    /// Norm weights (always F32).
    Norm,
}

/// One weight matrix of a model, as llama.cpp's quantizer sees it when it picks the matrix's
/// format ([`Quant::format`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Which tensor.
    pub kind: TensorKind,
    /// Its layer (0 for the embedding and the LM head).
    pub layer: usize,
    /// The model's layers.
    pub layers: usize,
    /// Query heads per KV head (GQA's group; 1 without GQA).
    pub gqa: usize,
    /// Weights in one of its rows: the input width of its product.
    pub row: usize,
}

/// A model's quantization: llama.cpp's file types (`llama-quantize`'s names), each one
/// format for most matrices and its own rules for the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(non_camel_case_types)]
pub enum Quant {
    /// Every matrix in one format (norms F32); for quantized formats the LM head is Q6_K,
    /// as llama.cpp's quantizer stores it (`llama_tensor_get_type`: the output tensor of
    /// any file not in Q8_0 or wider). The file types F32, F16, BF16, Q8_0, Q4_0, Q4_1,
    /// Q5_0, Q5_1 and Q6_K.
    Uniform(WeightFormat),
    /// Q2_K with `attn_v` Q3_K (Q4_K under GQA of 4 or more), `ffn_down` and
    /// `attn_output` Q3_K.
    Q2_K,
    /// Q2_K with `attn_v` Q4_K under GQA of 4 or more and `ffn_down` Q4_K on the first
    /// eighth of the layers.
    Q2_K_S,
    /// Q3_K throughout.
    Q3_K_S,
    /// Q3_K with `attn_v` Q5_K on the first two layers and Q4_K after, `ffn_down` Q5_K on
    /// the first sixteenth and Q4_K after, `attn_output` Q4_K.
    Q3_K_M,
    /// Q3_K with `attn_v`, `ffn_down` and `attn_output` Q5_K.
    Q3_K_L,
    /// Q4_K, with `attn_v` Q5_K on the first four layers and `ffn_down` Q5_K on the first
    /// eighth.
    Q4_K_S,
    /// Q4_K, with `attn_v` and `ffn_down` in Q6_K on the first and last eighth of the layers
    /// and every third between.
    Q4_K_M,
    /// Q5_K throughout.
    Q5_K_S,
    /// Q5_K, with `attn_v` and `ffn_down` in Q6_K as in `Q4_K_M`.
    Q5_K_M,
    /// IQ1_S, `attn_output` IQ2_XXS, the low-bit IQ rules below.
    IQ1_S,
    /// IQ1_M, `attn_output` IQ2_XXS, the low-bit IQ rules below.
    IQ1_M,
    /// IQ2_XXS: the low-bit IQ rules — LM head Q5_K, embedding Q2_K, `attn_v` Q4_K under
    /// GQA of 4 or more (else Q2_K), `ffn_down` Q2_K on the first eighth.
    IQ2_XXS,
    /// IQ2_XS and the low-bit IQ rules.
    IQ2_XS,
    /// IQ2_XS with IQ3_S where the low-bit rules say Q2_K (embedding IQ3_S), `attn_output`
    /// IQ3_S.
    IQ2_S,
    /// IQ2_S, otherwise as `IQ2_S`.
    IQ2_M,
    /// IQ3_XXS: LM head Q5_K, embedding IQ3_S, `attn_q` and `attn_k` IQ2_S, `attn_v` Q4_K
    /// under GQA of 4 or more, `attn_output` IQ3_S (an importance matrix assumed).
    IQ3_XXS,
    /// IQ3_S with `attn_q`, `attn_k` and the middle layers' `ffn_gate`, `ffn_up` IQ3_XXS,
    /// `attn_v` Q4_K under GQA of 4 or more.
    IQ3_XS,
    /// IQ3_S, `attn_v` Q4_K under GQA of 4 or more.
    IQ3_S,
    /// IQ3_S with `attn_v` and `attn_output` Q4_K, `ffn_down` Q4_K on the first eighth.
    IQ3_M,
    /// IQ4_NL, `attn_v` Q5_K under GQA of 4 or more (an importance matrix assumed).
    IQ4_NL,
    /// IQ4_XS, `attn_v` Q5_K under GQA of 4 or more (an importance matrix assumed).
    IQ4_XS,
    /// TQ1_0, embedding Q4_K.
    TQ1_0,
    /// TQ2_0, embedding Q4_K.
    TQ2_0,
}

/// The mixes' `--quant` names, in `llama-quantize`'s order.
const MIXES: [(Quant, &str); 23] = [
    (Quant::Q2_K, "Q2_K"),
    (Quant::Q2_K_S, "Q2_K_S"),
    (Quant::Q3_K_S, "Q3_K_S"),
    (Quant::Q3_K_M, "Q3_K_M"),
    (Quant::Q3_K_L, "Q3_K_L"),
    (Quant::Q4_K_S, "Q4_K_S"),
    (Quant::Q4_K_M, "Q4_K_M"),
    (Quant::Q5_K_S, "Q5_K_S"),
    (Quant::Q5_K_M, "Q5_K_M"),
    (Quant::IQ1_S, "IQ1_S"),
    (Quant::IQ1_M, "IQ1_M"),
    (Quant::IQ2_XXS, "IQ2_XXS"),
    (Quant::IQ2_XS, "IQ2_XS"),
    (Quant::IQ2_S, "IQ2_S"),
    (Quant::IQ2_M, "IQ2_M"),
    (Quant::IQ3_XXS, "IQ3_XXS"),
    (Quant::IQ3_XS, "IQ3_XS"),
    (Quant::IQ3_S, "IQ3_S"),
    (Quant::IQ3_M, "IQ3_M"),
    (Quant::IQ4_NL, "IQ4_NL"),
    (Quant::IQ4_XS, "IQ4_XS"),
    (Quant::TQ1_0, "TQ1_0"),
    (Quant::TQ2_0, "TQ2_0"),
];

/// Whether `llama-quantize` has a file type of `f` throughout (with the LM head's rule): the
/// float formats and the 32-weight block formats, and Q6_K.
fn uniform_file_type(f: WeightFormat) -> bool {
    use WeightFormat::*;
    matches!(
        f,
        F32 | F16 | BF16 | Q8_0 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q6_K
    )
}

impl Quant {
    /// The `--quant` names: llama.cpp's file types (`llama-quantize --help`), the uniform
    /// ones first.
    pub fn names() -> Vec<&'static str> {
        let mut v: Vec<&str> = WeightFormat::ALL
            .into_iter()
            .filter(|&f| uniform_file_type(f))
            .map(WeightFormat::name)
            .collect();
        v.extend(MIXES.iter().map(|(_, n)| *n));
        v
    }

    /// Parses a `--quant` name, any case: a file type of [`Quant::names`]; `llama-quantize`'s
    /// aliases Q3_K, Q4_K and Q5_K (for Q3_K_M, Q4_K_M, Q5_K_M); the names `llama-bench`
    /// prints (`Q4_K - Medium`, `Q3_K - Small`, `IQ4_XS - 4.25 bpw`, `IQ3_S mix - 3.66 bpw`
    /// for IQ3_M); and any other GGML format as every matrix in it (`MXFP4`).
    pub fn parse(name: &str) -> Option<Self> {
        let upper = name.trim().to_ascii_uppercase();
        // llama-bench's descriptions: "<type> - <size>" or "<type> - <n> bpw".
        let name = match upper.split_once(" - ") {
            Some(("Q2_K", "MEDIUM")) => "Q2_K".to_string(),
            Some((t, "SMALL")) => format!("{t}_S"),
            Some((t, "MEDIUM")) => format!("{t}_M"),
            Some((t, "LARGE")) => format!("{t}_L"),
            Some(("IQ3_S MIX", _)) => "IQ3_M".to_string(),
            Some((t, rest)) if rest.ends_with("BPW") => t.to_string(),
            _ => upper,
        };
        let alias = match name.as_str() {
            "Q3_K" => "Q3_K_M",
            "Q4_K" => "Q4_K_M",
            "Q5_K" => "Q5_K_M",
            other => other,
        };
        MIXES
            .iter()
            .find(|(_, n)| *n == alias)
            .map(|(q, _)| *q)
            .or_else(|| WeightFormat::parse(alias).map(Quant::Uniform))
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Quant::Uniform(f) => f.name(),
            mix => MIXES
                .iter()
                .find(|(q, _)| *q == mix)
                .map_or("?", |(_, n)| *n),
        }
    }

    /// The format most matrices take (`llama_model_quantize_impl`'s default type).
    pub fn base(self) -> WeightFormat {
        use WeightFormat as F;
        match self {
            Quant::Uniform(f) => f,
            Quant::Q2_K | Quant::Q2_K_S => F::Q2_K,
            Quant::Q3_K_S | Quant::Q3_K_M | Quant::Q3_K_L => F::Q3_K,
            Quant::Q4_K_S | Quant::Q4_K_M => F::Q4_K,
            Quant::Q5_K_S | Quant::Q5_K_M => F::Q5_K,
            Quant::IQ1_S => F::IQ1_S,
            Quant::IQ1_M => F::IQ1_M,
            Quant::IQ2_XXS => F::IQ2_XXS,
            Quant::IQ2_XS | Quant::IQ2_S => F::IQ2_XS,
            Quant::IQ2_M => F::IQ2_S,
            Quant::IQ3_XXS => F::IQ3_XXS,
            Quant::IQ3_XS | Quant::IQ3_S | Quant::IQ3_M => F::IQ3_S,
            Quant::IQ4_NL => F::IQ4_NL,
            Quant::IQ4_XS => F::IQ4_XS,
            Quant::TQ1_0 => F::TQ1_0,
            Quant::TQ2_0 => F::TQ2_0,
        }
    }

    /// The format of the matrix at `s`, following llama.cpp's `llama_tensor_get_type` for a
    /// Llama-architecture model without experts (`src/llama-quant.cpp`), an importance matrix
    /// assumed where the rules depend on one (the IQ files are made with one), then its
    /// fallback where a row is not whole blocks ([`WeightFormat::fitting`]). Not modelled:
    /// the 70B rule (`attn_v` Q3_K/Q4_K → Q5_K on an 80-layer model: under 0.1 % of its
    /// bytes) and the rules for experts and other architectures.
    pub fn format(self, s: Slot) -> WeightFormat {
        self.chosen(s).fitting(s.row)
    }

    fn chosen(self, s: Slot) -> WeightFormat {
        use Quant as Q;
        use WeightFormat as F;
        let base = self.base();
        if s.kind == TensorKind::Norm {
            return F::F32;
        }
        if !base.is_quantized() {
            return base;
        }
        // llama.cpp's `use_more_bits`: the first and last eighth, and every third between.
        let (l, n) = (s.layer, s.layers);
        let more_bits = l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2;
        let first_eighth = l < n / 8;
        let gqa4 = s.gqa >= 4;
        let low_iq = matches!(
            self,
            Q::IQ2_XXS | Q::IQ2_XS | Q::IQ1_S | Q::IQ2_S | Q::IQ2_M | Q::IQ1_M
        );
        let iq2_s_m = matches!(self, Q::IQ2_S | Q::IQ2_M);
        match s.kind {
            TensorKind::Norm => F::F32,
            TensorKind::Output => {
                if !s.row.is_multiple_of(base.block().0) {
                    F::Q8_0
                } else if low_iq || self == Q::IQ3_XXS {
                    F::Q5_K
                } else if base != F::Q8_0 {
                    F::Q6_K
                } else {
                    base
                }
            }
            TensorKind::Embedding => match self {
                Q::IQ2_XXS | Q::IQ2_XS | Q::IQ1_S | Q::IQ1_M => F::Q2_K,
                Q::IQ2_S | Q::IQ2_M | Q::IQ3_XXS => F::IQ3_S,
                Q::TQ1_0 | Q::TQ2_0 => F::Q4_K,
                _ => base,
            },
            kind if low_iq => match kind {
                TensorKind::AttnV if gqa4 => F::Q4_K,
                TensorKind::AttnV => {
                    if iq2_s_m {
                        F::IQ3_S
                    } else {
                        F::Q2_K
                    }
                }
                TensorKind::FfnDown if first_eighth => {
                    if iq2_s_m {
                        F::IQ3_S
                    } else {
                        F::Q2_K
                    }
                }
                TensorKind::AttnOutput => match self {
                    Q::IQ1_S | Q::IQ1_M => F::IQ2_XXS,
                    Q::IQ2_S | Q::IQ2_M => F::IQ3_S,
                    _ => base,
                },
                _ => base,
            },
            TensorKind::AttnV => match self {
                Q::Q2_K => {
                    if gqa4 {
                        F::Q4_K
                    } else {
                        F::Q3_K
                    }
                }
                Q::Q2_K_S | Q::IQ3_XS | Q::IQ3_S | Q::IQ3_XXS if gqa4 => F::Q4_K,
                Q::IQ3_M => F::Q4_K,
                Q::Q3_K_M => {
                    if l < 2 {
                        F::Q5_K
                    } else {
                        F::Q4_K
                    }
                }
                Q::Q3_K_L => F::Q5_K,
                Q::IQ4_NL | Q::IQ4_XS if gqa4 => F::Q5_K,
                Q::Q4_K_M | Q::Q5_K_M if more_bits => F::Q6_K,
                Q::Q4_K_S if l < 4 => F::Q5_K,
                _ => base,
            },
            TensorKind::AttnQK => match self {
                Q::IQ3_XS => F::IQ3_XXS,
                Q::IQ3_XXS => F::IQ2_S,
                _ => base,
            },
            TensorKind::FfnDown => match self {
                Q::Q2_K => F::Q3_K,
                Q::Q2_K_S | Q::IQ3_M if first_eighth => F::Q4_K,
                Q::Q3_K_M => {
                    if l < n / 16 {
                        F::Q5_K
                    } else {
                        F::Q4_K
                    }
                }
                Q::Q3_K_L => F::Q5_K,
                Q::Q4_K_M | Q::Q5_K_M if more_bits => F::Q6_K,
                Q::Q4_K_S if first_eighth => F::Q5_K,
                _ => base,
            },
            TensorKind::AttnOutput => match self {
                Q::Q2_K => F::Q3_K,
                Q::IQ3_XXS => F::IQ3_S,
                Q::Q3_K_M | Q::IQ3_M => F::Q4_K,
                Q::Q3_K_L => F::Q5_K,
                _ => base,
            },
            TensorKind::FfnGateUp => match self {
                Q::IQ3_XS if !first_eighth && l < 7 * n / 8 => F::IQ3_XXS,
                _ => base,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_layouts_give_the_known_bits_per_weight() {
        let bits = |f: WeightFormat| 8.0 * f.bytes_per_weight();
        assert_eq!(bits(WeightFormat::Q4_0), 4.5);
        assert_eq!(bits(WeightFormat::Q4_1), 5.0);
        assert_eq!(bits(WeightFormat::Q8_0), 8.5);
        assert_eq!(bits(WeightFormat::Q4_K), 4.5);
        assert_eq!(bits(WeightFormat::Q6_K), 6.5625);
        assert_eq!(bits(WeightFormat::BF16), 16.0);
        assert_eq!(bits(WeightFormat::IQ4_XS), 4.25);
        assert_eq!(bits(WeightFormat::IQ2_XXS), 2.0625);
        assert_eq!(bits(WeightFormat::IQ3_S), 3.4375);
        assert_eq!(bits(WeightFormat::IQ1_S), 1.5625);
        assert_eq!(bits(WeightFormat::MXFP4), 4.25);
        for f in WeightFormat::ALL {
            assert_eq!(WeightFormat::parse(&f.name().to_lowercase()), Some(f));
        }
        assert_eq!(Quant::parse("q4_k_m"), Some(Quant::Q4_K_M));
        assert_eq!(
            Quant::parse("Q4_0"),
            Some(Quant::Uniform(WeightFormat::Q4_0))
        );
        assert_eq!(Quant::parse("Q4_K_XL"), None);
    }

    /// A matrix of llama-3-8b (32 layers, GQA 4, rows of 4096; `ffn_down`'s of 14336).
    fn slot(kind: TensorKind, layer: usize) -> Slot {
        let row = if kind == TensorKind::FfnDown {
            14336
        } else {
            4096
        };
        Slot {
            kind,
            layer,
            layers: 32,
            gqa: 4,
            row,
        }
    }

    #[test]
    fn q4_k_m_gives_half_of_a_32_layer_models_v_and_down_six_bits() {
        let six = (0..32)
            .filter(|&l| Quant::Q4_K_M.format(slot(TensorKind::FfnDown, l)) == WeightFormat::Q6_K)
            .count();
        assert_eq!(six, 16);
        assert_eq!(
            Quant::Q4_K_M.format(slot(TensorKind::AttnQK, 0)),
            WeightFormat::Q4_K
        );
        assert_eq!(
            Quant::Uniform(WeightFormat::Q4_0).format(slot(TensorKind::Output, 0)),
            WeightFormat::Q6_K
        );
        assert_eq!(
            Quant::Uniform(WeightFormat::Q8_0).format(slot(TensorKind::Output, 0)),
            WeightFormat::Q8_0
        );
        assert_eq!(
            Quant::Uniform(WeightFormat::F16).format(slot(TensorKind::Output, 0)),
            WeightFormat::F16
        );
    }

    /// Rules of `llama_tensor_get_type` (llama.cpp's `src/llama-quant.cpp`) for the mixes
    /// beyond Q4_K_M, one assertion a rule.
    #[test]
    fn the_mixes_follow_llama_cpps_rules() {
        use TensorKind::*;
        use WeightFormat as F;
        let f = |q: Quant, kind, layer| q.format(slot(kind, layer));
        assert_eq!(f(Quant::Q3_K_M, AttnV, 1), F::Q5_K);
        assert_eq!(f(Quant::Q3_K_M, AttnV, 2), F::Q4_K);
        assert_eq!(f(Quant::Q3_K_M, FfnDown, 1), F::Q5_K);
        assert_eq!(f(Quant::Q3_K_M, FfnDown, 2), F::Q4_K);
        assert_eq!(f(Quant::Q3_K_M, AttnOutput, 9), F::Q4_K);
        assert_eq!(f(Quant::Q3_K_M, FfnGateUp, 9), F::Q3_K);
        assert_eq!(f(Quant::Q3_K_S, FfnDown, 0), F::Q3_K);
        assert_eq!(f(Quant::Q3_K_L, AttnOutput, 9), F::Q5_K);
        assert_eq!(f(Quant::Q2_K, AttnV, 9), F::Q4_K);
        assert_eq!(f(Quant::Q2_K, FfnGateUp, 9), F::Q2_K);
        assert_eq!(f(Quant::Q4_K_S, AttnV, 3), F::Q5_K);
        assert_eq!(f(Quant::Q4_K_S, AttnV, 4), F::Q4_K);
        assert_eq!(f(Quant::IQ4_XS, AttnV, 9), F::Q5_K);
        assert_eq!(f(Quant::IQ4_XS, FfnDown, 9), F::IQ4_XS);
        assert_eq!(f(Quant::IQ2_XXS, Output, 0), F::Q5_K);
        assert_eq!(f(Quant::IQ2_XXS, Embedding, 0), F::Q2_K);
        assert_eq!(f(Quant::IQ2_XXS, FfnDown, 3), F::Q2_K);
        assert_eq!(f(Quant::IQ2_XXS, FfnDown, 4), F::IQ2_XXS);
        assert_eq!(f(Quant::IQ2_M, FfnGateUp, 9), F::IQ2_S);
        assert_eq!(f(Quant::IQ3_XS, FfnGateUp, 3), F::IQ3_S);
        assert_eq!(f(Quant::IQ3_XS, FfnGateUp, 4), F::IQ3_XXS);
        assert_eq!(f(Quant::IQ3_XXS, AttnQK, 9), F::IQ2_S);
        assert_eq!(f(Quant::IQ3_M, AttnOutput, 9), F::Q4_K);
        // Without GQA the low-bit IQ files keep attn_v low.
        let mha = Slot {
            gqa: 1,
            ..slot(AttnV, 9)
        };
        assert_eq!(Quant::IQ2_XS.format(mha), F::Q2_K);
        assert_eq!(Quant::Q2_K.format(mha), F::Q3_K);
    }

    /// A row that is not whole super-blocks falls back as llama.cpp's quantizer does:
    /// SmolLM2-135M's rows of 576 (2.25 super-blocks) and Qwen2.5-0.5B's of 896.
    #[test]
    fn rows_of_partial_super_blocks_fall_back() {
        use TensorKind::*;
        use WeightFormat as F;
        let s = |kind, row| Slot {
            kind,
            layer: 9,
            layers: 30,
            gqa: 3,
            row,
        };
        assert_eq!(Quant::Q4_K_M.format(s(AttnQK, 576)), F::Q5_0);
        assert_eq!(Quant::Q4_K_M.format(s(FfnDown, 1536)), F::Q4_K);
        assert_eq!(Quant::Q4_K_M.format(s(Output, 576)), F::Q8_0);
        assert_eq!(Quant::Q5_K_M.format(s(AttnQK, 896)), F::Q5_1);
        assert_eq!(Quant::IQ4_XS.format(s(AttnQK, 896)), F::IQ4_NL);
        assert_eq!(Quant::Uniform(F::Q4_0).format(s(Output, 576)), F::Q8_0);
        // Not even 32-weight blocks: F16.
        assert_eq!(Quant::Q4_K_M.format(s(AttnQK, 100)), F::F16);
    }

    #[test]
    fn names_parse_as_llama_quantize_and_llama_bench_spell_them() {
        for name in Quant::names() {
            assert_eq!(Quant::parse(name).map(Quant::name), Some(name), "{name}");
        }
        assert_eq!(Quant::parse("Q4_K"), Some(Quant::Q4_K_M));
        assert_eq!(Quant::parse("Q4_K - Medium"), Some(Quant::Q4_K_M));
        assert_eq!(Quant::parse("q3_k - small"), Some(Quant::Q3_K_S));
        assert_eq!(Quant::parse("Q2_K - Medium"), Some(Quant::Q2_K));
        assert_eq!(Quant::parse("IQ4_XS - 4.25 bpw"), Some(Quant::IQ4_XS));
        assert_eq!(Quant::parse("IQ3_S mix - 3.66 bpw"), Some(Quant::IQ3_M));
        assert_eq!(
            Quant::parse("MXFP4"),
            Some(Quant::Uniform(WeightFormat::MXFP4))
        );
        assert_eq!(Quant::parse("Q4_K_XL"), None);
    }
}
