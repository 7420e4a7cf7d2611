//! What the Vulkan driver made of each GEMM candidate: registers, spills and whatever else
//! its compiler reports (`VK_KHR_pipeline_executable_properties`, Vulkan 1.3 spec
//! §"Pipeline Executable Properties"). Occupancy and spills are the suspects a timing alone
//! cannot name (benches/NOTES.md); this asks the compiler itself.
//!
//! Each candidate (`-- --coop` or `-- --tiled` for one kernel) runs once on a 512³ product
//! of whole tiles, NN and NT, through Ridge as usual (`-- --decoder`: instead, every kernel a
//! SmolLM2-135M-shaped decoder with random weights compiles for a 200-token prompt and
//! decode steps at 201 and 601 keys, f32 and f16, `--ir DIR` writing each one's WGSL there);
//! the WGSL of the pipelines that compiled
//! ([`ridge::core::PipelineCache::sources`]) is translated to SPIR-V by naga as wgpu does,
//! without run-time checks, and compiled again on a second Vulkan device created here with
//! the statistics asked for. `-- --ir DIR` also writes each executable's internal
//! representations (where the driver gives any; NVIDIA's gives none) to DIR. Vulkan only.
//! Runs 73–74 on the H200 (benches/NOTES.md): register counts, local memory (spills) and shared
//! memory per candidate. Not a test:
//! `cargo bench --bench registers`.

mod common;

use std::ffi::CStr;

use ash::vk;
use ridge::core::{CompiledSource, DType, Tensor};
use ridge::kernels::gemm::{Gemm, GemmKernel};

/// The error of the Vulkan call `what`, as one line.
fn vk_error(what: &'static str) -> impl Fn(vk::Result) -> String {
    move |e| format!("{what}: {e}")
}

/// A fixed-size C string of a Vulkan structure as text (empty where it has no terminator).
fn text<E>(s: Result<&CStr, E>) -> String {
    s.map_or(String::new(), |s| s.to_string_lossy().into())
}

/// A Vulkan device with pipeline statistics enabled, on the GPU whose vendor and device IDs
/// match Ridge's adapter.
struct Inspector {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    executables: ash::khr::pipeline_executable_properties::Device,
}

impl Inspector {
    fn new(vendor: u32, device_id: u32) -> Result<Self, String> {
        // SAFETY: loads the system's Vulkan loader, as wgpu does.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| e.to_string())?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
        // SAFETY: valid create infos; every handle below is destroyed in Drop.
        unsafe {
            let instance = entry
                .create_instance(
                    &vk::InstanceCreateInfo::default().application_info(&app),
                    None,
                )
                .map_err(vk_error("vkCreateInstance"))?;
            let physical = instance
                .enumerate_physical_devices()
                .map_err(vk_error("vkEnumeratePhysicalDevices"))?
                .into_iter()
                .find(|&p| {
                    let props = instance.get_physical_device_properties(p);
                    props.vendor_id == vendor && props.device_id == device_id
                })
                .ok_or("no Vulkan device matches Ridge's adapter")?;
            let extensions = instance
                .enumerate_device_extension_properties(physical)
                .map_err(vk_error("vkEnumerateDeviceExtensionProperties"))?;
            let has = |name: &CStr| {
                extensions
                    .iter()
                    .any(|e| e.extension_name_as_c_str() == Ok(name))
            };
            if !has(ash::khr::pipeline_executable_properties::NAME) {
                return Err("the driver has no VK_KHR_pipeline_executable_properties".into());
            }
            let coop = has(ash::khr::cooperative_matrix::NAME);
            // Every feature the device has, enabled (the shaders need 16-bit storage, f16,
            // the Vulkan memory model and, for the tensor-core kernel, cooperative matrices).
            let mut v11 = vk::PhysicalDeviceVulkan11Features::default();
            let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
            let mut v13 = vk::PhysicalDeviceVulkan13Features::default();
            let mut stats = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default();
            let mut matrices = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
            let mut features = vk::PhysicalDeviceFeatures2::default()
                .push_next(&mut v11)
                .push_next(&mut v12)
                .push_next(&mut v13)
                .push_next(&mut stats);
            if coop {
                features = features.push_next(&mut matrices);
            }
            instance.get_physical_device_features2(physical, &mut features);
            let mut names = vec![ash::khr::pipeline_executable_properties::NAME.as_ptr()];
            if coop {
                names.push(ash::khr::cooperative_matrix::NAME.as_ptr());
            }
            let family = instance
                .get_physical_device_queue_family_properties(physical)
                .iter()
                .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
                .ok_or("no compute queue")? as u32;
            let queues = [vk::DeviceQueueCreateInfo::default()
                .queue_family_index(family)
                .queue_priorities(&[1.0])];
            let info = vk::DeviceCreateInfo::default()
                .queue_create_infos(&queues)
                .enabled_extension_names(&names)
                .push_next(&mut features);
            let device = instance
                .create_device(physical, &info, None)
                .map_err(vk_error("vkCreateDevice"))?;
            let executables =
                ash::khr::pipeline_executable_properties::Device::new(&instance, &device);
            Ok(Self {
                _entry: entry,
                instance,
                device,
                executables,
            })
        }
    }

    /// Compiles `source` as wgpu would (naga, SPIR-V 1.6, no run-time checks: the options
    /// `ShaderRuntimeChecks::unchecked` gives) and returns
    /// each executable's statistics as (name, value) and its internal representations as
    /// (name, text).
    #[allow(clippy::type_complexity)]
    fn inspect(
        &self,
        source: &CompiledSource,
    ) -> Result<(Vec<(String, String)>, Vec<(String, String)>), String> {
        use naga::back::spv;
        let module = naga::front::wgsl::parse_str(&source.wgsl).map_err(|e| e.to_string())?;
        let info = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&module)
        .map_err(|e| format!("{e:?}"))?;
        let options = spv::Options {
            lang_version: (1, 6),
            flags: spv::WriterFlags::empty(),
            capabilities: None,
            bounds_check_policies: naga::proc::BoundsCheckPolicies::default(),
            zero_initialize_workgroup_memory: spv::ZeroInitializeWorkgroupMemoryMode::None,
            // As wgpu compiles Ridge's shaders on Vulkan (`ShaderRuntimeChecks::unchecked`,
            // ridge_core::RuntimeChecks::Driver): no loop bounded by a counter of naga's (with
            // one, no loop has a trip count the driver can unroll, and its arrays stay in
            // local memory), no guard on integer division.
            force_loop_bounding: false,
            emit_int_div_checks: false,
            ..Default::default()
        };
        let pipeline = spv::PipelineOptions {
            shader_stage: naga::ShaderStage::Compute,
            entry_point: source.entry.to_string(),
        };
        let words =
            spv::write_vec(&module, &info, &options, Some(&pipeline)).map_err(|e| e.to_string())?;
        // Group 0's bindings, as the auto layout wgpu derives.
        let bindings: Vec<_> = module
            .global_variables
            .iter()
            .filter_map(|(_, g)| {
                let b = g.binding.as_ref()?;
                let ty = match g.space {
                    naga::AddressSpace::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
                    naga::AddressSpace::Storage { .. } => vk::DescriptorType::STORAGE_BUFFER,
                    _ => return None,
                };
                Some(
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(b.binding)
                        .descriptor_type(ty)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE),
                )
            })
            .collect();
        let entry = std::ffi::CString::new(source.entry).expect("no NUL in an entry name");
        // SAFETY: valid create infos; every object is destroyed before returning.
        unsafe {
            let d = &self.device;
            let shader = d
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
                .map_err(vk_error("vkCreateShaderModule"))?;
            let set = d
                .create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                    None,
                )
                .map_err(vk_error("vkCreateDescriptorSetLayout"))?;
            let sets = [set];
            let layout = d
                .create_pipeline_layout(
                    &vk::PipelineLayoutCreateInfo::default().set_layouts(&sets),
                    None,
                )
                .map_err(vk_error("vkCreatePipelineLayout"))?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(shader)
                .name(&entry);
            let create = vk::ComputePipelineCreateInfo::default()
                .flags(
                    vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR
                        | vk::PipelineCreateFlags::CAPTURE_INTERNAL_REPRESENTATIONS_KHR,
                )
                .stage(stage)
                .layout(layout);
            let result = d
                .create_compute_pipelines(vk::PipelineCache::null(), &[create], None)
                .map_err(|(_, e)| format!("vkCreateComputePipelines: {e}"))
                .and_then(|p| self.read(p[0]));
            d.destroy_pipeline_layout(layout, None);
            d.destroy_descriptor_set_layout(set, None);
            d.destroy_shader_module(shader, None);
            result
        }
    }

    /// The statistics and internal representations of `pipeline`'s executables; destroys it.
    ///
    /// # Safety
    /// `pipeline` was created on this device with both capture flags.
    #[allow(clippy::type_complexity)]
    unsafe fn read(
        &self,
        pipeline: vk::Pipeline,
    ) -> Result<(Vec<(String, String)>, Vec<(String, String)>), String> {
        let mut stats = Vec::new();
        let mut irs = Vec::new();
        // SAFETY: as the caller promises; buffers are sized from the driver's first answer.
        let result = unsafe {
            self.executables
                .get_pipeline_executable_properties(
                    &vk::PipelineInfoKHR::default().pipeline(pipeline),
                )
                .map_err(|e| format!("vkGetPipelineExecutablePropertiesKHR: {e}"))
                .map(|executables| {
                    for index in 0..executables.len() as u32 {
                        let info = vk::PipelineExecutableInfoKHR::default()
                            .pipeline(pipeline)
                            .executable_index(index);
                        for s in self
                            .executables
                            .get_pipeline_executable_statistics(&info)
                            .unwrap_or_default()
                        {
                            let v = match s.format {
                                vk::PipelineExecutableStatisticFormatKHR::BOOL32 => {
                                    (s.value.b32 != 0).to_string()
                                }
                                vk::PipelineExecutableStatisticFormatKHR::INT64 => {
                                    s.value.i64.to_string()
                                }
                                // NVIDIA's driver (580) sets bit 36 of "Local Memory
                                // Size"; the bytes of local memory (spills) are the rest.
                                vk::PipelineExecutableStatisticFormatKHR::UINT64 => {
                                    let v = s.value.u64;
                                    match text(s.name_as_c_str()).as_str() {
                                        "Local Memory Size" if v >= 1 << 36 => {
                                            (v - (1 << 36)).to_string()
                                        }
                                        _ => v.to_string(),
                                    }
                                }
                                _ => format!("{:.3}", s.value.f64),
                            };
                            stats.push((text(s.name_as_c_str()), v));
                        }
                        irs.extend(self.representations(&info));
                    }
                })
        };
        // SAFETY: the pipeline is no longer used.
        unsafe { self.device.destroy_pipeline(pipeline, None) };
        result.map(|()| (stats, irs))
    }

    /// Each internal representation of one executable as (name, text); none where the driver
    /// gives none.
    ///
    /// # Safety
    /// `info` names an executable of a pipeline created with the capture flag.
    unsafe fn representations(
        &self,
        info: &vk::PipelineExecutableInfoKHR,
    ) -> Vec<(String, String)> {
        let f = self
            .executables
            .fp()
            .get_pipeline_executable_internal_representations_khr;
        let handle = self.executables.device();
        let mut count = 0u32;
        // SAFETY: the two-call idiom of the spec: count, then sizes, then the data.
        unsafe {
            if f(handle, info, &mut count, std::ptr::null_mut()) != vk::Result::SUCCESS {
                return Vec::new();
            }
            let mut reps =
                vec![vk::PipelineExecutableInternalRepresentationKHR::default(); count as usize];
            if f(handle, info, &mut count, reps.as_mut_ptr()) != vk::Result::SUCCESS {
                return Vec::new();
            }
            let mut data: Vec<Vec<u8>> = reps.iter().map(|r| vec![0u8; r.data_size]).collect();
            for (r, d) in reps.iter_mut().zip(&mut data) {
                r.p_data = d.as_mut_ptr().cast();
            }
            if f(handle, info, &mut count, reps.as_mut_ptr()) != vk::Result::SUCCESS {
                return Vec::new();
            }
            reps.iter()
                .zip(data)
                .map(|(r, d)| {
                    let name = text(r.name_as_c_str());
                    let body = if r.is_text != 0 {
                        String::from_utf8_lossy(d.split(|&b| b == 0).next().unwrap_or(&[])).into()
                    } else {
                        format!("({} bytes of binary)", d.len())
                    };
                    (name, body)
                })
                .collect()
        }
    }
}

impl Drop for Inspector {
    fn drop(&mut self) {
        // SAFETY: nothing created on them is alive any more.
        unsafe {
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

/// A pipeline's statistics as one line, "name value, …".
fn stats_line(stats: &[(String, String)]) -> String {
    let stats: Vec<String> = stats.iter().map(|(n, v)| format!("{n} {v}")).collect();
    stats.join(", ")
}

/// The defines prepended to a compiled shader (its `const` lines before the body), as one
/// short line: which variant of the kernel it is.
fn defines(source: &CompiledSource) -> String {
    source
        .wgsl
        .lines()
        .skip_while(|l| l.starts_with("//") || l.starts_with("enable "))
        .take_while(|l| l.starts_with("const ") || l.starts_with("alias "))
        .filter_map(|l| {
            let (name, value) = l
                .strip_prefix("const ")?
                .trim_end_matches(';')
                .split_once(" = ")?;
            Some(format!(
                "{}={}",
                name.split(':').next()?,
                value.trim_end_matches('u')
            ))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `--decoder`: every pipeline a SmolLM2-shaped decoder compiles (a prompt, then decode steps
/// in one pass and split in spans), f32 and f16, with its activations' type.
fn decoder_sources(ctx: &ridge::core::Context) -> Vec<(DType, CompiledSource)> {
    use ridge::nn::Llama;
    use ridge::nn::file::FileBytes;
    use ridge::nn::gguf::Gguf;
    use ridge::nn::llama::random::{prompt_ids, smollm2_like};
    use ridge::nn::llama::timeline::greedy_step;
    let file = FileBytes::from_bytes(std::path::Path::new("random"), smollm2_like(7));
    let g = Gguf::parse(file).expect("the random GGUF");
    let mut dtypes = vec![DType::F32];
    if ctx.has_f16() {
        dtypes.push(DType::F16);
    }
    let mut sources = Vec::new();
    for dtype in dtypes {
        let first = ctx.pipelines().compiled();
        let model = Llama::load(ctx, &g, dtype).expect("the model");
        let mut cache = model.cache(ctx, 640).expect("the cache");
        for prompt in [200, 600] {
            cache.clear();
            let id = pollster::block_on(greedy_step(
                ctx,
                &model,
                &mut cache,
                &prompt_ids(prompt, 49_152),
            ))
            .expect("a prompt");
            pollster::block_on(greedy_step(ctx, &model, &mut cache, &[id])).expect("a decode step");
        }
        let compiled = ctx.pipelines().sources(first);
        println!("{dtype}: {} pipelines", compiled.len());
        sources.extend(compiled.into_iter().map(|s| (dtype, s)));
    }
    sources
}

fn main() {
    common::check_args(
        &["--coop", "--tiled", "--decoder"],
        &["--ir"],
        "cargo bench --bench registers [-- --coop | --tiled | --decoder] [--ir DIR]\n\nWhat the Vulkan driver made of each GEMM candidate (--decoder: of each kernel a SmolLM2-shaped decoder compiles): registers, spills and its compiler's other statistics (VK_KHR_pipeline_executable_properties); --ir DIR writes its intermediate representations there (with --decoder: each shader's WGSL, defines applied).",
    );
    let ctx = common::context();
    println!("Compiled pipelines on {}", ctx.describe());
    let ir_dir = std::env::args()
        .skip_while(|a| a != "--ir")
        .nth(1)
        .map(std::path::PathBuf::from);
    let decoder = common::flag("--decoder").then(|| decoder_sources(&ctx));
    if let (Some(sources), Some(dir)) = (&decoder, &ir_dir) {
        for (i, (dtype, source)) in sources.iter().enumerate() {
            let file = dir.join(format!(
                "{i:03}-{dtype}-{}.{}.wgsl",
                source.shader, source.entry
            ));
            std::fs::write(&file, &source.wgsl).expect("--ir: writable");
        }
    }
    if ctx.info().backend != ridge::core::wgpu::Backend::Vulkan {
        println!("not Vulkan: nothing to ask");
        return;
    }
    let inspector = match Inspector::new(ctx.info().vendor, ctx.info().device) {
        Ok(i) => i,
        Err(e) => {
            println!("{e}");
            return;
        }
    };
    if let Some(sources) = decoder {
        for (i, (dtype, source)) in sources.into_iter().enumerate() {
            let name = format!(
                "{i:03} {dtype} {}::{} [{}]",
                source.shader,
                source.entry,
                defines(&source)
            );
            match inspector.inspect(&source) {
                Ok((stats, _)) => {
                    println!("{name}: {}", stats_line(&stats));
                }
                Err(e) => println!("{name}: {e}"),
            }
        }
        return;
    }
    let (coop_only, tiled_only) = (common::flag("--coop"), common::flag("--tiled"));
    let mut dtypes = vec![DType::F32];
    if ctx.has_f16() {
        dtypes.push(DType::F16);
    }
    let mut written = 0;
    for dtype in dtypes {
        for kernel in GemmKernel::candidates(&ctx, dtype) {
            let coop = matches!(kernel, GemmKernel::Coop(_));
            let split = matches!(kernel, GemmKernel::Tiled(c) if c.splits > 1);
            if split || (coop_only && !coop) || (tiled_only && coop) {
                continue;
            }
            for trans_b in [false, true] {
                let g = Gemm {
                    trans_b,
                    ..Gemm::new(512, 512, 512)
                };
                let first = ctx.pipelines().compiled();
                let tensor = |dims: &[usize]| Tensor::empty(&ctx, dims, dtype).expect("tensor");
                let (a, b, c) = (
                    tensor(&g.a_dims()),
                    tensor(&g.b_dims()),
                    tensor(&[512, 512]),
                );
                if let Err(e) = g.run_with(&ctx, kernel, &a, &b, None, &c) {
                    println!("{dtype} {kernel:?}: {e}");
                    continue;
                }
                for source in ctx.pipelines().sources(first) {
                    let layout = if trans_b { "NT" } else { "NN" };
                    match inspector.inspect(&source) {
                        Ok((stats, irs)) => {
                            println!("{dtype} {layout} {kernel:?}: {}", stats_line(&stats));
                            if let Some(dir) = &ir_dir {
                                for (name, body) in irs {
                                    written += 1;
                                    let file =
                                        dir.join(format!("{written:03}-{dtype}-{layout}.txt"));
                                    let head = format!("{kernel:?} {layout}: {name}\n");
                                    std::fs::write(&file, head + &body).expect("--ir: writable");
                                }
                            }
                        }
                        Err(e) => println!("{dtype} {layout} {kernel:?}: {e}"),
                    }
                }
            }
        }
    }
}
