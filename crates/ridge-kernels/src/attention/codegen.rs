//! The attention shaders' specialisation: generated accumulators and tiles, loads, row
//! maxima, their defines, and every variant the naga test builds.

use ridge_core::DType;

use super::{AttentionConfig, AttentionKernel, TiledConfig};
use crate::shaders::{self, ATTENTION, ATTENTION_TILED, Variant};

/// The generated output accumulators: DH/TPR dims per invocation as vec4s.
fn accumulators(head_dim: u32, tpr: u32) -> [(&'static str, String); 4] {
    let quads = head_dim / tpr / 4;
    let (mut declare, mut rescale, mut update, mut store) =
        (String::new(), String::new(), String::new(), String::new());
    for i in 0..quads {
        declare.push_str(&format!("var o{i} = vec4<f32>();\n"));
        rescale.push_str(&format!("o{i} *= corr;\n"));
        update.push_str(&format!("o{i} += pj * v_s[vb + {i}u];\n"));
        store.push_str(&format!("let y{i} = o{i} * inv;\n"));
        for (e, comp) in ["x", "y", "z", "w"].iter().enumerate() {
            store.push_str(&format!(
                "o[ob + {}u] = T(y{i}.{comp});\n",
                i * 4 + e as u32
            ));
        }
    }
    [
        ("DECLARE", declare),
        ("RESCALE", rescale),
        ("UPDATE", update),
        ("STORE", store),
    ]
}

/// The generated parts of the register-blocked kernel: 4 rows × `head_dim/bkv` vec4 output
/// accumulators (declared, rescaled, updated by P·V for one key, stored) and the pipeline
/// registers of the next key tile (`bkv · head_dim/4` vec4 of K and of V spread over the
/// invocations: declared, loaded, staged).
fn tiled_blocks(head_dim: u32, c: &TiledConfig) -> [(&'static str, String); 9] {
    let quads = head_dim / c.bkv;
    let per = c.bkv * (head_dim / 4) / c.invocations();
    let comps = ["x", "y", "z", "w"];
    let (mut q_load, mut q_stage) = (String::new(), String::new());
    let q_per = c.bq * (head_dim / 4) / c.invocations();
    for e in 0..q_per {
        q_load.push_str(&format!(
            "let qi{e} = tid + {e}u * THREADS;\n\
             var qv{e} = vec4<f32>();\n\
             if q0 + qi{e} % BQ < p.seq {{ qv{e} = load_q(at(p.q, b, q0 + qi{e} % BQ, h) + (qi{e} / BQ) * 4u); }}\n"
        ));
    }
    for e in 0..q_per {
        q_stage.push_str(&format!(
            "{{\nlet row = qi{e} % BQ;\nlet dq = qi{e} / BQ;\nlet e = qv{e} * (p.scale * LOG2E);\n"
        ));
        for (l, comp) in comps.iter().enumerate() {
            q_stage.push_str(&format!(
                "q_t[(dq * 4u + {l}u) * RQ + row / 4u][row % 4u] = e.{comp};\n"
            ));
        }
        q_stage.push_str("}\n");
    }
    let (mut declare, mut rescale, mut pv, mut store) =
        (String::new(), String::new(), String::new(), String::new());
    let (mut load, mut stage, mut partial) = (String::new(), String::new(), String::new());
    for e in 0..per {
        declare.push_str(&format!(
            "var kr{e} = vec4<f32>();\nvar vr{e} = vec4<f32>();\n"
        ));
        load.push_str(&format!(
            "{{
    let i = tid + {e}u * THREADS;
    let kk = kn * BKV + i % BKV;
    kr{e} = vec4<f32>();
    if kk < len {{ kr{e} = load_k(at(p.k, b, kk, h) + (i / BKV) * 4u); }}
    let vk = kn * BKV + i / DQ4;
    vr{e} = vec4<f32>();
    if vk < len {{ vr{e} = load_v(at(p.v, b, vk, h) + (i % DQ4) * 4u); }}
}}
"
        ));
        stage.push_str(&format!(
            "{{\nlet i = tid + {e}u * THREADS;\nlet key = i % BKV;\nlet dq = i / BKV;\n"
        ));
        for (l, comp) in comps.iter().enumerate() {
            stage.push_str(&format!(
                "k_t[(dq * 4u + {l}u) * KQ + key / 4u][key % 4u] = kr{e}.{comp};\n"
            ));
        }
        stage.push_str(&format!("v_s[i] = vr{e};\n}}\n"));
    }
    for j in 0..quads {
        pv.push_str(&format!("let v{j} = v_s[vb + {j}u * KQ];\n"));
    }
    for (r, c) in comps.iter().enumerate() {
        store.push_str(&format!(
            "if rows.{c} < p.seq {{\nlet ob = at(p.o, b, rows.{c}, h);\n"
        ));
        partial.push_str(&format!(
            "if rows.{c} < p.seq {{\nlet pr = slot_row(bh, item.w, 4u * y + {r}u);\n\
             if x == 0u {{ partial[pr + DQ4] = vec4<f32>(m.{c}, total.{c}, 0.0, 0.0); }}\n"
        ));
        for j in 0..quads {
            declare.push_str(&format!("var o{r}_{j} = vec4<f32>();\n"));
            rescale.push_str(&format!("o{r}_{j} *= corr.{c};\n"));
            pv.push_str(&format!(
                "o{r}_{j} = fma(vec4<f32>(pa.{c}), v{j}, o{r}_{j});\n"
            ));
            store.push_str(&format!(
                "let y{j} = o{r}_{j} * inv.{c};\nlet d{j} = ob + (x + {j}u * KQ) * 4u;\n"
            ));
            for (e, ce) in comps.iter().enumerate() {
                store.push_str(&format!("o[d{j} + {e}u] = T(y{j}.{ce});\n"));
            }
            partial.push_str(&format!("partial[pr + x + {j}u * KQ] = o{r}_{j};\n"));
        }
        store.push_str("}\n");
        partial.push_str("}\n");
    }
    [
        ("DECLARE", declare),
        ("RESCALE", rescale),
        ("PV", pv),
        ("STORE", store),
        ("KV_LOAD", load),
        ("KV_STAGE", stage),
        ("PARTIAL", partial),
        ("Q_LOAD", q_load),
        ("Q_STAGE", q_stage),
    ]
}

/// The interface both kernels share (`shaders/include/attention_io.wgsl`) and the loads of
/// four head dims of Q, K and V: one vec4 load each with `vec_loads`, else four scalar ones.
fn io(vec_loads: bool) -> String {
    let (elem, load): (&str, fn(&str) -> String) = if vec_loads {
        ("vec4<T>", |n| {
            format!("fn load_{n}(i: u32) -> vec4<f32> {{ return vec4<f32>({n}[i / 4u]); }}\n")
        })
    } else {
        ("T", |n| {
            format!(
                "fn load_{n}(i: u32) -> vec4<f32> {{ return vec4<f32>(f32({n}[i]), \
                 f32({n}[i + 1u]), f32({n}[i + 2u]), f32({n}[i + 3u])); }}\n"
            )
        })
    };
    let loads: String = ["q", "k", "v"].into_iter().map(load).collect();
    format!("alias QKV = {elem};\n{}{loads}", shaders::ATTENTION_IO)
}

/// The shader file `kernel` runs.
pub(super) fn kernel_shader(kernel: &AttentionKernel) -> &'static ridge_core::ShaderSource {
    match kernel {
        AttentionKernel::Rows(_) => &ATTENTION,
        AttentionKernel::Tiled(_) => &ATTENTION_TILED,
    }
}

/// The shader and defines of `kernel` (with the shared interface at its `//@IO` line).
pub(super) fn kernel_defines(
    d: ridge_core::Defines,
    head_dim: u32,
    kernel: &AttentionKernel,
    s: Specialisation,
) -> (&'static ridge_core::ShaderSource, ridge_core::Defines) {
    let Specialisation {
        causal,
        sparse,
        items,
        vec_loads,
        key_tiles,
        row_sync,
    } = s;
    let d = d.block("IO", io(vec_loads));
    let shader = kernel_shader(kernel);
    match kernel {
        AttentionKernel::Rows(c) => (shader, attention_defines(d, head_dim, c, causal, sparse)),
        AttentionKernel::Tiled(c) => {
            let d = tiled_blocks(head_dim, c)
                .into_iter()
                .fold(d, |d, (name, code)| d.block(name, code))
                .u32("DH", head_dim)
                .u32("BQ", c.bq)
                .u32("BKV", c.bkv)
                .bool("CAUSAL", causal)
                .bool("SPARSE", sparse)
                .u32("SUB", key_tiles)
                .bool("ITEMS", items)
                .block("ROW_MAX", row_max(row_sync.shuffles))
                .block(
                    "ROW_SYNC",
                    if row_sync.barrier {
                        "subgroupBarrier();"
                    } else {
                        "workgroupBarrier();"
                    }
                    .into(),
                );
            (shader, d)
        }
    }
}

/// What one launch's shader is specialised for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Specialisation {
    /// Keys after each query masked.
    pub(super) causal: bool,
    /// A block-sparse layout.
    pub(super) sparse: bool,
    /// A work list (the tiled kernel: always when sparse; dense rows cut).
    pub(super) items: bool,
    /// Q, K and V read four head dims per load.
    pub(super) vec_loads: bool,
    /// Key tiles per block-sparse block (the tiled kernel's SUB; 1 when dense).
    pub(super) key_tiles: u32,
    /// How a row's invocations exchange values (the tiled kernel).
    pub(super) row_sync: RowSync,
}

/// How the invocations of one query-row quad of `shaders/attention_tiled.wgsl` (neighbouring
/// lanes) exchange values: subgroup shuffles for the row maxima, a subgroup barrier before
/// reading each other's probabilities; or workgroup memory and barriers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct RowSync {
    pub(super) shuffles: bool,
    pub(super) barrier: bool,
}

impl RowSync {
    /// Row maxima by subgroup shuffles where a row's `lanes` invocations (a power of two) fit
    /// in one subgroup, with a subgroup barrier where the adapter has one.
    pub(super) fn for_rows(ctx: &ridge_core::Context, lanes: u32) -> Self {
        let shuffles =
            ctx.has_subgroups() && lanes.is_power_of_two() && ctx.info().subgroup_min_size >= lanes;
        RowSync {
            shuffles,
            barrier: shuffles && ctx.has_subgroup_barrier(),
        }
    }
}

/// The row maxima of `shaders/attention_tiled.wgsl` (its ROW_MAX block): subgroup shuffles
/// across the row's KQ neighbouring lanes (log2 KQ steps), or through workgroup memory
/// behind a barrier. Subgroup builtins must not appear in a shader for an adapter without
/// them, hence a generated block rather than a constant branch.
fn row_max(subgroups: bool) -> String {
    if subgroups {
        "var across = mine;
for (var lane = 1u; lane < KQ; lane <<= 1u) {
    across = max(across, subgroupShuffleXor(across, lane));
}
mx = max(mx, across);"
            .into()
    } else {
        "red[y * KQ + x] = mine;
workgroupBarrier();
for (var i = 0u; i < KQ; i++) { mx = max(mx, red[y * KQ + i]); }"
            .into()
    }
}

fn attention_defines(
    d: ridge_core::Defines,
    head_dim: u32,
    c: &AttentionConfig,
    causal: bool,
    sparse: bool,
) -> ridge_core::Defines {
    let mut d = d
        .u32("DH", head_dim)
        .u32("BQ", c.bq)
        .u32("BK", c.bk)
        .u32("TPR", c.tpr)
        .bool("CAUSAL", causal)
        .bool("SPARSE", sparse);
    for (name, code) in accumulators(head_dim, c.tpr) {
        d = d.block(name, code);
    }
    d
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    let mut v = Vec::new();
    // (head_dim, causal, sparse, items, bq, bkv, subgroups)
    for (head_dim, causal, sparse, items, bq, bkv, subgroups) in [
        (32, false, false, false, 64, 32, false),
        (64, true, false, true, 64, 32, true),
        (64, false, true, true, 32, 32, true),
        (64, true, true, true, 64, 32, true),
        (64, true, true, true, 32, 32, false),
    ] {
        let kernel = AttentionKernel::Tiled(TiledConfig { bq, bkv });
        let (shader, d) = kernel_defines(
            shaders::storage_defines(dtype),
            head_dim,
            &kernel,
            Specialisation {
                causal,
                sparse,
                items,
                vec_loads: !causal,
                key_tiles: if sparse { 2 } else { 1 },
                row_sync: RowSync {
                    shuffles: subgroups,
                    barrier: subgroups,
                },
            },
        );
        if items {
            v.push((shader, "merge", d.clone()));
        }
        v.push((shader, "attention", d));
    }
    for (head_dim, causal, sparse) in [(32, false, false), (64, true, false), (128, false, true)] {
        let c = AttentionConfig {
            bq: 16,
            bk: 16,
            tpr: 4,
        };
        let (shader, d) = kernel_defines(
            shaders::storage_defines(dtype),
            head_dim,
            &AttentionKernel::Rows(c),
            Specialisation {
                causal,
                sparse,
                items: false,
                vec_loads: causal,
                key_tiles: 1,
                row_sync: RowSync {
                    shuffles: false,
                    barrier: false,
                },
            },
        );
        v.push((shader, "attention", d));
    }
    v
}
