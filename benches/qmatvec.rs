//! The quantized matrix-vector product (decode's product, one row of x): GPU time from
//! timestamps (median of `--repeats`), GB/s on the packed weights (plus x and y), and the ratio
//! to this adapter's measured copy bandwidth — the roofline for a product that reads every
//! weight once — and to a copy of the same bytes timed the same way (one launch a timestamped
//! pass: the launch's fixed cost in both). Not a test.

mod common;

use ridge::core::{DType, Tensor};
use ridge::kernels::QMatmul;
use ridge::kernels::ceilings;
use ridge::kernels::qmatmul::MatvecShape;
use ridge::kernels::quant::{BLOCK, QuantFormat, QuantMatrix, quantize};

const HELP: &str = "cargo bench --bench qmatvec [-- OPTIONS]

Times y = x·Wᵀ for one row of x and a quantized W (Q8_0, Q4_0, Q4_1) of N rows and K columns.

  --sizes 4096,8192        square products N = K (default: 4096,8192, a 7–70 B model's width)
  --shapes 576x1536,...    N×K products instead (SmolLM2-135M: 576x576, 960x576, 3072x576,
                           576x1536, 49152x576)
  --launch 64/16/1,...     matrix-vector launch shapes to compare, each wg/tpr/rpt (invocations
                           a workgroup / sharing a row of W / rows of W an invocation), a
                           trailing w for lanes taking quant words instead of blocks
                           (256/64/4w), a trailing q for x rounded to 8 bits and integer
                           dot products (256/64/4q); default: the shape Ridge chooses
  --f16                    f16 activations (needs shader-f16)
  --hot                    one copy of each matrix, reread from the GPU's cache where it fits
                           (default: launches cycle through copies that together pass 128 MiB,
                           as a forward streams each layer's weights once)
  --repeats 20             timed launches per product and round (the median of the fastest
                           of three interleaved rounds is reported)";

/// The numbers of `s` split at `sep`, or exit 2 naming `what` (`--shapes`, NxK) on anything else.
fn parse_pair(s: &str, sep: char, what: &str, form: &str, parts: usize) -> Vec<usize> {
    let v: Option<Vec<usize>> = s.split(sep).map(|v| v.parse().ok()).collect();
    match v {
        Some(v) if v.len() == parts && v.iter().all(|&x| x > 0) => v,
        _ => {
            eprintln!("{what}: expected {form}, positive numbers");
            std::process::exit(2);
        }
    }
}

/// Bytes of weight copies a product's launches cycle through (without `--hot`): past the
/// H200's 50 MB L2 and any GPU's cache.
const COLD_BYTES: usize = 128 << 20;

fn main() {
    common::check_args(
        &["--f16", "--hot"],
        &["--sizes", "--shapes", "--launch", "--repeats"],
        HELP,
    );
    let shapes: Vec<(usize, usize)> = match common::value("--shapes") {
        Some(s) => s
            .split(',')
            .map(|p| {
                let [n, k] = parse_pair(p, 'x', &format!("--shapes {p:?}"), "NxK", 2)[..] else {
                    unreachable!("two parts")
                };
                (n, k)
            })
            .collect(),
        None => common::list("--sizes", &[4096, 8192])
            .into_iter()
            .map(|n| (n, n))
            .collect(),
    };
    let launches: Vec<Option<MatvecShape>> = match common::value("--launch") {
        Some(s) => s
            .split(',')
            .map(|given| {
                let (l, int8_x) = given
                    .strip_suffix('q')
                    .map_or((given, false), |l| (l, true));
                let (l, words) = l.strip_suffix('w').map_or((l, false), |l| (l, true));
                let form = "wg/tpr/rpt with an optional w or q";
                let [wg, tpr, rpt] =
                    parse_pair(l, '/', &format!("--launch {given:?}"), form, 3)[..]
                else {
                    unreachable!("three parts")
                };
                let shape = MatvecShape {
                    wg: wg as u32,
                    tpr: tpr as u32,
                    rpt: rpt as u32,
                    words,
                    int8_x,
                };
                if words && int8_x {
                    eprintln!(
                        "--launch {given:?}: lanes on quant words (w) cannot take x rounded to \
                         8 bits (q); take one"
                    );
                    std::process::exit(2);
                }
                if !shape.runs(false) {
                    eprintln!("--launch {given:?}: {}", MatvecShape::RULE);
                    std::process::exit(2);
                }
                Some(shape)
            })
            .collect(),
        None => vec![None],
    };
    let dtype = if common::flag("--f16") {
        DType::F16
    } else {
        DType::F32
    };
    let repeats = common::list("--repeats", &[20])[0];
    let hot = common::flag("--hot");
    let ctx = common::context();
    let m = pollster::block_on(ceilings::measure(&ctx, 1 << 30, 5)).expect("ceilings");
    println!(
        "quantized matrix-vector products on {}, {dtype} activations (copy bandwidth measured \
         here: {:.0} GB/s)",
        ctx.describe(),
        m.bandwidth_gbps
    );
    // Every matrix uploaded first, then every case timed in `ROUNDS` interleaved rounds (the
    // fastest round kept), each after a few milliseconds of its own launches: an H200 left
    // idle by host work (quantizing a 8192² matrix) drops its clocks up to 4× (NOTES.md).
    let mut cases = Vec::new();
    for &(n, k) in &shapes {
        let x: Vec<f32> = (0..k)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 500.0)
            .collect();
        let xt = std::rc::Rc::new(Tensor::from_f32(&ctx, &x, &[1, k], dtype).expect("x"));
        let y = std::rc::Rc::new(Tensor::empty(&ctx, &[1, n], dtype).expect("y"));
        let values: Vec<f32> = (0..n * k)
            .map(|i| ((i * 2654435761usize) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        for format in QuantFormat::ALL {
            let bytes = quantize(format, &values).expect("q");
            let copies = if hot {
                1
            } else {
                (COLD_BYTES.div_ceil(bytes.len())).max(1)
            };
            let w: std::rc::Rc<Vec<QuantMatrix>> = std::rc::Rc::new(
                (0..copies)
                    .map(|_| QuantMatrix::upload(&ctx, format, n, k, &bytes).expect("w"))
                    .collect(),
            );
            for &launch in &launches {
                cases.push((n, k, format, launch, xt.clone(), w.clone(), y.clone()));
            }
        }
    }
    // The same bytes copied, timed alike (one launch a timestamped pass, cycling copies when
    // cold): a launch's fixed cost (the pass, its barriers; ~4 µs on an H200, NOTES.md run
    // 109) is in both times, so their ratio is the kernel's own efficiency, where the ratio
    // to the copy bandwidth (measured on 1 GiB) also charges it that fixed cost.
    let mut copies: Vec<(usize, Vec<(Tensor, Tensor)>)> = Vec::new();
    for &(n, k, format, ..) in &cases {
        let bytes = QMatmul::new(1).cost(format, n, k, dtype).bytes as usize;
        if copies.iter().any(|(b, _)| *b == bytes) {
            continue;
        }
        // Each half of the bytes read once and written once: src and dst of bytes/2.
        let floats = (bytes / 8).div_ceil(4) * 4;
        let pairs = if hot {
            1
        } else {
            COLD_BYTES.div_ceil(bytes).max(1)
        };
        let data: Vec<f32> = (0..floats)
            .map(|i| ((i * 2654435761usize) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let pairs = (0..pairs)
            .map(|_| {
                let src = Tensor::from_f32(&ctx, &data, &[floats], DType::F32).expect("src");
                let dst = Tensor::from_f32(&ctx, &data, &[floats], DType::F32).expect("dst");
                (src, dst)
            })
            .collect();
        copies.push((bytes, pairs));
    }
    let mut copy_best = vec![f64::INFINITY; copies.len()];
    const ROUNDS: usize = 3;
    println!(
        "{}",
        if hot {
            "one copy of each matrix (reread from cache where it fits)"
        } else {
            "launches cycle through copies of each matrix (together past 128 MiB: cold weights)"
        }
    );
    let mut best = vec![f64::INFINITY; cases.len()];
    for _ in 0..ROUNDS {
        for (i, (_, _, _, launch, x, w, y)) in cases.iter().enumerate() {
            let next = std::cell::Cell::new(0);
            let run = |ctx: &ridge::core::Context| {
                let copy = &w[next.get() % w.len()];
                next.set(next.get() + 1);
                MatvecShape::forced(*launch, || QMatmul::new(1).run(ctx, x, copy, y))
            };
            let start = std::time::Instant::now();
            while start.elapsed().as_secs_f64() < 0.005 {
                run(&ctx).expect("warm");
            }
            if let Ok(ms) = pollster::block_on(ceilings::median_ms(&ctx, repeats, &run)) {
                best[i] = best[i].min(ms);
            }
        }
        for (i, (_, pairs)) in copies.iter().enumerate() {
            let next = std::cell::Cell::new(0);
            let run = |ctx: &ridge::core::Context| {
                let (src, dst) = &pairs[next.get() % pairs.len()];
                next.set(next.get() + 1);
                ceilings::stream_copy(ctx, src, dst)
            };
            let start = std::time::Instant::now();
            while start.elapsed().as_secs_f64() < 0.005 {
                run(&ctx).expect("warm");
            }
            if let Ok(ms) = pollster::block_on(ceilings::median_ms(&ctx, repeats, &run)) {
                copy_best[i] = copy_best[i].min(ms);
            }
        }
    }
    for ((n, k, format, launch, _, w, _), ms) in cases.iter().zip(best) {
        let shape = launch.unwrap_or_else(|| {
            MatvecShape::for_product(&ctx, *n, k / BLOCK, *format, dtype, false)
        });
        let words = match (shape.words, shape.int8_x) {
            (true, _) => "w",
            (false, true) => "q",
            (false, false) => "",
        };
        let label = format!(
            "{n}×{k} {format} {}/{}/{}{words}",
            shape.wg, shape.tpr, shape.rpt
        );
        if !ms.is_finite() {
            println!("  {label}: no timestamps on this adapter");
            continue;
        }
        let bytes = QMatmul::new(1).cost(*format, *n, *k, dtype).bytes;
        let gbps = bytes / (ms * 1e-3) / 1e9;
        let alike = copies
            .iter()
            .position(|(b, _)| *b == bytes as usize)
            .map_or(f64::NAN, |i| copy_best[i]);
        println!(
            "  {label:<28} {ms:.4} ms, {:>6.2} MB packed, {gbps:>5.0} GB/s = {:.2}× copy; \
             {:.2}× a copy of its bytes timed alike ({alike:.4} ms)",
            w[0].bytes() as f64 / 1e6,
            gbps / m.bandwidth_gbps,
            alike / ms
        );
    }
}
