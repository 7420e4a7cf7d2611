//! The layers both models are built from. Each owns its weights on the GPU and records its
//! dispatches; the models (the BERT encoder, the Llama decoder) are these in a row, plus their
//! attention.
//!
//! - [`Linear`]: `y = x·Wᵀ (+ b)` with dense weights (the GEMM, f32 or f16) or block-quantized
//!   ones (the quantized products, Q8_0/Q4_0/Q4_1), and an [`Epilogue`] fused into the same
//!   dispatch.
//! - [`Norm`]: layer norm (γ, β) or RMS norm (γ) over the last axis.

use ridge_core::{Context, DType, Tensor};
use ridge_kernels::qmatmul::RopeAppend;
use ridge_kernels::quant::QuantMatrix;
use ridge_kernels::{Gemm, NormKind, PairLayout, QMatmul, RopeQkv, RopeTable};
use ridge_model::OpCost;

use crate::error::{Error, Result};

/// What a linear layer does with its product in the same dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epilogue {
    /// `y = x·Wᵀ + b`.
    None,
    /// `y = gelu(x·Wᵀ + b)` (erf form; dense weights).
    Gelu,
    /// `y += x·Wᵀ + b`: the residual stream, already in `y`.
    Residual,
    /// `y[:, i] = silu(g_i)·u_i` over the (gate, up) row pairs of an interleaved `W`
    /// (quantized weights; [`ridge_kernels::quant::interleave_rows`]).
    SwiGlu,
}

/// The weights of a linear layer.
#[derive(Clone, Debug)]
pub enum Linear {
    /// `W` `[N, K]` in f32 or f16, an optional bias `[N]`.
    Dense {
        /// The weight, `[out, in]` as PyTorch stores it.
        weight: Tensor,
        /// The bias.
        bias: Option<Tensor>,
    },
    /// `W` `[N, K]` block-quantized, packed as the file stores it; no bias.
    Quantized(QuantMatrix),
}

impl Linear {
    /// Output features `N` (rows of `W`).
    pub fn out_features(&self) -> usize {
        match self {
            Linear::Dense { weight, .. } => weight.shape()[0],
            Linear::Quantized(w) => w.rows,
        }
    }

    /// Input features `K`.
    pub fn in_features(&self) -> usize {
        match self {
            Linear::Dense { weight, .. } => weight.shape()[1],
            Linear::Quantized(w) => w.cols,
        }
    }

    /// Columns of `y` with `epilogue`: `N`, or `N/2` gated.
    pub fn out_cols(&self, epilogue: Epilogue) -> usize {
        match epilogue {
            Epilogue::SwiGlu => self.out_features() / 2,
            _ => self.out_features(),
        }
    }

    /// Bytes of the weights (and bias) on the GPU.
    pub fn bytes(&self) -> u64 {
        match self {
            Linear::Dense { weight, bias } => {
                weight.size_bytes() + bias.as_ref().map_or(0, Tensor::size_bytes)
            }
            Linear::Quantized(w) => w.bytes(),
        }
    }

    fn gemm(&self, m: usize, epilogue: Epilogue) -> Gemm {
        Gemm {
            trans_b: true,
            gelu: epilogue == Epilogue::Gelu,
            beta: if epilogue == Epilogue::Residual {
                1.0
            } else {
                0.0
            },
            ..Gemm::new(m, self.out_features(), self.in_features())
        }
    }

    fn qmatmul(m: usize, epilogue: Epilogue) -> QMatmul {
        QMatmul {
            m,
            residual: epilogue == Epilogue::Residual,
            glu: epilogue == Epilogue::SwiGlu,
            rms_norm: false,
            rope: false,
        }
    }

    /// The quantized weights, if these are.
    pub fn quantized(&self) -> Option<&QuantMatrix> {
        match self {
            Linear::Quantized(w) => Some(w),
            Linear::Dense { .. } => None,
        }
    }

    /// One token's product with `parts` partial sums pending in the residual stream
    /// ([`ridge_kernels::DecodeAttention`]'s heads' shares of the O projection): with
    /// [`Epilogue::Residual`] `y` is the stream `[1 + parts, N]`, its pending rows added into
    /// row 0 with the product; otherwise `x` is the stream `[1 + parts, K]`, its rows summed
    /// as they are read (and normalised by `norm`, an RMS norm, when given).
    ///
    /// Errors: [`Error::Input`] for dense weights or a norm other than an RMS norm; as
    /// [`QMatmul::run_with_parts`].
    pub fn forward_pending(
        &self,
        ctx: &Context,
        norm: Option<&Norm>,
        x: &Tensor,
        y: &Tensor,
        epilogue: Epilogue,
        parts: usize,
    ) -> Result<()> {
        let Some(w) = self.quantized() else {
            return Err(Error::Input(
                "pending partial sums join quantized products only".into(),
            ));
        };
        if norm.is_some_and(|n| !self.fuses(n)) {
            return Err(Error::Input(
                "pending partial sums are normalised by an RMS norm only".into(),
            ));
        }
        let q = QMatmul {
            rms_norm: norm.is_some(),
            ..Self::qmatmul(1, epilogue)
        };
        let norm = norm.map(|n| (&n.gamma, n.eps));
        Ok(q.run_with_parts(ctx, x, norm, parts, w, y)?)
    }

    /// Whether `norm` before this layer runs inside the product (quantized weights after an
    /// RMS norm) rather than as a dispatch of its own.
    fn fuses(&self, norm: &Norm) -> bool {
        matches!(self, Linear::Quantized(_)) && norm.kind == NormKind::RmsNorm
    }

    /// A Q/K/V projection with its norm before and RoPE + the KV-cache append after: `q`
    /// `[T, nh, dh]` and the caches' rows `pos0..pos0 + T`. One dispatch where the weights
    /// are quantized, the norm an RMS norm and the pairs adjacent (the RoPE in the product's
    /// epilogue); else the norm, the product into a temporary, then [`RopeQkv`].
    ///
    /// Errors: as [`Linear::forward_normed`] and [`RopeQkv::run`].
    #[allow(clippy::too_many_arguments)]
    pub fn forward_qkv_rope(
        &self,
        ctx: &Context,
        norm: &Norm,
        x: &Tensor,
        rope: &RopeQkv,
        table: &RopeTable,
        k_cache: &Tensor,
        v_cache: &Tensor,
        q: &Tensor,
    ) -> Result<()> {
        match self {
            Linear::Quantized(w) if self.fuses(norm) && rope.layout == PairLayout::Adjacent => {
                let k = self.in_features();
                let m = x.numel() / k.max(1);
                let op = QMatmul {
                    rms_norm: true,
                    rope: true,
                    ..Self::qmatmul(m, Epilogue::None)
                };
                let append = RopeAppend {
                    table,
                    k_cache,
                    v_cache,
                    heads: rope.heads,
                    kv_heads: rope.kv_heads,
                    pos0: rope.pos0,
                };
                Ok(op.run_fused(
                    ctx,
                    &x.reshape(&[m, k])?,
                    Some((&norm.gamma, norm.eps)),
                    Some(&append),
                    w,
                    q,
                )?)
            }
            _ => {
                let qkv = Tensor::empty(ctx, &[rope.tokens, self.out_features()], x.dtype())?;
                self.forward_normed(ctx, norm, x, &qkv, Epilogue::None)?;
                Ok(rope.run(ctx, &qkv, table, q, k_cache, v_cache)?)
            }
        }
    }

    /// `y = norm(x)·Wᵀ (+ b)` with `epilogue`: one dispatch where the weights are quantized
    /// and the norm is an RMS norm (the product normalises each row as it reads it), else the
    /// norm's dispatch into a temporary, then the product's.
    ///
    /// Errors: as [`Linear::forward`] and [`Norm::forward`].
    pub fn forward_normed(
        &self,
        ctx: &Context,
        norm: &Norm,
        x: &Tensor,
        y: &Tensor,
        epilogue: Epilogue,
    ) -> Result<()> {
        match self {
            Linear::Quantized(w) if self.fuses(norm) => {
                let k = self.in_features();
                let m = x.numel() / k.max(1);
                let q = QMatmul {
                    rms_norm: true,
                    ..Self::qmatmul(m, epilogue)
                };
                let y2 = y.reshape(&[m, self.out_cols(epilogue)])?;
                Ok(q.run_with_norm(ctx, &x.reshape(&[m, k])?, &norm.gamma, norm.eps, w, &y2)?)
            }
            _ => {
                let normed = Tensor::empty(ctx, x.shape(), x.dtype())?;
                norm.forward(ctx, x, &normed)?;
                self.forward(ctx, &normed, y, epilogue)
            }
        }
    }

    /// The dispatch's name in profiles, for `m` rows of `x`.
    pub fn op_name(&self, m: usize, epilogue: Epilogue) -> &'static str {
        match self {
            Linear::Dense { bias, .. } => self.gemm(m, epilogue).kind(bias.is_some()),
            Linear::Quantized(_) => Self::qmatmul(m, epilogue).name(),
        }
    }

    /// The dispatch's cost for `m` rows of `x` in `dtype`.
    pub fn cost(&self, m: usize, epilogue: Epilogue, dtype: DType) -> OpCost {
        match self {
            Linear::Dense { bias, .. } => {
                self.gemm(m, epilogue)
                    .cost(dtype, dtype, 1, 1, bias.is_some())
            }
            Linear::Quantized(w) => {
                Self::qmatmul(m, epilogue).cost(w.format, w.rows, w.cols, dtype)
            }
        }
    }

    /// `y = x·Wᵀ (+ b)` with `epilogue`, one dispatch. `x` is `[.., K]` (its rows are `M`),
    /// `y` `[M, out_cols]` in any shape of that size.
    ///
    /// Errors: [`Error::Input`] for an epilogue the weights do not have (GELU on quantized
    /// weights, SwiGLU on dense ones); the kernels' shape, dtype and limit errors.
    pub fn forward(&self, ctx: &Context, x: &Tensor, y: &Tensor, epilogue: Epilogue) -> Result<()> {
        let k = self.in_features();
        let m = x.numel() / k.max(1);
        let x2 = x.reshape(&[m, k])?;
        let y2 = y.reshape(&[m, self.out_cols(epilogue)])?;
        match (self, epilogue) {
            (Linear::Dense { .. }, Epilogue::SwiGlu) => Err(Error::Input(
                "a SwiGLU epilogue needs quantized, interleaved gate/up weights".into(),
            )),
            (Linear::Quantized(_), Epilogue::Gelu) => Err(Error::Input(
                "quantized products have no GELU epilogue".into(),
            )),
            (Linear::Dense { weight, bias }, _) => {
                Ok(self
                    .gemm(m, epilogue)
                    .run(ctx, &x2, weight, bias.as_ref(), &y2)?)
            }
            (Linear::Quantized(w), _) => Ok(Self::qmatmul(m, epilogue).run(ctx, &x2, w, &y2)?),
        }
    }
}

/// A normalisation over the last axis with its learned scale (and, for layer norm, shift).
#[derive(Clone, Debug)]
pub struct Norm {
    kind: NormKind,
    gamma: Tensor,
    beta: Option<Tensor>,
    eps: f32,
}

impl Norm {
    /// Layer norm with `gamma` and `beta` `[cols]` (Ba, Kiros & Hinton, 2016).
    pub fn layer(gamma: Tensor, beta: Tensor, eps: f32) -> Self {
        Self {
            kind: NormKind::LayerNorm,
            gamma,
            beta: Some(beta),
            eps,
        }
    }

    /// RMS norm with `gamma` `[cols]` (Zhang & Sennrich, 2019).
    pub fn rms(gamma: Tensor, eps: f32) -> Self {
        Self {
            kind: NormKind::RmsNorm,
            gamma,
            beta: None,
            eps,
        }
    }

    fn op(&self, rows: usize) -> ridge_kernels::Norm {
        ridge_kernels::Norm {
            kind: self.kind,
            rows,
            cols: self.gamma.numel(),
            eps: self.eps,
        }
    }

    /// γ and eps of an RMS norm (`None` for a layer norm): what kernels that normalise
    /// their input as they read it take.
    pub fn rms_terms(&self) -> Option<(&Tensor, f32)> {
        (self.kind == NormKind::RmsNorm).then_some((&self.gamma, self.eps))
    }

    /// Bytes of the parameters on the GPU.
    pub fn bytes(&self) -> u64 {
        self.gamma.size_bytes() + self.beta.as_ref().map_or(0, Tensor::size_bytes)
    }

    /// The dispatch's name in profiles (`layer_norm`, `rms_norm`).
    pub fn op_name(&self) -> &'static str {
        self.op(1).name()
    }

    /// The dispatch's cost over `rows` rows in `dtype`.
    pub fn cost(&self, rows: usize, dtype: DType) -> OpCost {
        self.op(rows).cost(dtype, true)
    }

    /// The norm of every row of `x` into `y` (same shape), one dispatch.
    ///
    /// Errors: the kernel's shape, dtype and limit errors.
    pub fn forward(&self, ctx: &Context, x: &Tensor, y: &Tensor) -> Result<()> {
        let cols = self.gamma.numel();
        let rows = x.numel() / cols.max(1);
        let (x, y) = (x.reshape(&[rows, cols])?, y.reshape(&[rows, cols])?);
        Ok(self
            .op(rows)
            .run(ctx, &x, Some(&self.gamma), self.beta.as_ref(), &y)?)
    }
}
