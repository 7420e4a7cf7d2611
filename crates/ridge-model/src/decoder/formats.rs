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
}

impl WeightFormat {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [WeightFormat; 13] = [
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
    ];

    /// (weights per block, bytes per block), from the block structs of ggml's
    /// `ggml-common.h` (`block_q4_0` = f16 d + 16 bytes of nibbles, `block_q4_K` = 2 f16 +
    /// 12 bytes of scales + 128 of nibbles, …).
    pub fn block(self) -> (usize, usize) {
        match self {
            WeightFormat::F32 => (1, 4),
            WeightFormat::F16 | WeightFormat::BF16 => (1, 2),
            WeightFormat::Q8_0 => (32, 34),
            WeightFormat::Q4_0 => (32, 18),
            WeightFormat::Q4_1 => (32, 20),
            WeightFormat::Q5_0 => (32, 22),
            WeightFormat::Q5_1 => (32, 24),
            WeightFormat::Q2_K => (256, 84),
            WeightFormat::Q3_K => (256, 110),
            WeightFormat::Q4_K => (256, 144),
            WeightFormat::Q5_K => (256, 176),
            WeightFormat::Q6_K => (256, 210),
        }
    }

    /// Bytes per weight (a Q4_0 weight is 18/32 = 0.5625 bytes, 4.5 bits).
    pub fn bytes_per_weight(self) -> f64 {
        let (n, b) = self.block();
        b as f64 / n as f64
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
        }
    }

    /// The format of a GGML type name, any case.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name))
    }
}

/// Which weight of a decoder layer stack a tensor is (llama.cpp's tensor names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TensorKind {
    /// `token_embd`: the embedding table.
    Embedding,
    /// `output`: the LM head (absent when tied to the embedding).
    Output,
    /// `attn_q`, `attn_k`, `attn_output`.
    AttnQKO,
    /// `attn_v`.
    AttnV,
    /// `ffn_gate`, `ffn_up`.
    FfnGateUp,
    /// `ffn_down`.
    FfnDown,
    /// Norm weights (always F32).
    Norm,
}

/// A model's quantization: one format for every matrix, or one of llama.cpp's mixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(non_camel_case_types)]
pub enum Quant {
    /// Every matrix in one format (norms F32); for quantized formats the LM head is Q6_K,
    /// as llama.cpp's quantizer stores it (`llama_tensor_get_type`: the output tensor of
    /// any file not in Q8_0 or wider).
    Uniform(WeightFormat),
    /// llama.cpp's `Q4_K_M`: Q4_K, with `attn_v` and `ffn_down` in Q6_K on the first and last
    /// eighth of the layers and every third between, and the LM head in Q6_K.
    Q4_K_M,
    /// llama.cpp's `Q4_K_S`: Q4_K, `ffn_down` Q5_K on the first eighth, LM head Q6_K.
    Q4_K_S,
    /// llama.cpp's `Q5_K_M`: Q5_K, with `attn_v` and `ffn_down` in Q6_K as in `Q4_K_M`.
    Q5_K_M,
}

impl Quant {
    /// The `--quant` names: every format, then the mixes.
    pub fn names() -> Vec<&'static str> {
        let mut v: Vec<&str> = WeightFormat::ALL.iter().map(|f| f.name()).collect();
        v.extend(["Q4_K_M", "Q4_K_S", "Q5_K_M"]);
        v
    }

    /// Parses a `--quant` name, any case.
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_uppercase().as_str() {
            "Q4_K_M" => Some(Quant::Q4_K_M),
            "Q4_K_S" => Some(Quant::Q4_K_S),
            "Q5_K_M" => Some(Quant::Q5_K_M),
            other => WeightFormat::parse(other).map(Quant::Uniform),
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Quant::Uniform(f) => f.name(),
            Quant::Q4_K_M => "Q4_K_M",
            Quant::Q4_K_S => "Q4_K_S",
            Quant::Q5_K_M => "Q5_K_M",
        }
    }

    /// The format of tensor `kind` of layer `layer` (of `layers`), following llama.cpp's
    /// `llama_tensor_get_type` for these file types.
    pub fn format(self, kind: TensorKind, layer: usize, layers: usize) -> WeightFormat {
        // llama.cpp's `use_more_bits`: the first and last eighth, and every third between.
        let more_bits =
            layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
        let quantized = |f: WeightFormat| {
            !matches!(
                f,
                WeightFormat::F32 | WeightFormat::F16 | WeightFormat::BF16
            )
        };
        match (self, kind) {
            (_, TensorKind::Norm) => WeightFormat::F32,
            (Quant::Uniform(f), TensorKind::Output) if quantized(f) && f != WeightFormat::Q8_0 => {
                WeightFormat::Q6_K
            }
            (Quant::Uniform(f), _) => f,
            (_, TensorKind::Output) => WeightFormat::Q6_K,
            (Quant::Q4_K_M, TensorKind::AttnV | TensorKind::FfnDown) if more_bits => {
                WeightFormat::Q6_K
            }
            (Quant::Q5_K_M, TensorKind::AttnV | TensorKind::FfnDown) if more_bits => {
                WeightFormat::Q6_K
            }
            (Quant::Q4_K_S, TensorKind::FfnDown) if layer < layers / 8 => WeightFormat::Q5_K,
            (Quant::Q5_K_M, _) => WeightFormat::Q5_K,
            _ => WeightFormat::Q4_K,
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

    #[test]
    fn q4_k_m_gives_half_of_a_32_layer_models_v_and_down_six_bits() {
        let six = (0..32)
            .filter(|&l| Quant::Q4_K_M.format(TensorKind::FfnDown, l, 32) == WeightFormat::Q6_K)
            .count();
        assert_eq!(six, 16);
        assert_eq!(
            Quant::Q4_K_M.format(TensorKind::AttnQKO, 0, 32),
            WeightFormat::Q4_K
        );
        assert_eq!(
            Quant::Uniform(WeightFormat::Q4_0).format(TensorKind::Output, 0, 32),
            WeightFormat::Q6_K
        );
        assert_eq!(
            Quant::Uniform(WeightFormat::Q8_0).format(TensorKind::Output, 0, 32),
            WeightFormat::Q8_0
        );
    }
}
