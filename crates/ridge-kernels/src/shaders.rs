//! The WGSL sources in `shaders/`, compiled into the crate, and every variant Ridge builds
//! from them (the naga test validates and translates each one).

use ridge_core::{DType, Defines, ShaderSource};

/// `shaders/gemm.wgsl`.
pub static GEMM: ShaderSource = ShaderSource {
    name: "gemm",
    body: include_str!("../../../shaders/gemm.wgsl"),
};
/// `shaders/gemm_coop.wgsl`.
pub static GEMM_COOP: ShaderSource = ShaderSource {
    name: "gemm_coop",
    body: include_str!("../../../shaders/gemm_coop.wgsl"),
};
/// `shaders/gemm_reduce.wgsl`: split-K's second pass.
pub static GEMM_REDUCE: ShaderSource = ShaderSource {
    name: "gemm_reduce",
    body: include_str!("../../../shaders/gemm_reduce.wgsl"),
};
/// `shaders/qmatmul.wgsl`: products with block-quantized weights, quantized row lookup.
pub static QMATMUL: ShaderSource = ShaderSource {
    name: "qmatmul",
    body: include_str!("../../../shaders/qmatmul.wgsl"),
};
/// `shaders/include/qmatmul_coop.wgsl`: the quantized product on cooperative matrices,
/// inserted at `shaders/qmatmul.wgsl`'s `//@COOP` line in its tensor-core variants.
pub const QMATMUL_COOP: &str = include_str!("../../../shaders/include/qmatmul_coop.wgsl");
/// `shaders/include/quant_blocks.wgsl`: reading ggml's quantized blocks, a template over its
/// `QB_` prefix ([`quant_blocks`]).
const QUANT_BLOCKS: &str = include_str!("../../../shaders/include/quant_blocks.wgsl");

/// The quantized blocks' functions for the matrix bound as `{prefix}quants` and
/// `{prefix}scales` in format `{prefix}FORMAT`: inserted at a shader's `//@QUANT_BLOCKS` line
/// (`shaders/qmatmul.wgsl` with no prefix) or twice where one shader reads two matrices.
pub fn quant_blocks(prefix: &str) -> String {
    QUANT_BLOCKS.replace("QB_", prefix)
}
/// `shaders/rope.wgsl`: rotary position embedding and the KV-cache append.
pub static ROPE: ShaderSource = ShaderSource {
    name: "rope",
    body: include_str!("../../../shaders/rope.wgsl"),
};
/// `shaders/kv_attention.wgsl`: causal grouped-query attention over a KV cache.
pub static KV_ATTENTION: ShaderSource = ShaderSource {
    name: "kv_attention",
    body: include_str!("../../../shaders/kv_attention.wgsl"),
};
/// `shaders/kv_attention_coop.wgsl`: a prompt's attention over the KV cache on cooperative
/// matrices.
pub static KV_ATTENTION_COOP: ShaderSource = ShaderSource {
    name: "kv_attention_coop",
    body: include_str!("../../../shaders/kv_attention_coop.wgsl"),
};
/// `shaders/include/kv_attention_io.wgsl`: the parameters and bindings both KV-cache attention
/// shaders share, inserted at their `//@IO` line.
pub const KV_ATTENTION_IO: &str = include_str!("../../../shaders/include/kv_attention_io.wgsl");
/// `shaders/include/reduce.wgsl`: a workgroup's sum or maximum of one f32 an invocation,
/// inserted at a shader's `//@REDUCE` line (the KV-cache attention's merge, the fused decode
/// attention block).
pub const REDUCE: &str = include_str!("../../../shaders/include/reduce.wgsl");
/// `shaders/decode_attention.wgsl`: a decoder layer's attention block for one token.
pub static DECODE_ATTENTION: ShaderSource = ShaderSource {
    name: "decode_attention",
    body: include_str!("../../../shaders/decode_attention.wgsl"),
};
/// `shaders/argmax.wgsl`: greedy decoding's pick.
pub static ARGMAX: ShaderSource = ShaderSource {
    name: "argmax",
    body: include_str!("../../../shaders/argmax.wgsl"),
};
/// `shaders/sample.wgsl`: sampling the next token on the GPU.
pub static SAMPLE: ShaderSource = ShaderSource {
    name: "sample",
    body: include_str!("../../../shaders/sample.wgsl"),
};
/// `shaders/norm.wgsl`.
pub static NORM: ShaderSource = ShaderSource {
    name: "norm",
    body: include_str!("../../../shaders/norm.wgsl"),
};
/// `shaders/softmax.wgsl`.
pub static SOFTMAX: ShaderSource = ShaderSource {
    name: "softmax",
    body: include_str!("../../../shaders/softmax.wgsl"),
};
/// `shaders/elementwise.wgsl`.
pub static ELEMENTWISE: ShaderSource = ShaderSource {
    name: "elementwise",
    body: include_str!("../../../shaders/elementwise.wgsl"),
};
/// `shaders/broadcast.wgsl`: binary element-wise ops broadcast by strides.
pub static BROADCAST: ShaderSource = ShaderSource {
    name: "broadcast",
    body: include_str!("../../../shaders/broadcast.wgsl"),
};
/// `shaders/layout.wgsl`.
pub static LAYOUT: ShaderSource = ShaderSource {
    name: "layout",
    body: include_str!("../../../shaders/layout.wgsl"),
};

/// `shaders/embedding.wgsl`.
pub static EMBEDDING: ShaderSource = ShaderSource {
    name: "embedding",
    body: include_str!("../../../shaders/embedding.wgsl"),
};
/// `shaders/pool.wgsl`.
pub static POOL: ShaderSource = ShaderSource {
    name: "pool",
    body: include_str!("../../../shaders/pool.wgsl"),
};

/// `shaders/attention.wgsl`.
pub static ATTENTION: ShaderSource = ShaderSource {
    name: "attention",
    body: include_str!("../../../shaders/attention.wgsl"),
};
/// `shaders/attention_tiled.wgsl`.
pub static ATTENTION_TILED: ShaderSource = ShaderSource {
    name: "attention_tiled",
    body: include_str!("../../../shaders/attention_tiled.wgsl"),
};
/// `shaders/include/attention_io.wgsl`: the parameters, bindings and loads both attention
/// shaders share, inserted at their `//@IO` line.
pub const ATTENTION_IO: &str = include_str!("../../../shaders/include/attention_io.wgsl");
/// `shaders/include/gelu.wgsl`: erf and GELU over `VF` (f32 or vec4<f32>), inserted at the
/// `//@GELU` line of the element-wise and GEMM shaders.
pub const GELU: &str = include_str!("../../../shaders/include/gelu.wgsl");
/// `shaders/ceilings.wgsl`.
pub static CEILINGS: ShaderSource = ShaderSource {
    name: "ceilings",
    body: include_str!("../../../shaders/ceilings.wgsl"),
};

/// `shaders/tensor_peak.wgsl`: the cooperative-matrix ceiling.
pub static TENSOR_PEAK: ShaderSource = ShaderSource {
    name: "tensor_peak",
    body: include_str!("../../../shaders/tensor_peak.wgsl"),
};

/// One buildable shader variant: source, entry point, defines.
pub type Variant = (&'static ShaderSource, &'static str, Defines);

/// `alias T` (and `enable f16`) without needing a device.
pub fn storage_defines(dtype: DType) -> Defines {
    match dtype {
        DType::F32 => Defines::new().alias("T", "f32"),
        DType::F16 => Defines::new().enable("f16").alias("T", "f16"),
        DType::U32 => Defines::new().alias("T", "u32"),
    }
}

/// Every variant the launchers can build with their default configurations, for both
/// storage types.
pub fn all_variants() -> Vec<Variant> {
    let mut v = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        v.extend(crate::gemm::variants(dtype));
        if dtype == DType::F16 {
            v.extend(crate::gemm::coop_variants());
            v.extend(crate::ceilings::tensor_peak_variants());
        }
        v.extend(crate::norm::variants(dtype));
        v.extend(crate::softmax::variants(dtype));
        v.extend(crate::elementwise::variants(dtype));
        v.extend(crate::layout::variants(dtype));
        v.extend(crate::embedding::variants(dtype));
        v.extend(crate::pool::variants(dtype));
        v.extend(crate::ceilings::variants(dtype));
        v.extend(crate::attention::variants(dtype));
        v.extend(crate::qmatmul::variants(dtype));
        v.extend(crate::rope::variants(dtype));
        v.extend(crate::kv_attention::variants(dtype));
        v.extend(crate::decode_attention::variants(dtype));
        v.extend(crate::argmax::variants(dtype));
        v.extend(crate::sample::variants(dtype));
    }
    v
}
