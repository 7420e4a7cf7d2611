//! Ridge's dispatches of a Llama forward — which kernels, in which order, at what cost — from
//! the configuration and the weights' formats alone, without a GPU: what a profile is held
//! against op by op ([`super::Llama::plan`]), and what `ridge predict --report` prices with
//! an adapter's fitted terms.
//!
//! Every linear weight of the decoder is block-quantized and every norm an RMSNorm, so each
//! norm runs inside the product after it and RoPE with the KV-cache append inside the Q/K/V
//! product's epilogue (see the module docs of [`super`]): per layer the Q/K/V product, the
//! attention (and its merge pass where its keys are split), the O projection with the
//! residual, the gate/up product with SwiGLU, the down projection with the residual; a decode
//! step with the fused attention block ([`DecoderPlan::fused_attention`]) runs the first
//! three as one (two past 512 keys: its spans, then their merge with the O shares). The GPU
//! tests hold this list against a profile's dispatches, name by name.

use ridge_core::DType;
use ridge_kernels::qmatmul::MatvecRule;
use ridge_kernels::quant::QuantFormat;
use ridge_kernels::{DecodeAttention, QMatmul};
use ridge_model::calibrate::Calibrated;
use ridge_model::{Ceilings, OpCost};

use super::attend::Attend;
use super::config::LlamaConfig;
use super::{Loader, runs};
use crate::error::{Error, Result};
use crate::gguf::Gguf;

/// One dispatch of a forward pass.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedOp {
    /// The profiler span's name (`qmatvec`, `kv_attention`, …).
    pub name: &'static str,
    /// FLOPs and bytes ([`ridge_model::OpCost`]).
    pub cost: OpCost,
    /// The kind `ridge bench` sweeps it as, whose fitted terms price it, and the cost they
    /// price: its name and cost, but `kv_attention_prefill` for a prompt's attention over the
    /// cache, `attention_causal` for a long prompt's dense attention, and `kv_attention_split` for a decode step's attention split across
    /// workgroups, priced with its merge pass (the sweep times the two together: a different
    /// algorithm from the one-pass kernel of short contexts); `None` for that merge pass.
    pub priced: Option<(&'static str, OpCost)>,
}

impl PlannedOp {
    /// The swept kind that prices it: its own name but where [`PlannedOp::priced`] names
    /// another (a merge pass: its own).
    pub fn kind(&self) -> &'static str {
        self.priced.map_or(self.name, |p| p.0)
    }
}

/// What one planned dispatch is priced at ([`price_ops`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpPrice {
    /// Seconds: its kind's fitted time, or its own roofline time where the report did not
    /// fit that kind; 0 for a merge pass priced inside its split kernel's fitted kind.
    pub seconds: f64,
    /// Whether fitted terms priced it.
    pub fitted: bool,
    /// Whether it is priced inside the op before it (a merge pass).
    pub folded: bool,
}

/// `ops`, in order, priced by the terms `cal` fitted for `dtype` storage (`"f32"`, `"f16"`),
/// `roof(kind)` the roofline a kind is held against where the report did not fit it
/// (`ridge_model::calibrate`). A split attention's kind is fitted on the split kernel and its
/// merge pass timed together: where the report fitted it the merge pass costs nothing more;
/// where it did not, each of the two dispatches is priced by its own roofline (pricing the
/// pair as one would drop a dispatch's overhead).
pub fn price_ops(
    ops: &[PlannedOp],
    cal: &Calibrated,
    dtype: &str,
    roof: impl Fn(&str) -> Ceilings,
) -> Vec<OpPrice> {
    let mut folded_into_fit = false;
    ops.iter()
        .map(|op| {
            let own_roofline = || roof(op.kind()).predict(&op.cost).seconds;
            match op.priced {
                Some((kind, cost)) => {
                    let (s, fitted) = cal.price(kind, dtype, &cost, &roof(kind));
                    folded_into_fit = fitted && cost != op.cost;
                    OpPrice {
                        seconds: if fitted { s } else { own_roofline() },
                        fitted,
                        folded: false,
                    }
                }
                None if folded_into_fit => OpPrice {
                    seconds: 0.0,
                    fitted: true,
                    folded: true,
                },
                None => OpPrice {
                    seconds: own_roofline(),
                    fitted: false,
                    folded: false,
                },
            }
        })
        .collect()
}

/// The weight formats of one layer's products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerFormats {
    /// Q, K and V (one product: one format).
    pub qkv: QuantFormat,
    /// The O projection.
    pub out: QuantFormat,
    /// Gate and up (one product: one format).
    pub gate_up: QuantFormat,
    /// The down projection.
    pub down: QuantFormat,
}

/// What decides a Llama forward's dispatches and their costs.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderPlan {
    /// The shape.
    pub config: LlamaConfig,
    /// Activations and KV cache: f32, or f16.
    pub dtype: DType,
    /// Whether prompts' attention runs on the tensor cores (f16 on an adapter with
    /// cooperative matrices: [`ridge_kernels::KvAttention::tensor_cores_fit`]).
    pub tensor_cores: bool,
    /// Whether a decode step runs each layer's attention block as one dispatch
    /// ([`ridge_kernels::DecodeAttention`]: the norm, Q/K/V, RoPE, the cache append, the
    /// attention and the heads' shares of the O projection, pending in the stream for the
    /// gate/up and down products to add) where its shape and context fit
    /// ([`DecoderPlan::decode_attention`]; two past 512 keys). Set where the block is chosen
    /// ([`ridge_kernels::DecodeAttention::chosen`]: off unless forced, slower on an H100)
    /// and the adapter runs it ([`ridge_kernels::DecodeAttention::fits`]);
    /// `ridge predict --report` sets it where it is chosen and the report fitted its kind.
    /// The default: off.
    pub fused_attention: bool,
    /// The adapter's one-row launch shapes ([`MatvecRule`]): where one token's products may
    /// round `x` to 8 bits (a GPU with packed dot products), which decides which do
    /// ([`QMatmul::kind_and_cost`]; those are priced as the integer kernel's kinds,
    /// [`QMatmul::kind`]), and whether a row of W takes a lane (a CPU driver). The default:
    /// a GPU's shapes, none rounding `x`.
    pub matvec: MatvecRule,
    /// The token embedding's format.
    pub embed: QuantFormat,
    /// The output projection's (the embedding's when tied).
    pub output: QuantFormat,
    /// Each layer's.
    pub layers: Vec<LayerFormats>,
}

impl DecoderPlan {
    /// Every weight in `format` (a preset priced in one format).
    pub fn uniform(config: LlamaConfig, format: QuantFormat, dtype: DType) -> Self {
        let layer = LayerFormats {
            qkv: format,
            out: format,
            gate_up: format,
            down: format,
        };
        Self {
            layers: vec![layer; config.layers],
            config,
            dtype,
            tensor_cores: false,
            fused_attention: false,
            matvec: MatvecRule::default(),
            embed: format,
            output: format,
        }
    }

    /// The plan of a parsed GGUF file run with `dtype` activations (no tensor cores, no
    /// products rounding `x`: set [`DecoderPlan::tensor_cores`] and
    /// [`DecoderPlan::matvec`] for an adapter that has them). Reads the metadata and
    /// the tensors' types only.
    ///
    /// Errors: as [`LlamaConfig::from_gguf`]; [`Error::Weights`] naming the tensor when one is
    /// missing, has a shape other than the configuration's or a type Ridge does not run, or
    /// when Q, K and V (or gate and up) differ in format; [`Error::Input`] for a dtype other
    /// than f32 and f16.
    pub fn from_gguf(g: &Gguf, dtype: DType) -> Result<Self> {
        if !matches!(dtype, DType::F32 | DType::F16) {
            return Err(Error::Input(format!(
                "the decoder runs in f32 or f16, not {dtype}"
            )));
        }
        let config = LlamaConfig::from_gguf(g)?;
        let c = &config;
        let (h, f, kv) = (c.hidden, c.ffn, c.kv_heads * c.head_dim);
        let loader = Loader { g };
        let mut layers = Vec::with_capacity(c.layers);
        for l in 0..c.layers {
            let p = |n: &str| format!("blk.{l}.{n}.weight");
            let format = |n: &str, rows, cols| -> Result<(String, QuantFormat)> {
                Ok((p(n), loader.format(&p(n), rows, cols)?))
            };
            layers.push(LayerFormats {
                qkv: loader.same_format(&[
                    format("attn_q", h, h)?,
                    format("attn_k", kv, h)?,
                    format("attn_v", kv, h)?,
                ])?,
                out: loader.format(&p("attn_output"), h, h)?,
                gate_up: loader
                    .same_format(&[format("ffn_gate", f, h)?, format("ffn_up", f, h)?])?,
                down: loader.format(&p("ffn_down"), h, f)?,
            });
        }
        let embed = loader.format("token_embd.weight", c.vocab, h)?;
        let output = match g.tensor("output.weight") {
            Some(_) => loader.format("output.weight", c.vocab, h)?,
            None => embed,
        };
        Ok(Self {
            config,
            dtype,
            tensor_cores: false,
            fused_attention: false,
            matvec: MatvecRule::default(),
            embed,
            output,
            layers,
        })
    }

    /// The fused attention block of a forward over `tokens` tokens from `pos0`, where one
    /// runs: one token, [`DecoderPlan::fused_attention`], a shape and context the kernel takes.
    pub fn decode_attention(&self, tokens: usize, pos0: usize) -> Option<DecodeAttention> {
        let block = self.attention_block_at(pos0);
        (tokens == 1 && self.fused_attention && block.shape_fits()).then_some(block)
    }

    /// The fused attention block of this shape for a token at `pos`, whether or not it runs.
    pub(crate) fn attention_block_at(&self, pos: usize) -> DecodeAttention {
        let c = &self.config;
        DecodeAttention {
            hidden: c.hidden,
            heads: c.heads,
            kv_heads: c.kv_heads,
            head_dim: c.head_dim,
            pos,
        }
    }

    /// The dispatches of a forward over `tokens` tokens at positions `pos0..pos0 + tokens`,
    /// in order, with each kernel's own cost, and the argmax of greedy decoding after it.
    pub fn ops(&self, tokens: usize, pos0: usize) -> Vec<PlannedOp> {
        let (t, dt, c) = (tokens, self.dtype, &self.config);
        let (h, kv) = (c.hidden, c.kv_heads * c.head_dim);
        let mut ops: Vec<PlannedOp> = Vec::new();
        // A product over W's `n` rows of `k` values, its name, kind (rounding x where one row
        // of x may: [`QMatmul::kind_and_cost`]) and cost.
        let matmul = |q: QMatmul, format, n: usize, k: usize| {
            let (kind, cost) = q.kind_and_cost(format, n, k, dt, self.matvec);
            (q.name(), kind, cost)
        };
        let mut op = |(name, kind, cost): (&'static str, &'static str, OpCost)| {
            // A merge pass priced inside the kind of the dispatch before it, which the sweep
            // times with its merge: a decode step's split attention, a long row's argmax.
            let folds_into = match name {
                "kv_attention_merge" if t == 1 => Some("kv_attention_split"),
                "decode_attention_merge" => Some("decode_attention_split"),
                "argmax_merge" => Some("argmax"),
                _ => None,
            };
            let priced = match (name, folds_into) {
                (_, Some(whole)) => {
                    let first = ops.last_mut().expect("the pass before its merge");
                    first.priced = Some((whole, first.cost + cost));
                    None
                }
                ("kv_attention", _) if t > 1 => Some(("kv_attention_prefill", cost)),
                ("attention", _) => Some(("attention_causal", cost)),
                _ => Some((kind, cost)),
            };
            ops.push(PlannedOp { name, cost, priced });
        };
        let product = |m, residual, glu, norm, rope| QMatmul {
            m,
            residual,
            glu,
            rms_norm: norm,
            rope,
        };
        let embed = ridge_kernels::qmatmul::gather_cost(self.embed, t, h, dt);
        op(("qembedding", "qembedding", embed));
        let attention = Attend::new(t, c.heads, c.kv_heads, c.head_dim, pos0, self.tensor_cores);
        let fused = self.decode_attention(t, pos0);
        // The heads' partial O products the fused block leaves pending: read by the gate/up
        // and the down products beside the stream's row.
        let pending = |(name, kind, cost): (&'static str, &'static str, OpCost)| {
            let parts = OpCost::new(0.0, (c.heads * h * dt.size()) as f64);
            (
                name,
                kind,
                if fused.is_some() { cost + parts } else { cost },
            )
        };
        for l in &self.layers {
            match fused {
                Some(block) => {
                    for (name, cost) in block.dispatches(dt, l.qkv, l.out) {
                        op((name, name, cost));
                    }
                }
                None => {
                    op(matmul(
                        product(t, false, false, true, true),
                        l.qkv,
                        h + 2 * kv,
                        h,
                    ));
                    for (name, cost) in attention.ops(dt) {
                        op((name, name, cost));
                    }
                    op(matmul(product(t, true, false, false, false), l.out, h, h));
                }
            }
            op(pending(matmul(
                product(t, false, true, true, false),
                l.gate_up,
                2 * c.ffn,
                h,
            )));
            op(pending(matmul(
                product(t, true, false, false, false),
                l.down,
                h,
                c.ffn,
            )));
        }
        op(matmul(
            product(1, false, false, true, false),
            self.output,
            c.vocab,
            h,
        ));
        for (name, cost) in ridge_kernels::argmax::dispatches(1, c.vocab, dt) {
            op((name, name, cost));
        }
        ops
    }

    /// The formats Ridge runs linear weights in, for messages.
    pub fn formats_run() -> String {
        runs()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::file::FileBytes;
    use crate::llama::random::random_gguf;

    fn tiny() -> LlamaConfig {
        LlamaConfig {
            layers: 3,
            hidden: 64,
            ffn: 96,
            heads: 4,
            kv_heads: 2,
            head_dim: 16,
            rope_base: 10_000.0,
            rms_eps: 1e-5,
            context: 2048,
            vocab: 100,
        }
    }

    fn plan() -> DecoderPlan {
        let bytes = random_gguf(&tiny(), QuantFormat::Q4_1, QuantFormat::Q8_0, 3);
        let g = Gguf::parse(FileBytes::from_bytes(Path::new("tiny.gguf"), bytes)).unwrap();
        DecoderPlan::from_gguf(&g, DType::F32).unwrap()
    }

    /// The file's formats, per layer and for the tied embedding; u32 activations refused.
    #[test]
    fn a_gguf_gives_its_formats() {
        let p = plan();
        let q41 = QuantFormat::Q4_1;
        let layer = LayerFormats {
            qkv: q41,
            out: q41,
            gate_up: q41,
            down: q41,
        };
        assert_eq!(p.layers, vec![layer; 3]);
        assert_eq!((p.embed, p.output), (QuantFormat::Q8_0, QuantFormat::Q8_0));
        assert_eq!(p.config, tiny());
        let bytes = random_gguf(&tiny(), q41, QuantFormat::Q8_0, 3);
        let g = Gguf::parse(FileBytes::from_bytes(Path::new("t.gguf"), bytes)).unwrap();
        assert!(matches!(
            DecoderPlan::from_gguf(&g, DType::U32),
            Err(Error::Input(_))
        ));
    }

    /// Five dispatches a layer plus the embedding, the logits and the argmax; a prompt's
    /// attention priced as a prompt's; a long decode step's split attention priced with its
    /// merge pass, which is not priced again, as is the argmax over a vocabulary longer than
    /// a chunk with its merge; every other op priced as itself.
    #[test]
    fn dispatches_and_the_kinds_that_price_them() {
        let p = plan();
        let names = |ops: &[PlannedOp]| ops.iter().map(|o| o.name).collect::<Vec<_>>();
        let decode = p.ops(1, 10);
        let mut want = vec!["qembedding"];
        for _ in 0..3 {
            want.extend([
                "rms_qmatvec_rope",
                "kv_attention",
                "qmatvec",
                "rms_qmatvec_swiglu",
                "qmatvec",
            ]);
        }
        want.extend(["rms_qmatvec", "argmax"]);
        assert_eq!(names(&decode), want);
        assert!(decode.iter().all(|o| o.priced == Some((o.name, o.cost))));

        let prompt = p.ops(40, 0);
        assert_eq!(prompt.len(), 1 + 3 * 5 + 2);
        let attention = prompt.iter().find(|o| o.name == "kv_attention").unwrap();
        assert_eq!(attention.priced.unwrap().0, "kv_attention_prefill");
        let long_prompt = p.ops(1030, 0);
        let dense = long_prompt.iter().find(|o| o.name == "attention").unwrap();
        assert_eq!(dense.priced.unwrap().0, "attention_causal");

        let long = p.ops(1, 1500);
        assert_eq!(long.len(), 1 + 3 * 6 + 2);
        for (i, op) in long.iter().enumerate() {
            if op.name == "kv_attention_merge" {
                let split = &long[i - 1];
                assert_eq!(op.priced, None);
                assert_eq!(
                    split.priced,
                    Some(("kv_attention_split", split.cost + op.cost))
                );
            }
        }

        let mut smollm2 = p.clone();
        smollm2.config.vocab = 49_152;
        let decode = smollm2.ops(1, 10);
        let [.., logits, chunks, merge] = decode.as_slice() else {
            panic!("{decode:?}")
        };
        assert_eq!(
            [logits.name, chunks.name, merge.name],
            ["rms_qmatvec", "argmax", "argmax_merge"]
        );
        assert_eq!(chunks.priced, Some(("argmax", chunks.cost + merge.cost)));
        assert_eq!(merge.priced, None);
    }

    /// Where the adapter rounds one row of `x` to 8 bits, the products it rounds (K ≥ 2048,
    /// where the rounded `x` fits its workgroup memory) are priced as the integer kernel's
    /// kinds under their own names; a prompt's products (many rows of `x`) are not, its LM
    /// head (one row) is; without the adapter's storage, none are.
    #[test]
    fn products_rounding_x_are_priced_as_the_integer_kinds() {
        let config = |hidden, ffn| LlamaConfig {
            hidden,
            ffn,
            heads: hidden / 64,
            kv_heads: 8,
            head_dim: 64,
            ..tiny()
        };
        let kinds = |hidden, ffn, storage, tokens| {
            let plan = DecoderPlan {
                matvec: MatvecRule {
                    int8_storage: storage,
                    ..MatvecRule::default()
                },
                ..DecoderPlan::uniform(config(hidden, ffn), QuantFormat::Q4_1, DType::F32)
            };
            let ops = plan.ops(tokens, 10);
            for o in &ops {
                if o.kind().ends_with("_int8") {
                    assert_eq!(o.kind(), format!("{}_int8", o.name));
                }
            }
            // Layer 0's four products, then the LM head.
            let products: Vec<_> = ops.iter().filter(|o| o.name.contains("qmat")).collect();
            let last = products.len() - 1;
            [0, 1, 2, 3, last].map(|i| products[i].kind())
        };
        let int8 = Some(49152);
        assert_eq!(
            kinds(2048, 8192, int8, 1),
            [
                "rms_qmatvec_rope_int8",
                "qmatvec_int8",
                "rms_qmatvec_swiglu_int8",
                "qmatvec_int8",
                "rms_qmatvec_int8"
            ]
        );
        assert_eq!(
            kinds(2048, 8192, None, 1),
            [
                "rms_qmatvec_rope",
                "qmatvec",
                "rms_qmatvec_swiglu",
                "qmatvec",
                "rms_qmatvec"
            ]
        );
        // SmolLM2-360M's width: only the down projection (K = 2560) rounds.
        assert_eq!(
            kinds(960, 2560, int8, 1),
            [
                "rms_qmatvec_rope",
                "qmatvec",
                "rms_qmatvec_swiglu",
                "qmatvec_int8",
                "rms_qmatvec"
            ]
        );
        // Llama-3-8B's down projection (K = 14336) needs 22,784 bytes: not in 16 KiB.
        assert_eq!(kinds(4096, 14336, Some(16384), 1)[3], "qmatvec");
        assert_eq!(kinds(4096, 14336, int8, 1)[3], "qmatvec_int8");
        assert_eq!(
            kinds(2048, 8192, int8, 40),
            [
                "rms_qmatmul_rope",
                "qmatmul",
                "rms_qmatmul_swiglu",
                "qmatmul",
                "rms_qmatvec_int8"
            ]
        );
    }

    /// A report that fitted the split attention's kind prices the split kernel with its merge
    /// pass, the merge at 0 and "folded"; one without it (the encoder's H200 report) prices
    /// each of the two by its own roofline, never at 0; every other op by its kind.
    #[test]
    fn a_merge_pass_is_priced_inside_a_fitted_split_kind_else_by_its_own_roofline() {
        let report = |text: &str| Calibrated::new(serde_json::from_str(text).unwrap());
        let ops = plan().ops(1, 1500);
        let merge = ops
            .iter()
            .position(|o| o.name == "kv_attention_merge")
            .unwrap();
        let (split, merge_op) = (&ops[merge - 1], &ops[merge]);

        let fitted = report(include_str!(
            "../../../../benches/reports/h200-decoder.json"
        ));
        let roof = |k: &str| fitted.report.measured.roof_for(k, false).0;
        let prices = price_ops(&ops, &fitted, "f32", roof);
        assert_eq!(prices.len(), ops.len());
        let both = split.cost + merge_op.cost;
        let (want, was_fitted) = fitted.price("kv_attention_split", "f32", &both, &roof("x"));
        assert!(was_fitted);
        assert_eq!(prices[merge - 1].seconds, want);
        assert_eq!(
            prices[merge],
            OpPrice {
                seconds: 0.0,
                fitted: true,
                folded: true
            }
        );
        let q = ops.iter().position(|o| o.name == "qmatvec").unwrap();
        let own = fitted.price("qmatvec", "f32", &ops[q].cost, &roof("qmatvec"));
        assert_eq!((prices[q].seconds, prices[q].fitted), own);

        let bare = report(include_str!("../../../../benches/reports/h200.json"));
        let roof = |k: &str| bare.report.measured.roof_for(k, false).0;
        let prices = price_ops(&ops, &bare, "f32", roof);
        for (op, p) in ops.iter().zip(&prices) {
            let own = roof(op.kind()).predict(&op.cost).seconds;
            assert!(own > 0.0);
            assert_eq!(
                (p.seconds, p.fitted, p.folded),
                (own, false, false),
                "{op:?}"
            );
        }
    }
}
