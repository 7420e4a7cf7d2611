//! Block-sparse attention layouts in the style of BigBird (Zaheer et al., "Big Bird:
//! Transformers for Longer Sequences", NeurIPS 2020, §2): the sequence is cut into blocks of
//! `block` tokens; a query block attends to the global blocks (and global blocks attend to
//! everything), to its sliding window of neighbours, and to a few random blocks. Stored as
//! block CSR: for each query block row, the sorted list of key blocks it visits.

use rand::{RngExt, SeedableRng, rngs::StdRng};
use serde::{Deserialize, Serialize};

/// How a BigBird layout is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BigBird {
    /// Tokens per block.
    pub block: usize,
    /// The first `global` blocks attend to every block and every block attends to them.
    pub global: usize,
    /// Blocks on each side of the diagonal a block row attends to (0: the diagonal only).
    pub window: usize,
    /// Random blocks per block row (outside the global and window blocks when possible).
    pub random: usize,
    /// Seed of the random blocks.
    pub seed: u64,
}

/// A block-CSR attention layout over `blocks` × `blocks` blocks of `block` tokens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockLayout {
    /// Tokens per block.
    pub block: usize,
    /// Sequence length in tokens (the last block may be partial).
    pub seq: usize,
    /// Block rows: `ceil(seq / block)`.
    pub blocks: usize,
    /// `row_ptr[i]..row_ptr[i + 1]` index `col_idx` for block row `i`.
    pub row_ptr: Vec<u32>,
    /// Key blocks, sorted within each row.
    pub col_idx: Vec<u32>,
}

impl BlockLayout {
    /// Every block visits every block (dense attention, as a layout).
    pub fn dense(seq: usize, block: usize) -> Self {
        Self::from_rows(seq, block, |_, nb| (0..nb).collect())
    }

    /// A BigBird layout for `seq` tokens.
    pub fn bigbird(seq: usize, p: BigBird) -> Self {
        let mut rng = StdRng::seed_from_u64(p.seed);
        Self::from_rows(seq, p.block, |i, nb| {
            let mut cols: Vec<usize> = Vec::new();
            if i < p.global {
                return (0..nb).collect();
            }
            cols.extend(0..p.global.min(nb));
            cols.extend(i.saturating_sub(p.window)..(i + p.window + 1).min(nb));
            let taken = |c: &usize, cols: &Vec<usize>| cols.contains(c);
            let free: Vec<usize> = (0..nb).filter(|c| !taken(c, &cols)).collect();
            let mut free = free;
            for _ in 0..p.random.min(free.len()) {
                let k = rng.random_range(0..free.len());
                cols.push(free.swap_remove(k));
            }
            cols
        })
    }

    fn from_rows(seq: usize, block: usize, row: impl FnMut(usize, usize) -> Vec<usize>) -> Self {
        let block = block.max(1);
        let blocks = seq.div_ceil(block);
        let mut row = row;
        let mut row_ptr = vec![0u32];
        let mut col_idx = Vec::new();
        for i in 0..blocks {
            let mut cols = row(i, blocks);
            cols.sort_unstable();
            cols.dedup();
            col_idx.extend(cols.iter().map(|&c| c as u32));
            row_ptr.push(col_idx.len() as u32);
        }
        Self {
            block,
            seq,
            blocks,
            row_ptr,
            col_idx,
        }
    }

    /// Nonzero blocks.
    pub fn nnz(&self) -> usize {
        self.col_idx.len()
    }

    /// Fraction of the blocks visited: nnz ÷ blocks².
    pub fn density(&self) -> f64 {
        if self.blocks == 0 {
            0.0
        } else {
            self.nnz() as f64 / (self.blocks * self.blocks) as f64
        }
    }

    /// Key blocks of block row `i`.
    pub fn row(&self, i: usize) -> &[u32] {
        &self.col_idx[self.row_ptr[i] as usize..self.row_ptr[i + 1] as usize]
    }

    /// The token-level mask: `mask[q * seq + k]` is true where query `q` may attend to key `k`
    /// (for tests and plots).
    pub fn to_dense_mask(&self) -> Vec<bool> {
        let mut m = vec![false; self.seq * self.seq];
        for i in 0..self.blocks {
            for &c in self.row(i) {
                for q in i * self.block..((i + 1) * self.block).min(self.seq) {
                    for k in c as usize * self.block..((c as usize + 1) * self.block).min(self.seq)
                    {
                        m[q * self.seq + k] = true;
                    }
                }
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_layout_is_all_ones() {
        let l = BlockLayout::dense(10, 4);
        assert_eq!((l.blocks, l.nnz()), (3, 9));
        assert!(l.to_dense_mask().iter().all(|&b| b));
        assert_eq!(l.density(), 1.0);
    }

    #[test]
    fn bigbird_has_globals_window_and_seeded_randoms() {
        let p = BigBird {
            block: 16,
            global: 1,
            window: 1,
            random: 2,
            seed: 7,
        };
        let l = BlockLayout::bigbird(16 * 20, p);
        assert_eq!(l.row(0).len(), 20, "a global row sees everything");
        for i in 1..20 {
            let r = l.row(i);
            assert!(r.contains(&0), "everyone sees the global block");
            assert!(r.contains(&(i as u32)), "the diagonal");
            let expected = 1 + (i + 1).min(19).saturating_sub(i.saturating_sub(1)) + 1;
            assert!(r.len() <= expected + 2 && r.len() >= 3, "row {i}: {r:?}");
            assert!(r.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
        }
        assert_eq!(
            l,
            BlockLayout::bigbird(16 * 20, p),
            "same seed, same layout"
        );
        assert_ne!(l, BlockLayout::bigbird(16 * 20, BigBird { seed: 8, ..p }));
        assert!(l.density() < 0.35);
    }

    #[test]
    fn a_tail_block_is_partial() {
        let l = BlockLayout::bigbird(
            50,
            BigBird {
                block: 16,
                global: 0,
                window: 0,
                random: 0,
                seed: 0,
            },
        );
        assert_eq!(l.blocks, 4);
        let m = l.to_dense_mask();
        assert!(m[49 * 50 + 48] && !m[49 * 50 + 47 - 16]);
    }
}
