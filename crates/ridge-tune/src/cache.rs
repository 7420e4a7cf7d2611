//! The user's tuning tables in the OS cache folder (`$RIDGE_CACHE_DIR` or the OS cache
//! directory + `ridge/tuning/`), one file per adapter fingerprint.

use std::path::PathBuf;

use ridge_core::Fingerprint;

use crate::table::Table;

/// The cache folder for tuning tables.
pub fn dir() -> PathBuf {
    ridge_core::cache_dir().join("tuning")
}

/// The user table's file for an adapter (see [`crate::key::user_table_name`]).
pub fn path(fp: &Fingerprint) -> PathBuf {
    dir().join(crate::key::user_table_name(fp))
}

/// The user's table for `fp` as (file name, JSON), if present and readable.
pub fn read(fp: &Fingerprint) -> Option<(String, String)> {
    let p = path(fp);
    std::fs::read_to_string(&p)
        .ok()
        .map(|json| (p.display().to_string(), json))
}

/// Checks, before any tuning, that the user's table for `fp` can be written: its folder
/// exists or is created, and the path is not a folder. Returns the path.
pub fn writable(fp: &Fingerprint) -> std::io::Result<PathBuf> {
    let p = path(fp);
    std::fs::create_dir_all(dir())?;
    if p.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            "is a folder, not a file",
        ));
    }
    Ok(p)
}

/// Writes the user's table for `fp`; returns the path.
pub fn write(fp: &Fingerprint, table: &Table) -> std::io::Result<PathBuf> {
    let p = writable(fp)?;
    std::fs::write(&p, table.to_json())?;
    Ok(p)
}
