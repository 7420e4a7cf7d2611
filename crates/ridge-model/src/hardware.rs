//! The hardware spec table (`data/gpus.json`): f32 and f16 peaks and memory bandwidth of
//! the GPUs Ridge predicts for, each row with its source, matched to an adapter by PCI
//! vendor/device id or by name.

use serde::{Deserialize, Serialize};

use crate::roofline::{CeilingSource, Ceilings};

/// One GPU's datasheet ceilings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuSpec {
    /// Marketing name.
    pub name: String,
    /// PCI vendor id.
    pub vendor_id: u32,
    /// PCI device ids that identify it exactly (empty: match by name only).
    pub device_ids: Vec<u32>,
    /// Adapter-name fragments that identify it (whole words, case-insensitive).
    #[serde(rename = "match")]
    pub patterns: Vec<String>,
    /// Vector FP32 peak, TFLOP/s (10¹² FLOP/s, FMA = 2).
    pub f32_tflops: f64,
    /// Dense FP16 matrix-engine peak with FP32 accumulation, TFLOP/s (see the table's
    /// `about`).
    pub f16_tflops: f64,
    /// Peak DRAM bandwidth, GB/s (10⁹ bytes/s).
    pub bandwidth_gbps: f64,
    /// Memory, GB (10⁹ bytes; Apple: the largest unified-memory configuration); `None`
    /// where it varies with the system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_gb: Option<f64>,
    /// Datasheet or derivation.
    pub source: String,
}

/// Element precision of a workload, which picks the compute roof.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Precision {
    /// f32 storage and arithmetic.
    F32,
    /// f16 storage with f32 accumulation.
    F16,
}

impl GpuSpec {
    /// The roofline ceilings of this GPU at `precision` (no dispatch overhead: datasheets
    /// do not state one).
    pub fn ceilings(&self, precision: Precision) -> Ceilings {
        let tflops = match precision {
            Precision::F32 => self.f32_tflops,
            Precision::F16 => self.f16_tflops,
        };
        Ceilings::new(
            tflops,
            self.bandwidth_gbps,
            0.0,
            CeilingSource::Spec(self.name.clone()),
        )
    }
}

#[derive(Deserialize)]
struct Table {
    gpus: Vec<GpuSpec>,
}

/// Every row of the spec table (parsed once).
pub fn table() -> Vec<GpuSpec> {
    static TABLE: std::sync::OnceLock<Vec<GpuSpec>> = std::sync::OnceLock::new();
    TABLE
        .get_or_init(|| {
            let table: Table = serde_json::from_str(include_str!("../data/gpus.json"))
                .expect("data/gpus.json is valid (tested)");
            table.gpus
        })
        .clone()
}

fn words(s: &str) -> Vec<String> {
    s.to_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '(' && c != ')')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether `pattern`'s words appear consecutively in `name`'s words.
fn name_matches(name: &str, pattern: &str) -> bool {
    let (n, p) = (words(name), words(pattern));
    !p.is_empty() && n.windows(p.len()).any(|w| w == p.as_slice())
}

/// The spec row for an adapter: an exact (vendor, device) id match first, else the row
/// with the longest name pattern found in `name`. `None` for CPU drivers and unknown GPUs.
pub fn lookup(vendor_id: u32, device_id: u32, name: &str) -> Option<GpuSpec> {
    let rows = table();
    if let Some(row) = rows
        .iter()
        .find(|r| r.vendor_id == vendor_id && device_id != 0 && r.device_ids.contains(&device_id))
    {
        return Some(row.clone());
    }
    rows.into_iter()
        .filter_map(|r| {
            let best = r
                .patterns
                .iter()
                .filter(|p| name_matches(name, p))
                .map(|p| words(p).len())
                .max()?;
            Some((best, r))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, r)| r)
}

/// The spec row `query` names (for `--adapter "NVIDIA H200"`): its exact name (any case);
/// else the only row whose name holds the query's words in order (`"M2 Max"`), or of several
/// such the only one whose name ends with them (`"RX 6800"`, not the 6800 XT); else the row an
/// adapter of that name would get ([`lookup`]: `"NVIDIA H100 80GB HBM3"`).
///
/// Errors: a message listing the candidates when several rows' names hold the query (`"H100"`:
/// the SXM5 card has 1.7× the PCIe card's bandwidth, so guessing would mislead), or the known
/// names (and any that contain the query) when none matches.
pub fn find(query: &str) -> Result<GpuSpec, String> {
    let q = query.trim().to_lowercase();
    let rows = table();
    if let Some(row) = rows.iter().find(|r| r.name.to_lowercase() == q) {
        return Ok(row.clone());
    }
    let named: Vec<&GpuSpec> = rows
        .iter()
        .filter(|r| name_matches(&r.name, query))
        .collect();
    // Among several, the one whose name ends with the query ("RX 6800", not the 6800 XT).
    let q_words = words(query);
    let ending: Vec<&&GpuSpec> = named
        .iter()
        .filter(|r| words(&r.name).ends_with(&q_words))
        .collect();
    if let ([_, _, ..], [one]) = (named.as_slice(), ending.as_slice()) {
        return Ok((**one).clone());
    }
    match named.as_slice() {
        [one] => return Ok((*one).clone()),
        [] => {}
        many => {
            let names: Vec<&str> = many.iter().map(|r| r.name.as_str()).collect();
            return Err(format!(
                "{query:?} could be any of: {}; name one",
                some_of(&names)
            ));
        }
    }
    lookup(0, 0, query).ok_or_else(|| {
        let near: Vec<&str> = rows
            .iter()
            .map(|r| r.name.as_str())
            .filter(|n| !q.is_empty() && n.to_lowercase().contains(&q))
            .collect();
        if near.is_empty() {
            format!(
                "no GPU named {query:?} among the spec table's {}",
                rows.len()
            )
        } else {
            format!(
                "no GPU named {query:?} in the spec table; did you mean: {}",
                some_of(&near)
            )
        }
    })
}

/// Up to eight names, then how many more: an error line a reader takes in.
fn some_of(names: &[&str]) -> String {
    const SHOWN: usize = 8;
    match names.len().checked_sub(SHOWN) {
        Some(more) if more > 0 => format!("{}, and {more} more", names[..SHOWN].join(", ")),
        _ => names.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_names_one_row_or_lists_the_candidates() {
        assert_eq!(find("NVIDIA H200 SXM").unwrap().name, "NVIDIA H200 SXM");
        assert_eq!(find("h200").unwrap().name, "NVIDIA H200 SXM");
        assert_eq!(find("M2 Max").unwrap().name, "Apple M2 Max");
        // What an adapter reports: the pattern picks the card.
        assert_eq!(
            find("NVIDIA H100 80GB HBM3").unwrap().name,
            "NVIDIA H100 SXM5"
        );
        // A name that is the start of another's: the row it ends.
        assert_eq!(find("RX 6800").unwrap().name, "AMD Radeon RX 6800");
        assert_eq!(find("RX 6800 XT").unwrap().name, "AMD Radeon RX 6800 XT");
        assert_eq!(find("RX 7900 XT").unwrap().name, "AMD Radeon RX 7900 XT");
        assert_eq!(find("Radeon VII").unwrap().name, "AMD Radeon VII");
        for (query, both) in [("H100", ["SXM5", "PCIe"]), ("A100", ["80GB", "40GB"])] {
            let e = find(query).unwrap_err();
            assert!(both.iter().all(|b| e.contains(b)), "{query}: {e}");
        }
        // An unknown name: one short line, however long the table (it listed all 104 once).
        for query in ["Voodoo 5", "", "RTX"] {
            let e = find(query).unwrap_err();
            assert!(e.len() < 300 && !e.contains('\n'), "{query:?}: {e}");
        }
        assert!(find("Voodoo 5").unwrap_err().contains("spec table's"));
    }

    #[test]
    fn every_row_is_complete_and_sourced() {
        let rows = table();
        assert!(rows.len() >= 25);
        for r in &rows {
            assert!(
                r.f32_tflops > 0.0 && r.f16_tflops >= r.f32_tflops * 0.99,
                "{}",
                r.name
            );
            assert!(
                r.bandwidth_gbps > 0.0 && !r.patterns.is_empty(),
                "{}",
                r.name
            );
            assert!(r.source.len() > 20, "{} has no real source", r.name);
        }
        for want in [
            "H100",
            "H200",
            "A100",
            "L4",
            "RTX 4090",
            "RTX 3090",
            "RTX 3060",
            "MI300X",
            "MI250X",
            "RX 7900 XTX",
            "RX 6800",
            "Apple M1",
            "Apple M4 Max",
            "Arc A770",
            "Iris Xe",
        ] {
            assert!(
                rows.iter()
                    .any(|r| r.patterns.iter().any(|p| name_matches(p, want))
                        || name_matches(&r.name, want)),
                "{want}"
            );
        }
    }

    #[test]
    fn adapters_match_by_id_then_by_name() {
        assert_eq!(lookup(0x10de, 0x2335, "").unwrap().name, "NVIDIA H200 SXM");
        assert_eq!(
            lookup(0x10de, 0, "NVIDIA H200").unwrap().name,
            "NVIDIA H200 SXM"
        );
        assert_eq!(lookup(0x10de, 0, "NVIDIA L4").unwrap().name, "NVIDIA L4");
        assert_eq!(
            lookup(0x10de, 0, "NVIDIA L40S").unwrap().name,
            "NVIDIA L40S",
            "L4 must not match L40S"
        );
        // A card's variants each take their own row, not the shorter name's.
        for name in [
            "RTX 4060 Ti",
            "RTX 4070 Ti SUPER",
            "RX 9070 XT",
            "GTX 1660 SUPER",
        ] {
            let adapter =
                format!("NVIDIA GeForce {name}").replace("NVIDIA GeForce RX", "AMD Radeon RX");
            assert!(
                lookup(0, 0, &adapter).unwrap().name.ends_with(name),
                "{adapter}"
            );
        }
        assert_eq!(
            lookup(0x106b, 0, "Apple M1 Max").unwrap().name,
            "Apple M1 Max"
        );
        assert_eq!(lookup(0x106b, 0, "Apple M1").unwrap().name, "Apple M1");
        assert_eq!(
            lookup(0x10de, 0, "NVIDIA H100 PCIe").unwrap().name,
            "NVIDIA H100 PCIe"
        );
        assert!(lookup(0x10005, 0, "llvmpipe (LLVM 15.0.6, 256 bits)").is_none());
        assert_eq!(find("NVIDIA H200").unwrap().name, "NVIDIA H200 SXM");
    }

    #[test]
    fn h200_ridge_points() {
        let h = find("H200").unwrap();
        assert!((h.ceilings(Precision::F32).ridge_point() - 66.9e12 / 4.8e12).abs() < 1e-9);
        assert!(h.ceilings(Precision::F16).ridge_point() > 200.0);
    }
}
