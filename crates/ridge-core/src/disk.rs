//! What Ridge keeps on disk between processes: the cache folder, and the driver's pipeline
//! cache (Vulkan's `VkPipelineCache` through wgpu's `PIPELINE_CACHE` feature), which lets a
//! second process skip the driver's compilation of every kernel it already built once.

use std::path::{Path, PathBuf};

/// Ridge's cache folder: `$RIDGE_CACHE_DIR`, else the OS cache directory + `ridge` (the
/// temporary directory where the OS has none). Models, tuning tables and pipeline caches
/// live in sub-folders.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("RIDGE_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    dirs::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("ridge")
}

/// The driver's pipeline cache of one device, loaded from and saved to one file per adapter
/// and driver (named by `wgpu::util::pipeline_cache_key`).
pub struct DriverCache {
    cache: wgpu::PipelineCache,
    path: PathBuf,
    loaded: bool,
}

impl DriverCache {
    /// The cache for `device` in `dir`, with the saved data when there is some. `None` where
    /// wgpu offers no pipeline cache (only Vulkan does; the feature must be enabled).
    pub fn open(device: &wgpu::Device, info: &wgpu::AdapterInfo, dir: &Path) -> Option<Self> {
        if !device.features().contains(wgpu::Features::PIPELINE_CACHE) {
            return None;
        }
        let path = dir.join(wgpu::util::pipeline_cache_key(info)?);
        let data = std::fs::read(&path).ok();
        // SAFETY: the file is written only by `save` below, from `get_data` of a cache with
        // the same key; wgpu checks the data's header (adapter, driver version) and, with
        // `fallback`, starts empty when it does not match.
        let cache = unsafe {
            device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                label: Some("ridge pipelines"),
                data: data.as_deref(),
                fallback: true,
            })
        };
        Some(Self {
            cache,
            path,
            loaded: data.is_some(),
        })
    }

    /// The wgpu cache to compile pipelines with.
    pub fn cache(&self) -> &wgpu::PipelineCache {
        &self.cache
    }

    /// The file the cache is loaded from and saved to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether saved data was found when the cache was opened.
    pub fn loaded(&self) -> bool {
        self.loaded
    }

    /// Writes the cache's data (through a temporary file and a rename, so a reader never
    /// sees half a file).
    ///
    /// Errors: the file system's.
    pub fn save(&self) -> std::io::Result<()> {
        let Some(data) = self.cache.get_data() else {
            return Ok(());
        };
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let temp = self.path.with_extension("partial");
        std::fs::write(&temp, &data)?;
        std::fs::rename(&temp, &self.path)
    }
}
