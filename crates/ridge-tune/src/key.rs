//! Tuning keys: op + shape bucket + dtype, under an adapter fingerprint. Shapes are rounded
//! up to powers of two, so one measured entry serves every problem in its bucket and the
//! table stays small (cubecl's tune keys do the same).

use ridge_core::{DType, Fingerprint};

/// Each dim rounded up to a power of two (0 stays 0).
pub fn bucket(shape: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .map(|&d| if d == 0 { 0 } else { d.next_power_of_two() })
        .collect()
}

/// log2 distance between two buckets of the same rank; `None` for different ranks.
pub fn distance(a: &[usize], b: &[usize]) -> Option<f64> {
    (a.len() == b.len()).then(|| {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| ((x.max(1) as f64).log2() - (y.max(1) as f64).log2()).abs())
            .sum()
    })
}

/// The dtype's name in tables.
pub fn dtype_name(d: DType) -> &'static str {
    d.wgsl()
}

/// The name of an adapter's user table: vendor, device, backend and a slug of the name, e.g.
/// `10005-0000-vulkan-llvmpipe--llvm-15-0-6--256-bits.json`. A file in the cache folder
/// natively; a `localStorage` key (prefixed `ridge/tuning/`) in the browser.
pub fn user_table_name(fp: &Fingerprint) -> String {
    let slug: String = fp
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!(
        "{:04x}-{:04x}-{}-{}.json",
        fp.vendor_id,
        fp.device_id,
        fp.backend,
        slug.trim_matches('-')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_round_up_to_powers_of_two() {
        assert_eq!(bucket(&[1, 3, 384, 4096, 0]), vec![1, 4, 512, 4096, 0]);
        assert_eq!(distance(&[512, 512, 512], &[1024, 512, 256]), Some(2.0));
        assert_eq!(distance(&[1], &[1, 2]), None);
    }
}
