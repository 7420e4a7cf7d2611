//! GEMM tilings: the SIMT kernel's register-blocked [`GemmConfig`], the tensor-core kernel's
//! [`CoopConfig`], the choice between them ([`GemmKernel`]: heuristic, tuning-table
//! parameters, the autotuner's candidates) and their validity checks.

use ridge_core::{Context, DType, Error, Result};

/// Workgroup tiling of the GEMM kernel. Valid when TM and TN are multiples of 4, BM and BN
/// multiples of TM and TN, and BM·BK and BN·BK multiples of the invocation count (each
/// invocation stages the same number of elements); the launcher refuses others with
/// [`Error::InvalidArgument`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmConfig {
    /// Rows of C per workgroup.
    pub bm: u32,
    /// Columns of C per workgroup.
    pub bn: u32,
    /// Depth of each staged K slice.
    pub bk: u32,
    /// Rows of C per invocation.
    pub tm: u32,
    /// Columns of C per invocation.
    pub tn: u32,
    /// Staged slices in workgroup memory: 1 (two barriers per slice: the slice is
    /// overwritten only after every invocation has read it) or 2 (double buffering: the next
    /// slice goes to the other buffer, one barrier per slice, twice the memory).
    pub stages: u32,
    /// Split-K: the K range runs as this many slices side by side, each writing its partial
    /// product to an f32 workspace that a second pass (`shaders/gemm_reduce.wgsl`) sums,
    /// adding β·C, the bias and the activation. More workgroups where the C tile grid alone
    /// leaves the GPU idle (MiniLM's 384-column projections; batch 1), for the workspace's
    /// extra traffic. Applies to unbatched f32 GEMMs, as the largest count ≤ this that
    /// divides K ([`crate::gemm::Gemm::splits`]); 1 everywhere else.
    pub splits: u32,
}

impl GemmConfig {
    /// 64 × 64 tiles, 16 deep, 4 × 4 per invocation: 256 invocations and 8.5 KiB of workgroup
    /// memory, within every WebGPU adapter's minimum limits.
    pub const DEFAULT: GemmConfig = GemmConfig {
        bm: 64,
        bn: 64,
        bk: 16,
        tm: 4,
        tn: 4,
        stages: 1,
        splits: 1,
    };

    /// Invocations per workgroup (0 for a zero thread tile, saturating: a tuning table's
    /// entry may hold any numbers).
    pub fn invocations(&self) -> u32 {
        let per = |b: u32, t: u32| b.checked_div(t).unwrap_or(0);
        per(self.bm, self.tm).saturating_mul(per(self.bn, self.tn))
    }
    /// Bytes of workgroup memory: the staged f32 slices of A and B (each k row padded by
    /// four values), times the stages (saturating).
    pub fn workgroup_bytes(&self) -> u32 {
        self.bm
            .saturating_add(self.bn)
            .saturating_add(8)
            .saturating_mul(self.bk)
            .saturating_mul(4)
            .saturating_mul(self.stages)
    }
}

/// Tiling of the tensor-core GEMM (`shaders/gemm_coop.wgsl`): `sg_m × sg_n` subgroups of
/// 32, each owning a (16·`fm`) × (16·`fn_`) block of C as `fm × fn_` cooperative 16×16 f32
/// accumulators; `bk`-deep slices staged in workgroup memory. Valid when `bk` is a multiple
/// of 16 and the staged slices (BM·BK and BN·BK halves) divide evenly over the invocations;
/// the launcher refuses others with [`Error::InvalidArgument`]. (Fragments loaded straight
/// from memory, without staging, measured 0.6–0.8× as fast on the H200: benches/NOTES.md.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoopConfig {
    /// Subgroups along M.
    pub sg_m: u32,
    /// Subgroups along N.
    pub sg_n: u32,
    /// 16×16 fragments per subgroup along M.
    pub fm: u32,
    /// 16×16 fragments per subgroup along N.
    pub fn_: u32,
    /// Depth of each staged K slice, a multiple of 16.
    pub bk: u32,
    /// Staged slices in workgroup memory, 1 or 2 (as [`GemmConfig::stages`]).
    pub stages: u32,
}

impl CoopConfig {
    /// 2 × 2 subgroups of 2 × 2 fragments (a 64 × 64 tile, 128 invocations), 32 deep.
    pub const DEFAULT: CoopConfig = CoopConfig {
        sg_m: 2,
        sg_n: 2,
        fm: 2,
        fn_: 2,
        bk: 32,
        stages: 1,
    };

    /// Rows of C per workgroup.
    pub fn bm(&self) -> u32 {
        16u32.saturating_mul(self.fm).saturating_mul(self.sg_m)
    }
    /// Columns of C per workgroup.
    pub fn bn(&self) -> u32 {
        16u32.saturating_mul(self.fn_).saturating_mul(self.sg_n)
    }
    /// Invocations per workgroup.
    pub fn invocations(&self) -> u32 {
        32u32.saturating_mul(self.sg_m).saturating_mul(self.sg_n)
    }
    /// Bytes of workgroup memory: f16 A and B slices, each staged row padded by 8 halves
    /// (the larger of the two stored layouts), times the stages, plus a 16×16 f32 scratch
    /// per subgroup.
    pub fn workgroup_bytes(&self) -> u32 {
        let (bk, sat) = (self.bk, |a: u32, b: u32| a.saturating_mul(b));
        let slice =
            |rows: u32| sat(rows, bk.saturating_add(8)).max(sat(bk, rows.saturating_add(8)));
        sat(
            sat(slice(self.bm()).saturating_add(slice(self.bn())), 2),
            self.stages,
        )
        .saturating_add(sat(self.invocations() / 32, 256 * 4))
    }
    /// Whether the tiling is valid (see the type's documentation).
    pub fn is_valid(&self) -> bool {
        let t = self.invocations();
        self.sg_m > 0
            && self.sg_n > 0
            && self.fm > 0
            && self.fn_ > 0
            && self.bk > 0
            && self.bk.is_multiple_of(16)
            && (self.stages == 1 || self.stages == 2)
            && self
                .bm()
                .checked_mul(self.bk)
                .is_some_and(|a| a.is_multiple_of(t))
            && self
                .bn()
                .checked_mul(self.bk)
                .is_some_and(|b| b.is_multiple_of(t))
    }
}

/// Which kernel runs a GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmKernel {
    /// The tiled SIMT kernel (`shaders/gemm.wgsl`), every adapter.
    Tiled(GemmConfig),
    /// Cooperative matrices (`shaders/gemm_coop.wgsl`): f16 storage on adapters with
    /// f16 → f32 tensor cores.
    Coop(CoopConfig),
}

impl GemmKernel {
    /// Rows and columns of C one workgroup computes.
    pub fn tile(&self) -> (usize, usize) {
        match self {
            GemmKernel::Tiled(c) => (c.bm as usize, c.bn as usize),
            GemmKernel::Coop(c) => (c.bm() as usize, c.bn() as usize),
        }
    }

    /// The vendor-heuristic default: tensor cores for f16 where the adapter has them; on CPU
    /// drivers 128 × 128 tiles with 8 × 8 per invocation (fastest on lavapipe,
    /// benches/NOTES.md); elsewhere [`GemmConfig::DEFAULT`].
    pub fn heuristic(ctx: &Context, dtype: DType) -> Self {
        if dtype == DType::F16 && ctx.has_coop_f16() {
            GemmKernel::Coop(CoopConfig::DEFAULT)
        } else if ctx.is_cpu_driver() {
            GemmKernel::Tiled(GemmConfig {
                bm: 128,
                bn: 128,
                bk: 8,
                tm: 8,
                tn: 8,
                stages: 1,
                splits: 1,
            })
        } else {
            GemmKernel::Tiled(GemmConfig::DEFAULT)
        }
    }

    /// Whether this kernel can run `dtype` on `ctx` within its limits.
    pub fn fits(&self, ctx: &Context, dtype: DType) -> bool {
        let l = ctx.limits();
        let (invocations, bytes, ok) = match self {
            GemmKernel::Tiled(c) => (
                c.invocations(),
                c.workgroup_bytes(),
                check_config(c).is_ok(),
            ),
            GemmKernel::Coop(c) => (
                c.invocations(),
                c.workgroup_bytes(),
                dtype == DType::F16 && ctx.has_coop_f16() && c.is_valid(),
            ),
        };
        ok && invocations <= l.max_compute_invocations_per_workgroup
            && bytes <= l.max_compute_workgroup_storage_size
            && (dtype != DType::F16 || ctx.has_f16())
    }

    /// As named parameters for a tuning table.
    pub fn to_params(&self) -> ridge_core::VariantParams {
        let pairs: Vec<(&str, u32)> = match *self {
            GemmKernel::Tiled(c) => vec![
                ("COOP", 0),
                ("BM", c.bm),
                ("BN", c.bn),
                ("BK", c.bk),
                ("TM", c.tm),
                ("TN", c.tn),
                ("STAGES", c.stages),
                ("SPLITS", c.splits),
            ],
            GemmKernel::Coop(c) => vec![
                ("COOP", 1),
                ("SG_M", c.sg_m),
                ("SG_N", c.sg_n),
                ("FM", c.fm),
                ("FN", c.fn_),
                ("BK", c.bk),
                ("STAGES", c.stages),
            ],
        };
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// From a tuning table's parameters; `None` when some are missing (a missing `STAGES` or
    /// `SPLITS` means 1).
    pub fn from_params(p: &ridge_core::VariantParams) -> Option<Self> {
        let g = |k: &str| p.get(k).copied();
        let stages = g("STAGES").unwrap_or(1);
        Some(if g("COOP")? == 1 {
            GemmKernel::Coop(CoopConfig {
                sg_m: g("SG_M")?,
                sg_n: g("SG_N")?,
                fm: g("FM")?,
                fn_: g("FN")?,
                bk: g("BK")?,
                stages,
            })
        } else {
            GemmKernel::Tiled(GemmConfig {
                bm: g("BM")?,
                bn: g("BN")?,
                bk: g("BK")?,
                tm: g("TM")?,
                tn: g("TN")?,
                stages,
                splits: g("SPLITS").unwrap_or(1),
            })
        })
    }

    /// Candidates the autotuner tries on `ctx` for `dtype` (those that fit).
    pub fn candidates(ctx: &Context, dtype: DType) -> Vec<Self> {
        // (tiling, stages): double buffering where the H200 measured it competitive
        // (benches/NOTES.md); each candidate costs the tests a compile on every adapter.
        let tiled = |bm, bn, bk, tm, tn, stages| {
            GemmKernel::Tiled(GemmConfig {
                bm,
                bn,
                bk,
                tm,
                tn,
                stages,
                splits: 1,
            })
        };
        // Split-K (f32 only) for grids of few tiles: small tiles split far for batch 1's
        // 128-row products, large ones split less for 384-column ones. A split shares its
        // tiling's shader, so it costs no compile of its own.
        let split = |kernel, splits| match kernel {
            GemmKernel::Tiled(c) => GemmKernel::Tiled(GemmConfig { splits, ..c }),
            coop => coop,
        };
        let mut v = vec![
            tiled(64, 64, 16, 4, 4, 1),
            tiled(64, 64, 16, 4, 4, 2),
            tiled(64, 64, 8, 4, 4, 1),
            tiled(64, 64, 8, 4, 4, 2),
            tiled(32, 32, 16, 4, 4, 1),
            tiled(128, 64, 8, 8, 4, 1),
            tiled(64, 128, 8, 4, 8, 1),
            tiled(128, 128, 8, 8, 8, 1),
            tiled(128, 128, 8, 8, 8, 2),
            tiled(128, 128, 16, 8, 8, 1),
            tiled(64, 64, 32, 4, 4, 1),
            tiled(128, 64, 16, 8, 4, 1),
            tiled(256, 128, 8, 8, 8, 1),
            tiled(128, 128, 8, 16, 8, 1),
            // 8 × 8 and 8 × 4 blocks on small tiles: with loads free of bounds checks they
            // lead at MiniLM's 384- and 1152-column products (benches/NOTES.md, run 68).
            tiled(64, 128, 16, 8, 8, 1),
            tiled(128, 64, 16, 8, 8, 1),
            tiled(64, 64, 16, 8, 8, 1),
            tiled(64, 64, 16, 8, 4, 1),
        ];
        if dtype == DType::F32 {
            v.extend([
                split(tiled(32, 32, 16, 4, 4, 1), 4),
                split(tiled(32, 32, 16, 4, 4, 1), 8),
                split(tiled(64, 64, 16, 4, 4, 1), 2),
                split(tiled(64, 64, 16, 4, 4, 1), 4),
                split(tiled(128, 64, 16, 8, 4, 1), 2),
                split(tiled(128, 128, 8, 8, 8, 1), 2),
                split(tiled(128, 128, 8, 8, 8, 1), 3),
            ]);
        }
        for (sg_m, sg_n, fm, fn_, bk, stages) in [
            (2, 2, 2, 2, 32, 1),
            (2, 2, 2, 2, 64, 1),
            (2, 2, 2, 2, 64, 2),
            (2, 2, 4, 4, 32, 1),
            (2, 2, 4, 4, 64, 1),
            (4, 2, 2, 2, 32, 1),
            (4, 4, 2, 2, 32, 1),
            (4, 4, 2, 2, 16, 1),
            (4, 4, 2, 2, 16, 2),
            (4, 4, 2, 4, 32, 1),
            (4, 4, 4, 2, 32, 1),
            (4, 2, 4, 4, 32, 1),
            (2, 4, 4, 4, 32, 1),
            (2, 4, 2, 4, 32, 1),
        ] {
            v.push(GemmKernel::Coop(CoopConfig {
                sg_m,
                sg_n,
                fm,
                fn_,
                bk,
                stages,
            }));
        }
        v.retain(|k| k.fits(ctx, dtype));
        // Tensor cores first: where they run they win, and a short tuning budget reaches them.
        v.sort_by_key(|k| !matches!(k, GemmKernel::Coop(_)));
        v
    }
}

/// The most K slices a split-K GEMM runs ([`GemmConfig::splits`]).
pub const MAX_SPLITS: u32 = 64;

pub(super) fn check_config(c: &GemmConfig) -> Result<()> {
    let ok = c.tm > 0
        && c.tn > 0
        && c.tm.is_multiple_of(4)
        && c.tn.is_multiple_of(4)
        && c.bk > 0
        && (c.stages == 1 || c.stages == 2)
        && (1..=MAX_SPLITS).contains(&c.splits)
        && c.bm.is_multiple_of(c.tm)
        && c.bn.is_multiple_of(c.tn)
        && c.invocations() > 0
        && c.bm
            .checked_mul(c.bk)
            .is_some_and(|a| a.is_multiple_of(c.invocations()))
        && c.bn
            .checked_mul(c.bk)
            .is_some_and(|b| b.is_multiple_of(c.invocations()));
    if ok {
        return Ok(());
    }
    Err(Error::invalid(
        "gemm",
        format!(
            "tiling {c:?}: TM and TN must be multiples of 4, BM and BN of TM and TN, \
             BM·BK and BN·BK of the invocation count, stages 1 or 2 and splits 1 to {MAX_SPLITS}"
        ),
    ))
}
