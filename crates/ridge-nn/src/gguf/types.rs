//! ggml's tensor types as GGUF files number them. A type that stores weights takes its block
//! geometry from [`WeightFormat::block`] (one table of block layouts in Ridge); the few that
//! never hold a model's weights (ggml's integer, f64 and dot-product scratch types) carry
//! theirs here.

use ridge_model::decoder::WeightFormat;

/// A ggml tensor type: its id in GGUF files, name, and block geometry (elements per block,
/// bytes per block), from ggml's `ggml_type_traits` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GgmlType {
    /// The id stored in GGUF files.
    pub id: u32,
    /// ggml's name (`Q4_0`, `F32`, …).
    pub name: &'static str,
    /// Elements per block (1 for plain types).
    pub block: u64,
    /// Bytes per block.
    pub block_bytes: u64,
}

/// How a type's block geometry is known.
enum Geometry {
    /// A weight format's ([`WeightFormat::block`]).
    Weights(WeightFormat),
    /// Elements and bytes per block of a type no model's weights use (`ggml_type_traits`).
    Other(u64, u64),
}

/// ggml's types by GGUF id (`enum ggml_type` in `ggml.h`; ids 4, 5, 31–33 and 36–38 are
/// retired and absent).
const GGML_TYPES: &[(u32, &str, Geometry)] = {
    use Geometry::{Other, Weights as W};
    use WeightFormat::*;
    &[
        (0, "F32", W(F32)),
        (1, "F16", W(F16)),
        (2, "Q4_0", W(Q4_0)),
        (3, "Q4_1", W(Q4_1)),
        (6, "Q5_0", W(Q5_0)),
        (7, "Q5_1", W(Q5_1)),
        (8, "Q8_0", W(Q8_0)),
        (9, "Q8_1", Other(32, 36)),
        (10, "Q2_K", W(Q2_K)),
        (11, "Q3_K", W(Q3_K)),
        (12, "Q4_K", W(Q4_K)),
        (13, "Q5_K", W(Q5_K)),
        (14, "Q6_K", W(Q6_K)),
        (15, "Q8_K", Other(256, 292)),
        (16, "IQ2_XXS", W(IQ2_XXS)),
        (17, "IQ2_XS", W(IQ2_XS)),
        (18, "IQ3_XXS", W(IQ3_XXS)),
        (19, "IQ1_S", W(IQ1_S)),
        (20, "IQ4_NL", W(IQ4_NL)),
        (21, "IQ3_S", W(IQ3_S)),
        (22, "IQ2_S", W(IQ2_S)),
        (23, "IQ4_XS", W(IQ4_XS)),
        (24, "I8", Other(1, 1)),
        (25, "I16", Other(1, 2)),
        (26, "I32", Other(1, 4)),
        (27, "I64", Other(1, 8)),
        (28, "F64", Other(1, 8)),
        (29, "IQ1_M", W(IQ1_M)),
        (30, "BF16", W(BF16)),
        (34, "TQ1_0", W(TQ1_0)),
        (35, "TQ2_0", W(TQ2_0)),
        (39, "MXFP4", W(MXFP4)),
    ]
};

impl GgmlType {
    fn of(&(id, name, ref geometry): &(u32, &'static str, Geometry)) -> Self {
        let (block, block_bytes) = match *geometry {
            Geometry::Weights(format) => {
                let (n, bytes) = format.block();
                (n as u64, bytes as u64)
            }
            Geometry::Other(n, bytes) => (n, bytes),
        };
        Self {
            id,
            name,
            block,
            block_bytes,
        }
    }

    /// The type with GGUF id `id`, if ggml defines it.
    pub fn from_id(id: u32) -> Option<Self> {
        GGML_TYPES.iter().find(|t| t.0 == id).map(Self::of)
    }

    /// The type named `name` (`Q4_0`, …), if ggml defines it.
    pub fn from_name(name: &str) -> Option<Self> {
        GGML_TYPES.iter().find(|t| t.1 == name).map(Self::of)
    }

    /// The weight format it stores, if a model's weights can be stored in it.
    pub fn weight_format(&self) -> Option<WeightFormat> {
        GGML_TYPES
            .iter()
            .find(|t| t.0 == self.id)
            .and_then(|t| match t.2 {
                Geometry::Weights(format) => Some(format),
                Geometry::Other(..) => None,
            })
    }

    /// Bytes of `elements` values, `None` unless they are whole blocks (or on overflow).
    pub fn bytes(&self, elements: u64) -> Option<u64> {
        if !elements.is_multiple_of(self.block) {
            return None;
        }
        (elements / self.block).checked_mul(self.block_bytes)
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_weight_format_has_its_ggml_id_and_name() {
        for format in WeightFormat::ALL {
            let t = GgmlType::from_name(format.name()).expect("a ggml type");
            assert_eq!(t.weight_format(), Some(format));
            assert_eq!(GgmlType::from_id(t.id), Some(t));
        }
        // ggml.h: GGML_TYPE_Q4_1 = 3, GGML_TYPE_Q6_K = 14, GGML_TYPE_BF16 = 30.
        assert_eq!(
            GgmlType::from_name("Q4_1").map(|t| (t.id, t.block_bytes)),
            Some((3, 20))
        );
        assert_eq!(
            GgmlType::from_id(14).map(|t| (t.block, t.block_bytes)),
            Some((256, 210))
        );
        assert_eq!(GgmlType::from_id(30).map(|t| t.name), Some("BF16"));
        assert_eq!(GgmlType::from_id(4), None);
    }
}
