//! Which attention a forward runs: a prompt into an empty cache takes the tiled dense
//! kernel with a causal mask (query tiles share each key tile's loads: prefill is
//! compute-bound), everything else the KV-cache kernel (decode, and prompts appended to a
//! conversation, whose queries start past position 0). With f16 activations on an adapter
//! with cooperative matrices, every prompt of 33 tokens or more (from any position) takes the
//! KV-cache kernel's tensor-core form instead (`shaders/kv_attention_coop.wgsl`).
//!
//! Grouped-query heads on the dense kernel: [`Attention::grouped_causal`], straight out of
//! the cache `[capacity, nkv, dh]`; Q and the output stay `[T, nh, dh]`.

use ridge_core::{Context, DType, Result, Tensor};
use ridge_kernels::KvAttention;
use ridge_kernels::attention::Attention;
use ridge_model::OpCost;

/// Prompts from this many tokens on take the dense kernel. Measured on the H200 (wall clock
/// of the whole prefill, benches/NOTES.md run 94): the dense kernel took 21 % longer at 256
/// tokens (its 2–4 query tiles per head leave the GPU idle where the KV-cache kernel runs a
/// workgroup per token), 15 % at 512, and 1 % less at 1024, where its profiled time is a
/// third below the KV-cache kernel's; it reads each key once per query tile instead of once
/// per token, so longer prompts gain more.
const DENSE_MIN_TOKENS: usize = 1024;

/// The attention of one layer's forward over `tokens` tokens from `pos0`.
pub(super) enum Attend {
    /// Against the KV cache (split across workgroups and merged where long).
    Cache(KvAttention),
    /// Dense causal attention over the prompt's own keys (`pos0 = 0`).
    Dense(Attention),
    /// A prompt against the KV cache on the tensor cores (f16; any `pos0`; its keys split and
    /// merged past [`ridge_kernels::kv_attention::COOP_SPAN`]).
    TensorCores(KvAttention),
}

impl Attend {
    /// The kernel for `tokens` queries at positions `pos0..` with `heads` query heads over
    /// `kv_heads` KV heads of width `head_dim`; `tensor_cores` where the adapter runs the
    /// KV-cache kernel's prompt form on them ([`KvAttention::tensor_cores_fit`]): then every
    /// prompt [`KvAttention::prompt_for_tensor_cores`] takes it (a merge pass follows where
    /// [`KvAttention::coop_split`] splits its keys).
    pub(super) fn new(
        tokens: usize,
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
        pos0: usize,
        tensor_cores: bool,
    ) -> Self {
        let cache = KvAttention {
            tokens,
            heads,
            kv_heads,
            head_dim,
            pos0,
        };
        let dense_fits = head_dim.is_multiple_of(4) && head_dim <= 256;
        if tensor_cores && cache.prompt_for_tensor_cores() {
            return Self::TensorCores(cache);
        }
        if pos0 > 0
            || tokens < DENSE_MIN_TOKENS
            || !dense_fits
            || kv_heads == 0
            || !heads.is_multiple_of(kv_heads)
        {
            return Self::Cache(cache);
        }
        Self::Dense(Attention::grouped_causal(
            kv_heads,
            heads / kv_heads,
            tokens,
            head_dim,
        ))
    }

    /// Attention of `q` `[T, nh, dh]` against the caches' first `pos0 + T` rows into `out`.
    ///
    /// Errors: as [`KvAttention::run`] and [`Attention::run`].
    pub(super) fn run(
        &self,
        ctx: &Context,
        q: &Tensor,
        k_cache: &Tensor,
        v_cache: &Tensor,
        out: &Tensor,
    ) -> Result<()> {
        match self {
            Self::Cache(a) | Self::TensorCores(a) => a.run(ctx, q, k_cache, v_cache, out),
            Self::Dense(a) => a.run(ctx, q, k_cache, v_cache, None, None, out),
        }
    }

    /// The dispatches [`Attend::run`] makes, as (profile name, cost).
    pub(super) fn ops(&self, dtype: DType) -> Vec<(&'static str, OpCost)> {
        match self {
            Self::Dense(a) => vec![("attention", a.cost(dtype, None))],
            Self::TensorCores(a) => cache_ops(a, dtype, a.coop_split().0),
            // A GPU's spans: a CPU driver's are half as long, its merge reading twice the
            // records (under 2 % of the attention's bytes at 4096 keys).
            Self::Cache(a) => cache_ops(a, dtype, a.split(false).0),
        }
    }
}

/// Attention over the cache in `spans` spans of keys: the kernel, and the merge pass where
/// there is more than one.
fn cache_ops(a: &KvAttention, dtype: DType, spans: usize) -> Vec<(&'static str, OpCost)> {
    let mut ops = vec![("kv_attention", a.cost(dtype))];
    if spans > 1 {
        ops.push(("kv_attention_merge", a.merge_cost(spans)));
    }
    ops
}
