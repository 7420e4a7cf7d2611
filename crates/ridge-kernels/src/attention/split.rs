//! Work lists of the register-blocked attention kernel ([`SplitPlan`]) and block-sparse
//! layouts uploaded with theirs ([`SparseLayout`]).

use ridge_core::{Context, Result, Tensor};
use ridge_model::sparsity::BlockLayout;

/// How the register-blocked kernel walks its rows (a block-sparse layout's, or dense
/// attention's when [`crate::attention::Attention::kv_splits`] cuts them): each row is cut
/// into work items of at most `max_tiles` key blocks or tiles, so that no workgroup walks a
/// row much longer than the others (BigBird's global rows visit every block: uncut, one
/// workgroup per global row is the critical path of the whole launch, and the time grows with
/// n whatever the density). A row cut into several items writes each item's unnormalised
/// output, row maxima and row sums to a partial slot, and a second pass merges them
/// (split-KV, as in Flash-Decoding: Dao, Haziza, Massa & Sizov, 2023).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitPlan {
    /// Work items `[query block, first col_idx entry, end, slot]`, longest first; slot
    /// `u32::MAX` means the item is its whole row and writes O itself.
    pub items: Vec<[u32; 4]>,
    /// Rows cut into several items: `[query block, first slot, slots, 0]`.
    pub merges: Vec<[u32; 4]>,
    /// Partial slots per (batch, head).
    pub slots: u32,
}

impl SplitPlan {
    /// A block-sparse layout's rows in items of at most `max_tiles` (≥ 1) block-CSR entries;
    /// a longer row is cut into the fewest items of near-equal length.
    pub fn new(layout: &BlockLayout, max_tiles: usize) -> Self {
        let rows = (0..layout.blocks).map(|qb| (layout.row_ptr[qb], layout.row_ptr[qb + 1]));
        Self::from_rows(rows, max_tiles)
    }

    /// Dense attention's rows: query block `qb` walks key tiles `0..tiles(qb)`, cut into
    /// items of at most `max_tiles`.
    pub fn dense(query_blocks: usize, tiles: impl Fn(usize) -> u32, max_tiles: usize) -> Self {
        Self::from_rows((0..query_blocks).map(|qb| (0, tiles(qb))), max_tiles)
    }

    /// Row `qb` covers entries (sparse) or tiles (dense) `start..end`.
    fn from_rows(rows: impl Iterator<Item = (u32, u32)>, max_tiles: usize) -> Self {
        let max_tiles = max_tiles.max(1);
        let (mut items, mut merges, mut slots) = (Vec::new(), Vec::new(), 0u32);
        for (qb, (start, end)) in rows.enumerate() {
            let len = (end - start) as usize;
            let parts = len.div_ceil(max_tiles).max(1);
            if parts == 1 {
                items.push([qb as u32, start, end, u32::MAX]);
                continue;
            }
            merges.push([qb as u32, slots, parts as u32, 0]);
            for i in 0..parts {
                let from = start + (i * len / parts) as u32;
                let to = start + ((i + 1) * len / parts) as u32;
                items.push([qb as u32, from, to, slots]);
                slots += 1;
            }
        }
        // Longest first: they start first and the short ones fill in behind them.
        items.sort_by_key(|it| std::cmp::Reverse(it[2] - it[1]));
        Self {
            items,
            merges,
            slots,
        }
    }

    /// The default cut: items no longer than the mean row (at least 4 blocks, below which
    /// the merge costs more than it balances).
    pub fn default_max_tiles(layout: &BlockLayout) -> usize {
        layout.nnz().div_ceil(layout.blocks.max(1)).max(4)
    }

    /// The plan for query tiles of block / `query_tiles` rows: every item and merge once per
    /// query tile (item query index qb · query_tiles + h), slot s of tile h renumbered
    /// h · slots + s so that each merge's slots stay consecutive.
    pub fn per_query_tile(&self, query_tiles: u32) -> Self {
        let q = query_tiles.max(1);
        let tile = |qb: u32, h: u32| qb * q + h;
        let slot = |s: u32, h: u32| match s {
            u32::MAX => u32::MAX,
            s => h * self.slots + s,
        };
        Self {
            items: (0..q)
                .flat_map(|h| {
                    self.items
                        .iter()
                        .map(move |&[qb, from, to, s]| [tile(qb, h), from, to, slot(s, h)])
                })
                .collect(),
            merges: (0..q)
                .flat_map(|h| {
                    self.merges
                        .iter()
                        .map(move |&[qb, first, n, _]| [tile(qb, h), slot(first, h), n, 0])
                })
                .collect(),
            slots: self.slots * q,
        }
    }

    /// The work list as the kernel reads it (the items, then the merges), uploaded.
    pub(super) fn upload(&self, ctx: &Context) -> Result<Tensor> {
        let words: Vec<u32> = self
            .items
            .iter()
            .chain(&self.merges)
            .flatten()
            .copied()
            .collect();
        Tensor::from_slice(ctx, &words, &[words.len()])
    }
}

/// A [`BlockLayout`] uploaded for the kernels: its block CSR, and its work list
/// ([`SplitPlan`]) for the register-blocked kernel.
pub struct SparseLayout {
    /// The layout.
    pub layout: BlockLayout,
    /// How the register-blocked kernel cuts its rows.
    pub plan: SplitPlan,
    pub(super) row_ptr: Tensor,
    pub(super) col_idx: Tensor,
    pub(super) work: Tensor,
}

impl SparseLayout {
    /// Uploads `layout` with the default cut ([`SplitPlan::default_max_tiles`]).
    pub fn upload(ctx: &Context, layout: BlockLayout) -> Result<Self> {
        let max_tiles = SplitPlan::default_max_tiles(&layout);
        Self::upload_split(ctx, layout, max_tiles)
    }

    /// Uploads `layout`, cutting rows into work items of at most `max_tiles` key blocks.
    pub fn upload_split(ctx: &Context, layout: BlockLayout, max_tiles: usize) -> Result<Self> {
        let plan = SplitPlan::new(&layout, max_tiles);
        let work = plan.upload(ctx)?;
        let row_ptr = Tensor::from_slice(ctx, &layout.row_ptr, &[layout.row_ptr.len()])?;
        let cols = if layout.col_idx.is_empty() {
            vec![0]
        } else {
            layout.col_idx.clone()
        };
        let col_idx = Tensor::from_slice(ctx, &cols, &[cols.len()])?;
        Ok(Self {
            layout,
            plan,
            row_ptr,
            col_idx,
            work,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::Attention;
    use ridge_model::sparsity::BigBird;

    /// Every block-CSR entry in exactly one item of its own row; merges cover the cut rows'
    /// slots, each slot once.
    fn covers(layout: &BlockLayout, plan: &SplitPlan, max_tiles: usize) {
        let mut seen = vec![0u32; layout.nnz()];
        let mut slot_uses = vec![0u32; plan.slots as usize];
        for &[qb, from, to, slot] in &plan.items {
            let qb = qb as usize;
            assert!(layout.row_ptr[qb] <= from && to <= layout.row_ptr[qb + 1]);
            assert!((to - from) as usize <= max_tiles.max(1));
            (from..to).for_each(|e| seen[e as usize] += 1);
            if slot != u32::MAX {
                slot_uses[slot as usize] += 1;
                let m = plan.merges.iter().find(|m| m[0] as usize == qb).unwrap();
                assert!(m[1] <= slot && slot < m[1] + m[2]);
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
        assert!(slot_uses.iter().all(|&n| n == 1));
        let lengths: Vec<u32> = plan.items.iter().map(|it| it[2] - it[1]).collect();
        assert!(lengths.windows(2).all(|w| w[0] >= w[1]), "longest first");
    }

    #[test]
    fn dense_cuts_only_launches_too_small_to_fill_the_gpu() {
        let att = |batch, seq| Attention::new(batch, 12, seq, 64);
        // (batch, n) → cut, at 64 query rows and 32 keys per tile.
        for (batch, n, want) in [
            (1, 1024, 2),
            (1, 512, 1),
            (1, 2048, 1),
            (1, 128, 1),
            (32, 128, 1),
        ] {
            let a = att(batch, n);
            assert_eq!(
                a.default_kv_splits(n.div_ceil(64), n.div_ceil(32)),
                want,
                "{batch} × {n}"
            );
        }
    }

    #[test]
    fn split_plan_cuts_only_the_long_rows() {
        let p = BigBird {
            block: 32,
            global: 2,
            window: 1,
            random: 3,
            seed: 1,
        };
        let layout = BlockLayout::bigbird(4096, p);
        let max_tiles = SplitPlan::default_max_tiles(&layout);
        let plan = SplitPlan::new(&layout, max_tiles);
        covers(&layout, &plan, max_tiles);
        // The two global rows (128 blocks each) are cut; the others are not.
        assert_eq!(plan.merges.len(), 2);
        assert!(
            plan.items
                .iter()
                .all(|it| it[2] - it[1] <= max_tiles as u32)
        );
        for max_tiles in [0, 1, 3, 1000] {
            let plan = SplitPlan::new(&layout, max_tiles);
            covers(&layout, &plan, max_tiles);
        }
        // An empty row (no blocks) is still one item: its rows are written as zeros.
        let empty = BlockLayout {
            block: 4,
            seq: 8,
            blocks: 2,
            row_ptr: vec![0, 0, 2],
            col_idx: vec![0, 1],
        };
        let plan = SplitPlan::new(&empty, 1);
        assert_eq!(plan.items.len(), 3);
        assert!(plan.items.contains(&[0, 0, 0, u32::MAX]));
        assert_eq!(plan.merges, vec![[1, 0, 2, 0]]);
        // Two query tiles per block: every item twice, slots renumbered per tile.
        let halves = plan.per_query_tile(2);
        assert_eq!(halves.slots, 4);
        assert_eq!(halves.items.len(), 6);
        assert!(halves.items.contains(&[0, 0, 0, u32::MAX]));
        assert!(halves.items.contains(&[1, 0, 0, u32::MAX]));
        assert!(halves.items.contains(&[3, 1, 2, 3]));
        assert_eq!(halves.merges, vec![[2, 0, 2, 0], [3, 2, 2, 0]]);
        assert_eq!(plan.per_query_tile(1), plan);
    }
}
