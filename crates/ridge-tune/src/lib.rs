//! Per-adapter tuning tables and an autotuner for Ridge's kernels.
//!
//! A kernel's best configuration differs by GPU; here it is data. Keys are the adapter
//! fingerprint + op + shape bucket + dtype ([`key`]); tables ([`table`]) are shipped per
//! adapter family ([`shipped`], `crates/ridge-tune/tables/`) and measured per adapter by the
//! autotuner into the user's cache ([`cache`]). [`install`] puts the right tables on a
//! context; kernels then consult them and fall back to their heuristics. Tests never
//! autotune.

pub mod key;
pub mod shipped;
pub mod table;

pub mod autotune;
#[cfg(not(target_arch = "wasm32"))]
pub mod cache;

use std::sync::Arc;

use ridge_core::{Context, Fingerprint};

pub use table::{Entry, Origin, Table, TableSet, TableWarning};

/// The tables for an adapter: the user's table (name and JSON, if there is one), then the
/// shipped table of its family. Corrupt, foreign or stale tables and entries are dropped with
/// a warning; what remains is used.
pub fn tables_for(
    fp: &Fingerprint,
    user: Option<(String, String)>,
) -> (TableSet, Vec<TableWarning>) {
    let mut set = TableSet::default();
    let mut warnings = Vec::new();
    if let Some((name, json)) = user {
        match Table::parse(&name, &json) {
            Ok(t) if t.fingerprint.as_ref().is_some_and(|f| f != fp) => {
                warnings.push(TableWarning::Foreign {
                    source_name: name,
                    other: t
                        .fingerprint
                        .map(|f| format!("{} ({}, {})", f.name, f.backend, f.driver))
                        .unwrap_or_default(),
                })
            }
            Ok(mut t) => {
                warnings.extend(t.drop_stale(&name));
                set.layers.push((name, t));
            }
            Err(w) => warnings.push(w),
        }
    }
    if let Some(family) = shipped::family(fp) {
        let name = format!("shipped table {family}");
        match Table::parse(&name, shipped::json(family).unwrap_or("")) {
            Ok(mut t) => {
                warnings.extend(t.drop_stale(&name));
                set.layers.push((name, t));
            }
            Err(w) => warnings.push(w),
        }
    }
    (set, warnings)
}

/// Installs the user's and the shipped tables on `ctx` (natively the user's table is read
/// from the cache folder) and returns the set with any warnings, which callers should print.
#[cfg(not(target_arch = "wasm32"))]
pub fn install(ctx: &Context) -> (Arc<TableSet>, Vec<TableWarning>) {
    let fp = ctx.fingerprint();
    let user = cache::read(&fp);
    install_tables(ctx, &fp, user)
}

/// Installs the tables for `fp` on `ctx`, with the user's table given as (name, JSON): the
/// browser reads it from its own storage, and passes the adapter name it gets from
/// `GPUAdapter.info` when wgpu reports none. Warnings are logged and returned.
pub fn install_tables(
    ctx: &Context,
    fp: &Fingerprint,
    user: Option<(String, String)>,
) -> (Arc<TableSet>, Vec<TableWarning>) {
    let (set, warnings) = tables_for(fp, user);
    for w in &warnings {
        tracing::warn!("{w}");
    }
    let set = Arc::new(set);
    ctx.set_tuning(Some(set.clone()));
    (set, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ridge_core::DType;

    fn fp(name: &str, vendor: u32) -> Fingerprint {
        Fingerprint {
            vendor_id: vendor,
            device_id: 0,
            backend: "vulkan".into(),
            driver: "d 1".into(),
            name: name.into(),
        }
    }

    fn params(bm: u32) -> std::collections::BTreeMap<String, u32> {
        [
            ("COOP", 0),
            ("BM", bm),
            ("BN", 32),
            ("BK", 8),
            ("TM", 4),
            ("TN", 4),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn user_table(fingerprint: Option<Fingerprint>, hash: &str, bm: u32) -> String {
        let mut t = Table::new("llvmpipe", fingerprint);
        t.insert(Entry {
            op: "gemm".into(),
            bucket: vec![64, 64, 64],
            dtype: "f32".into(),
            params: params(bm),
            shader_hash: hash.into(),
            ms: Some(1.0),
            baseline_ms: None,
            origin: Origin::Measured {
                device: "x".into(),
                date: "2026-11-29".into(),
            },
        });
        t.to_json()
    }

    #[test]
    fn every_shipped_table_parses_and_is_fresh() {
        for (family, json) in shipped::TABLES {
            let mut t = Table::parse(family, json).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(t.family, *family);
            assert!(
                t.drop_stale(family).is_none(),
                "{family}: stale entries; re-tune or mark heuristic"
            );
            assert!(!t.entries.is_empty());
        }
    }

    #[test]
    fn families_follow_vendor_and_name() {
        assert_eq!(
            shipped::family(&fp("llvmpipe (LLVM 15.0.6, 256 bits)", 0x10005)),
            Some("llvmpipe")
        );
        assert_eq!(
            shipped::family(&fp("NVIDIA H200", 0x10de)),
            Some("nvidia-hopper")
        );
        assert_eq!(
            shipped::family(&fp("NVIDIA GeForce RTX 4090", 0x10de)),
            Some("nvidia-ada")
        );
        assert_eq!(
            shipped::family(&fp("AMD Instinct MI300X", 0x1002)),
            Some("amd-cdna")
        );
        assert_eq!(
            shipped::family(&fp("Apple M2 Max", 0x106b)),
            Some("apple-m")
        );
        assert_eq!(shipped::family(&fp("Some Future GPU", 0x1234)), None);
    }

    #[test]
    fn user_beats_shipped_beats_nothing() {
        let me = fp("llvmpipe (LLVM 15.0.6, 256 bits)", 0x10005);
        let hash = table::shader_hash("gemm", &params(96));
        let (set, warnings) = tables_for(
            &me,
            Some(("user".into(), user_table(Some(me.clone()), &hash, 96))),
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        let (source, entry) = set.find("gemm", &[50, 60, 64], DType::F32).unwrap();
        assert_eq!((source, entry.params["BM"]), ("user", 96));
        // The user table has no f16 entry, the shipped llvmpipe table has f32 rows ops.
        let (source, _) = set.find("layer_norm", &[4096, 384], DType::F32).unwrap();
        assert_eq!(source, "shipped table llvmpipe");
    }

    #[test]
    fn corrupt_stale_and_foreign_tables_warn_and_fall_back() {
        let me = fp("llvmpipe (LLVM 15.0.6, 256 bits)", 0x10005);
        let (set, w) = tables_for(&me, Some(("user".into(), "{ not json".into())));
        assert!(matches!(w.as_slice(), [TableWarning::Corrupt { .. }]));
        assert_eq!(set.layers.len(), 1, "the shipped table still applies");

        let (set, w) = tables_for(
            &me,
            Some((
                "user".into(),
                user_table(Some(me.clone()), "0123456789abcdef", 96),
            )),
        );
        assert!(matches!(
            w.as_slice(),
            [TableWarning::Stale { count: 1, .. }]
        ));
        assert_ne!(
            set.find("gemm", &[64, 64, 64], DType::F32).unwrap().0,
            "user"
        );

        let other = fp("NVIDIA H200", 0x10de);
        let (set, w) = tables_for(
            &me,
            Some((
                "user".into(),
                user_table(Some(other), &table::shader_hash("gemm", &params(96)), 96),
            )),
        );
        assert!(matches!(w.as_slice(), [TableWarning::Foreign { .. }]));
        assert_eq!(set.layers.len(), 1);

        let (_, w) = tables_for(
            &me,
            Some((
                "user".into(),
                r#"{"version": 9, "family": "x", "entries": []}"#.into(),
            )),
        );
        assert!(matches!(w.as_slice(), [TableWarning::Corrupt { .. }]));
    }
}
