//! The GEMM shaders' specialisation: how a launch reaches its operands ([`Access`]), the
//! generated loaders, register blocks and epilogues of `shaders/gemm.wgsl` and
//! `shaders/gemm_coop.wgsl`, their defines, and every variant the naga test builds.

use ridge_core::DType;

use super::{CoopConfig, Gemm, GemmConfig, GemmKernel};
use crate::shaders::{self, GEMM, GEMM_COOP, GEMM_REDUCE, Variant};

/// How a kernel reaches A, B and C in memory: the width of each load (1, or a vector along
/// the stored contiguous dimension), whether every tile lies inside the matrices, and the
/// width of the epilogue's accesses to C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Access {
    a: u32,
    b: u32,
    /// M, N and K are multiples of BM, BN and BK and both operands load vectors: no load
    /// crosses an edge, so the loads skip their bounds checks and index from row offsets
    /// computed once (`interior_loads`).
    interior: bool,
    /// Width of C's loads and stores and of the bias's loads in the tiled kernel's epilogue:
    /// 4 (vec4) where N is a multiple of 4, else 1; always 1 for the tensor-core kernel.
    c: u32,
}

/// The loaders of `shaders/gemm.wgsl` for `w`: scalar, or vec4 along the stored contiguous
/// dimension (k for A, n for B when not transposed) with the lanes past the edge zeroed.
fn loaders(w: Access) -> String {
    let one = |name: &str, buf: &str, rows: &str, cols: &str, ld: &str, trans: &str| {
        format!(
            "fn load_{name}(base: u32, row: u32, col: u32) -> f32 {{
    if row >= p.{rows} || col >= p.{cols} {{ return 0.0; }}
    if {trans} {{ return f32({buf}[base + col * p.{ld} + row]); }}
    return f32({buf}[base + row * p.{ld} + col]);
}}
"
        )
    };
    let four = |name: &str, buf: &str, rows: &str, cols: &str, ld: &str, trans: &str| {
        format!(
            "fn load_{name}(base: u32, row: u32, col: u32) -> vec4<f32> {{
    if row >= p.{rows} || col >= p.{cols} {{ return vec4<f32>(); }}
    if {trans} {{ return inside(vec4<f32>({buf}[(base + col * p.{ld} + row) / 4u]), row, p.{rows}); }}
    return inside(vec4<f32>({buf}[(base + row * p.{ld} + col) / 4u]), col, p.{cols});
}}
"
        )
    };
    let a = if w.a == 4 { four } else { one };
    let b = if w.b == 4 { four } else { one };
    a("a", "a", "m", "k", "lda", "TRANS_A") + &b("b", "b", "k", "n", "ldb", "TRANS_B")
}

/// The generated parts of the tiled kernel (`//@` markers in `shaders/gemm.wgsl`): the
/// `TM × TN/4` vec4 accumulators and the pipeline registers holding the next slice
/// (`BM·BK` and `BN·BK` values in loads of `w` elements spread over the invocations), all
/// with constant names; the loads of a slice into those registers, their stores to
/// workgroup memory, the multiply-adds of one k step, and the stores of C.
fn register_block(c: &GemmConfig, g: &Gemm, w: Access) -> Vec<(&'static str, String)> {
    let (row_quads, col_quads) = (c.tm / 4, c.tn / 4);
    let per_a = c.bm * c.bk / (w.a * c.invocations());
    let per_b = c.bn * c.bk / (w.b * c.invocations());
    let mut declare = String::new();
    let mut load = String::new();
    let mut stage = String::new();
    let mut fma = String::new();
    for (s, per, width) in [("a", per_a, w.a), ("b", per_b, w.b)] {
        let ty = if width == 4 { "vec4<f32>()" } else { "0.0" };
        for e in 0..per {
            declare.push_str(&format!(
                "let {s}p{e} = {s}_pos(tid + {e}u * THREADS);\nvar {s}r{e} = {ty};\n"
            ));
        }
    }
    let comps = ["x", "y", "z", "w"];
    // Stores register `reg` to `tile` (k rows of `stride` vec4s, slices of `slice` vec4s) at
    // the staging slot `so`, with its first element at k row `k`, column `c`: one element, a
    // vec4 along the columns, or (`along_k`) a vec4 down four k rows.
    let stage_one =
        |(tile, stride, slice): (&str, &str, &str), reg: &str, k: &str, c: &str, width, along_k| {
            let at = |k: &str| format!("{tile}[so * {slice} + {k} * {stride} + {c} / 4u]");
            match (width, along_k) {
                (1, _) => format!("{}[{c} % 4u] = {reg};\n", at(k)),
                (_, false) => format!("{} = {reg};\n", at(k)),
                _ => comps
                    .iter()
                    .enumerate()
                    .map(|(l, comp)| {
                        format!(
                            "{}[{c} % 4u] = {reg}.{comp};\n",
                            at(&format!("({k} + {l}u)"))
                        )
                    })
                    .collect(),
            }
        };
    if w.interior {
        // Stored (row, column) of each load without k1: A is M × K (K × M transposed), B is
        // K × N (N × K); a_pos and b_pos give (m, k) and (k, n).
        let a_at = |e| match g.trans_a {
            false => (format!("m0 + ap{e}.x"), format!("ap{e}.y")),
            true => (format!("ap{e}.y"), format!("m0 + ap{e}.x")),
        };
        let b_at = |e| match g.trans_b {
            false => (format!("bp{e}.x"), format!("n0 + bp{e}.y")),
            true => (format!("n0 + bp{e}.y"), format!("bp{e}.x")),
        };
        for (s, per, k_rows, at) in [
            (
                "a",
                per_a,
                g.trans_a,
                &a_at as &dyn Fn(u32) -> (String, String),
            ),
            ("b", per_b, !g.trans_b, &b_at),
        ] {
            let (d, l) = interior_loads(s, per, 4, k_rows, at, "vec4<f32>");
            declare.push_str(&d);
            load.push_str(&l);
        }
    }
    for e in 0..per_a {
        if !w.interior {
            load.push_str(&format!(
                "ar{e} = load_a(a_base, m0 + ap{e}.x, k1 + ap{e}.y);\n"
            ));
        }
        let (k, c) = (format!("ap{e}.y"), format!("ap{e}.x"));
        stage.push_str(&stage_one(
            ("a_tile", "AS", "A_SLICE"),
            &format!("ar{e}"),
            &k,
            &c,
            w.a,
            !g.trans_a,
        ));
    }
    for e in 0..per_b {
        if !w.interior {
            load.push_str(&format!(
                "br{e} = load_b(b_base, k1 + bp{e}.x, n0 + bp{e}.y);\n"
            ));
        }
        let (k, c) = (format!("bp{e}.x"), format!("bp{e}.y"));
        stage.push_str(&stage_one(
            ("b_tile", "BS", "B_SLICE"),
            &format!("br{e}"),
            &k,
            &c,
            w.b,
            g.trans_b,
        ));
    }
    // The k steps unrolled: step kk's workgroup reads are issued before step kk−1's
    // multiply-adds, so they are in flight while those run.
    let reads = |kk: u32| {
        let mut r = String::new();
        for i in 0..row_quads {
            r.push_str(&format!(
                "let a{kk}_{i} = a_tile[ro * A_SLICE + {kk}u * AS + lid.y + {i}u * WG_Y];\n"
            ));
        }
        for j in 0..col_quads {
            r.push_str(&format!(
                "let b{kk}_{j} = b_tile[ro * B_SLICE + {kk}u * BS + lid.x + {j}u * WG_X];\n"
            ));
        }
        r
    };
    fma.push_str(&reads(0));
    for kk in 0..c.bk {
        if kk + 1 < c.bk {
            fma.push_str(&reads(kk + 1));
        }
        for i in 0..row_quads {
            for (r, comp) in comps.iter().enumerate() {
                let row = 4 * i + r as u32;
                for j in 0..col_quads {
                    fma.push_str(&format!(
                        "acc{row}_{j} = fma(vec4<f32>(a{kk}_{i}.{comp}), b{kk}_{j}, acc{row}_{j});\n"
                    ));
                }
            }
        }
    }
    for i in 0..row_quads {
        for r in 0..4 {
            for j in 0..col_quads {
                declare.push_str(&format!("var acc{}_{j} = vec4<f32>();\n", 4 * i + r));
            }
        }
    }
    let (epilogue, store) = epilogue(row_quads, col_quads, w.c);
    vec![
        ("LOADERS", loaders(w)),
        ("DECLARE", declare),
        ("LOAD", load),
        ("STAGE", stage),
        ("FMA", fma),
        ("EPILOGUE", epilogue),
        ("STORE", store),
    ]
}

/// The tiled kernel's epilogue functions and the stores of its `4·row_quads × 4·col_quads`
/// accumulators (`acc{row}_{quad}`, at rows 4·(lid.y + i·WG_Y) + r and columns
/// 4·(lid.x + j·WG_X)). Element by element with `width` 1. With 4: the bias read once per
/// column quad, then per row quad every C value it needs read before any is written (the
/// writes cannot move above reads of the same buffer, so interleaved they wait on each
/// other), one vec4 per load and store.
fn epilogue(row_quads: u32, col_quads: u32, width: u32) -> (String, String) {
    let mut store = String::new();
    if width == 1 {
        for i in 0..row_quads {
            for r in 0..4 {
                for j in 0..col_quads {
                    store.push_str(&format!(
                        "store4(c_base, m0 + (lid.y + {i}u * WG_Y) * 4u + {r}u, \
                         n0 + (lid.x + {j}u * WG_X) * 4u, acc{}_{j});\n",
                        4 * i + r
                    ));
                }
            }
        }
        let functions = "fn store4(c_base: u32, row: u32, col: u32, acc: vec4<f32>) {
    if row >= p.m { return; }
    for (var e = 0u; e < 4u; e++) {
        let cc = col + e;
        if cc >= p.n { return; }
        let ci = c_base + row * p.ldc + cc;
        var v = p.alpha * acc[e];
        if p.beta != 0.0 { v += p.beta * f32(c[ci]); }
        if HAS_BIAS { v += f32(bias[cc]); }
        if ACT_GELU { v = gelu(v); }
        c[ci] = TC(v);
    }
}
";
        return (functions.to_string(), store);
    }
    for j in 0..col_quads {
        store.push_str(&format!(
            "let sc{j} = n0 + (lid.x + {j}u * WG_X) * 4u;\nlet sb{j} = bias4(sc{j});\n"
        ));
    }
    for i in 0..row_quads {
        store.push_str(&format!("let sr{i} = m0 + (lid.y + {i}u * WG_Y) * 4u;\n"));
        for r in 0..4 {
            for j in 0..col_quads {
                store.push_str(&format!(
                    "let so{i}_{r}_{j} = old4(c_base, sr{i} + {r}u, sc{j});\n"
                ));
            }
        }
        for r in 0..4 {
            for j in 0..col_quads {
                store.push_str(&format!(
                    "put4(c_base, sr{i} + {r}u, sc{j}, p.alpha * acc{}_{j} + so{i}_{r}_{j} + sb{j});\n",
                    4 * i + r
                ));
            }
        }
    }
    let functions = "fn bias4(col: u32) -> vec4<f32> {
    if !HAS_BIAS || col >= p.n { return vec4<f32>(); }
    return vec4<f32>(bias[col / 4u]);
}
fn old4(c_base: u32, row: u32, col: u32) -> vec4<f32> {
    if p.beta == 0.0 || row >= p.m || col >= p.n { return vec4<f32>(); }
    return p.beta * vec4<f32>(c[(c_base + row * p.ldc + col) / 4u]);
}
fn put4(c_base: u32, row: u32, col: u32, v: vec4<f32>) {
    if row >= p.m || col >= p.n { return; }
    var x = v;
    if ACT_GELU { x = gelu(x); }
    c[(c_base + row * p.ldc + col) / 4u] = CT(x);
}
";
    (functions.to_string(), store)
}

/// The loads of operand `s` (`a` or `b`) for tiles inside the matrices
/// ([`Access::interior`]): `per` loads of `vector` elements, load `e` at the stored
/// (row, column) `at(e)` plus k1 along the rows (`k_rows`) or the columns. Returns the
/// declarations, each load's vector index without k1 (`{s}i{e}`, computed once), and the
/// loads of one slice into the pipeline registers: one k1 offset per operand, one add per
/// load, no bounds checks, each value passed through `wrap` (a conversion, or nothing).
fn interior_loads(
    s: &str,
    per: u32,
    vector: u32,
    k_rows: bool,
    at: &dyn Fn(u32) -> (String, String),
    wrap: &str,
) -> (String, String) {
    let mut declare = String::new();
    let mut load = if k_rows {
        format!("let {s}k = k1 * (p.ld{s} / {vector}u);\n")
    } else {
        format!("let {s}k = k1 / {vector}u;\n")
    };
    for e in 0..per {
        let (row, col) = at(e);
        declare.push_str(&format!(
            "let {s}i{e} = ({s}_base + ({row}) * p.ld{s} + {col}) / {vector}u;\n"
        ));
        load.push_str(&format!("{s}r{e} = {wrap}({s}[{s}i{e} + {s}k]);\n"));
    }
    (declare, load)
}

/// Everything the defines of a GEMM launch depend on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct VariantKey {
    pub(super) kernel: GemmKernel,
    /// A's and B's storage type.
    pub(super) input: DType,
    /// C's and the bias's: `input`, or f32 for f16 operands.
    pub(super) output: DType,
    pub(super) trans_a: bool,
    pub(super) trans_b: bool,
    pub(super) gelu: bool,
    pub(super) bias: bool,
    pub(super) access: Access,
}

impl VariantKey {
    pub(super) fn defines(&self) -> ridge_core::Defines {
        let g = Gemm {
            trans_a: self.trans_a,
            trans_b: self.trans_b,
            gelu: self.gelu,
            ..Gemm::new(1, 1, 1)
        };
        match self.kernel {
            GemmKernel::Tiled(cfg) => config_defines(
                shaders::storage_defines(self.input),
                self.output,
                &cfg,
                &g,
                self.access,
                self.bias,
            ),
            GemmKernel::Coop(cfg) => coop_defines(&cfg, self.output, &g, self.access, self.bias),
        }
    }
}

/// Leading dimensions of the stored A and B and the element offsets between the batch
/// entries of A, B and C (0 for an operand every entry shares).
pub(super) struct Layout {
    pub(super) lda: usize,
    pub(super) ldb: usize,
    pub(super) stride_a: usize,
    pub(super) stride_b: usize,
    pub(super) stride_c: usize,
}

/// How a kernel that stages `[BM, BN, BK]` slices over `invocations` reaches operands laid
/// out as `l` (`a_len`, `b_len`, `c_len` elements) for the problem `mnk` (one split's K for
/// split-K). A and B: `vector` elements along the stored contiguous dimension (4 for the
/// tiled kernel's vec4, 8 for the tensor-core kernel's 16-byte f16 loads) when the slices
/// divide evenly into such loads per invocation and every load starts aligned (the leading
/// dimension and the batch stride multiples of `vector`; bindings start aligned); else one
/// element. C and the bias: `c_vector` elements where N is a multiple of it. Empty matrices
/// keep scalar accesses: a vector binding must hold one vector.
pub(super) fn access(
    [vector, c_vector]: [u32; 2],
    [bm, bn, bk]: [u32; 3],
    invocations: u32,
    l: &Layout,
    [a_len, b_len, c_len]: [usize; 3],
    [m, n, k]: [usize; 3],
) -> Access {
    let width = |tile: u32, ld: usize, stride: usize, len: usize| {
        let even = (tile * bk).is_multiple_of(vector * invocations);
        let v = vector as usize;
        if even && ld.is_multiple_of(v) && stride.is_multiple_of(v) && len > 0 {
            vector
        } else {
            1
        }
    };
    let (a, b) = (
        width(bm, l.lda, l.stride_a, a_len),
        width(bn, l.ldb, l.stride_b, b_len),
    );
    let tiles = |len: usize, tile: u32| len.is_multiple_of(tile as usize);
    Access {
        a,
        b,
        interior: a == vector
            && b == vector
            && tiles(m, bm)
            && tiles(n, bn)
            && tiles(k, bk)
            && k > 0,
        c: if n.is_multiple_of(c_vector as usize) && c_len > 0 {
            c_vector
        } else {
            1
        },
    }
}

fn config_defines(
    d: ridge_core::Defines,
    output: DType,
    c: &GemmConfig,
    g: &Gemm,
    w: Access,
    bias: bool,
) -> ridge_core::Defines {
    let vector = |width: u32| if width == 4 { "vec4<T>" } else { "T" };
    common_defines(d, register_block(c, g, w), w, vector, output, g, bias)
        .u32("BM", c.bm)
        .u32("BN", c.bn)
        .u32("BK", c.bk)
        .u32("TM", c.tm)
        .u32("TN", c.tn)
        .u32("STAGES", c.stages)
}

/// The defines both GEMM kernels share: the GELU include, the generated `blocks`, the operand
/// types (`vector` names the type of one load of `w` elements; `TC`, C's and the bias's
/// storage type, is `output`), transposes, bias, activation.
#[allow(clippy::too_many_arguments)]
fn common_defines(
    d: ridge_core::Defines,
    blocks: Vec<(&'static str, String)>,
    w: Access,
    vector: fn(u32) -> &'static str,
    output: DType,
    g: &Gemm,
    bias: bool,
) -> ridge_core::Defines {
    let d = d
        .block("GELU", shaders::GELU.to_string())
        .alias("VF", if w.c == 4 { "vec4<f32>" } else { "f32" });
    blocks
        .into_iter()
        .fold(d, |d, (name, code)| d.block(name, code))
        .alias("AT", vector(w.a))
        .alias("BT", vector(w.b))
        .alias("TC", output.wgsl())
        .alias("CT", if w.c == 4 { "vec4<TC>" } else { "TC" })
        .u32("VA", w.a)
        .u32("VB", w.b)
        .u32("VC", w.c)
        .bool("TRANS_A", g.trans_a)
        .bool("TRANS_B", g.trans_b)
        .bool("HAS_BIAS", bias)
        .bool("ACT_GELU", g.gelu)
}

/// The generated parts of the tensor-core kernel (`//@` markers in `shaders/gemm_coop.wgsl`):
/// loaders and stagers for the widths `w`, the `fm × fn_` accumulators and the pipeline
/// registers, the loads of the next slice into them, their stores to workgroup memory, the
/// unrolled k steps (step k's fragment loads issued before step k−1's multiply-adds), and the
/// epilogue of every accumulator.
fn coop_block(c: &CoopConfig, g: &Gemm, w: Access) -> Vec<(&'static str, String)> {
    let mut loaders = String::new();
    for (s, width) in [("a", w.a), ("b", w.b)] {
        if width == 8 {
            loaders.push_str(&format!(
                "fn load_{s}(base: u32, row: u32, col: u32, rows: u32, cols: u32) -> mat2x4<f16> {{
    if row >= rows || col >= cols {{ return mat2x4<f16>(); }}
    return {s}[(base + row * p.ld{s} + col) / 8u];
}}
fn stage_{s}(i: u32, v: mat2x4<f16>) {{
"
            ));
            for h in 0..8 {
                loaders.push_str(&format!(
                    "    {s}_tile[i + {h}u] = v[{}][{}];\n",
                    h / 4,
                    h % 4
                ));
            }
            loaders.push_str("}\n");
        } else {
            loaders.push_str(&format!(
                "fn load_{s}(base: u32, row: u32, col: u32, rows: u32, cols: u32) -> f16 {{
    if row >= rows || col >= cols {{ return f16(0.0); }}
    return {s}[base + row * p.ld{s} + col];
}}
fn stage_{s}(i: u32, v: f16) {{ {s}_tile[i] = v; }}
"
            ));
        }
    }
    let per_a = c.bm() * c.bk / (w.a * c.invocations());
    let per_b = c.bn() * c.bk / (w.b * c.invocations());
    let mut declare = String::new();
    let mut load = String::new();
    let mut stage = String::new();
    // Stored (row, column) of load e: A is M × K (K × M transposed), B is K × N (N × K).
    let (a_row, a_col) = if g.trans_a {
        ("k1", "m0")
    } else {
        ("m0", "k1")
    };
    let (b_row, b_col) = if g.trans_b {
        ("n0", "k1")
    } else {
        ("k1", "n0")
    };
    for (s, per, row, col, ty, stride, s_slice) in [
        ("a", per_a, a_row, a_col, "AT", "AS", "A_SLICE"),
        ("b", per_b, b_row, b_col, "BT", "BS", "B_SLICE"),
    ] {
        for e in 0..per {
            declare.push_str(&format!(
                "let {s}p{e} = {s}_pos(tid + {e}u * THREADS);\nvar {s}r{e} = {ty}();\n"
            ));
            if !w.interior {
                load.push_str(&format!(
                    "{s}r{e} = load_{s}({s}_base, {row} + {s}p{e}.x, {col} + {s}p{e}.y, {s}_rows, {s}_cols);\n"
                ));
            }
            stage.push_str(&format!(
                "stage_{s}(so * {s_slice} + {s}p{e}.x * {stride} + {s}p{e}.y, {s}r{e});\n"
            ));
        }
    }
    if w.interior {
        let at = |s: &str, row: &str, col: &str, e: u32| {
            let part = |x: &str, c: &str| match x {
                "k1" => format!("{s}p{e}.{c}"),
                x => format!("{x} + {s}p{e}.{c}"),
            };
            (part(row, "x"), part(col, "y"))
        };
        for (s, per, row, col, width) in [
            ("a", per_a, a_row, a_col, w.a),
            ("b", per_b, b_row, b_col, w.b),
        ] {
            let (d, l) = interior_loads(s, per, width, row == "k1", &|e| at(s, row, col, e), "");
            declare.push_str(&d);
            load.push_str(&l);
        }
    }
    // Fragment loads of k step kk: row-major (coopLoadT) when the stored layout is the
    // fragment's row-major one, column-major (coopLoad) when it is transposed.
    let fragments = |kk: u32| {
        let mut r = String::new();
        for i in 0..c.fm {
            let (f, at) = if g.trans_a {
                (
                    "coopLoad",
                    format!("ro * A_SLICE + {kk}u * AS + sm + {}u", 16 * i),
                )
            } else {
                (
                    "coopLoadT",
                    format!("ro * A_SLICE + (sm + {}u) * AS + {kk}u", 16 * i),
                )
            };
            r.push_str(&format!(
                "let fa{kk}_{i} = {f}<coop_mat16x16<f16, A>>(&a_tile[{at}], AS);\n"
            ));
        }
        for j in 0..c.fn_ {
            let (f, at) = if g.trans_b {
                (
                    "coopLoad",
                    format!("ro * B_SLICE + (sn + {}u) * BS + {kk}u", 16 * j),
                )
            } else {
                (
                    "coopLoadT",
                    format!("ro * B_SLICE + {kk}u * BS + sn + {}u", 16 * j),
                )
            };
            r.push_str(&format!(
                "let fb{kk}_{j} = {f}<coop_mat16x16<f16, B>>(&b_tile[{at}], BS);\n"
            ));
        }
        r
    };
    let steps: Vec<u32> = (0..c.bk).step_by(16).collect();
    let mut mma = fragments(0);
    for (n, &kk) in steps.iter().enumerate() {
        if let Some(&next) = steps.get(n + 1) {
            mma.push_str(&fragments(next));
        }
        for i in 0..c.fm {
            for j in 0..c.fn_ {
                mma.push_str(&format!(
                    "acc{i}_{j} = coopMultiplyAdd(fa{kk}_{i}, fb{kk}_{j}, acc{i}_{j});\n"
                ));
            }
        }
    }
    let mut store = String::new();
    for i in 0..c.fm {
        for j in 0..c.fn_ {
            declare.push_str(&format!("var acc{i}_{j} = coop_mat16x16<f32, C>();\n"));
            store.push_str(&format!(
                "coopStoreT(acc{i}_{j}, &scratch[sg * 256u], 16u);
subgroupBarrier();
store_tile(sg, lane, c_base, row0 + {}u, col0 + {}u);
subgroupBarrier();
",
                16 * i,
                16 * j
            ));
        }
    }
    vec![
        ("LOADERS", loaders),
        ("DECLARE", declare),
        ("LOAD", load),
        ("STAGE", stage),
        ("MMA", mma),
        ("STORE", store),
    ]
}

fn coop_defines(
    c: &CoopConfig,
    output: DType,
    g: &Gemm,
    w: Access,
    bias: bool,
) -> ridge_core::Defines {
    let vector = |width: u32| if width == 8 { "mat2x4<f16>" } else { "f16" };
    let d = ridge_core::Defines::new()
        .enable("f16")
        .enable("wgpu_cooperative_matrix");
    common_defines(d, coop_block(c, g, w), w, vector, output, g, bias)
        .u32("SG_M", c.sg_m)
        .u32("SG_N", c.sg_n)
        .u32("FM", c.fm)
        .u32("FN", c.fn_)
        .u32("BK", c.bk)
        .u32("STAGES", c.stages)
}

pub(crate) fn coop_variants() -> Vec<Variant> {
    let mut v = Vec::new();
    for (trans_a, trans_b, width, cfg) in [
        (false, true, 8, CoopConfig::DEFAULT),
        (true, false, 1, CoopConfig::DEFAULT),
        (
            false,
            false,
            8,
            CoopConfig {
                fm: 4,
                fn_: 4,
                ..CoopConfig::DEFAULT
            },
        ),
    ] {
        let g = Gemm {
            trans_a,
            trans_b,
            gelu: width == 8,
            ..Gemm::new(1, 1, 1)
        };
        let w = Access {
            a: width,
            b: width,
            interior: width == 8 && !trans_b,
            c: 1,
        };
        // The first also into an f32 C (mixed precision).
        let outputs: &[DType] = if trans_b {
            &[DType::F16, DType::F32]
        } else {
            &[DType::F16]
        };
        for &output in outputs {
            v.push((
                &GEMM_COOP,
                "gemm_coop",
                coop_defines(&cfg, output, &g, w, true),
            ));
        }
    }
    v
}

/// The SIMT GEMM and split-K variants with `dtype` operands: C of the same type, and for f16
/// operands two with an f32 C (mixed precision).
pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    let mut v = Vec::new();
    for (trans_a, trans_b, bias, width, interior, mixed) in [
        (false, false, false, 1, false, false),
        (true, true, true, 4, true, false),
        (false, true, true, 4, false, false),
        (false, true, true, 4, true, false),
        (false, false, true, 4, true, false),
        (false, false, false, 1, false, true),
        (false, true, true, 4, true, true),
    ] {
        let output = match (mixed, dtype) {
            (false, _) => dtype,
            (true, DType::F16) => DType::F32,
            (true, _) => continue,
        };
        let g = Gemm {
            trans_a,
            trans_b,
            ..Gemm::new(1, 1, 1)
        };
        let d = config_defines(
            shaders::storage_defines(dtype),
            output,
            &GemmConfig::DEFAULT,
            &g,
            Access {
                a: width,
                b: width,
                interior,
                c: if bias { width } else { 1 },
            },
            bias,
        );
        v.push((&GEMM, "gemm", d));
    }
    for (width, bias, gelu) in [(1, false, false), (4, true, true)] {
        let d = crate::elementwise::vector_defines(shaders::storage_defines(dtype), dtype, width)
            .bool("HAS_BIAS", bias)
            .bool("ACT_GELU", gelu)
            .u32("WG", 256);
        v.push((&GEMM_REDUCE, "gemm_reduce", d));
    }
    v
}
