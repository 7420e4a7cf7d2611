"""PyTorch references for SmolLM2-135M on the GPU machine, in the same call as Ridge's
generation bench: transformers' LlamaForCausalLM with SmolLM2-135M's configuration and random
weights (the GGUF cannot travel; timing does not depend on the values), batch 1, greedy.

- prefill: one forward of P tokens (CUDA events, median of 10), f16 and f32;
- decode: `generate` with the static cache (the competent user's setting; the dynamic cache is
  slower) from a prompt of P tokens, G new tokens; decode tokens/s = (G - 1) / (time of G
  tokens - time of 1), wall clock with synchronisation, f16 and f32;
- compiled: the decode with `torch.compile(mode="reduce-overhead")` on the forward (CUDA
  graphs), reported as an error line where it fails.
One JSON line per measurement. TF32 off.
"""
import json, time, torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)

cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                  num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                  rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True)

def out(**kw):
    print(json.dumps(kw), flush=True)

def cuda_ms(fn, reps=10, warm=3):
    for _ in range(warm): fn()
    torch.cuda.synchronize()
    t = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        t.append(s.elapsed_time(e))
    t.sort()
    return t[len(t) // 2]

def wall_s(fn):
    torch.cuda.synchronize(); t = time.perf_counter(); fn(); torch.cuda.synchronize()
    return time.perf_counter() - t

for dtype in (torch.float16, torch.float32):
    name = str(dtype)[6:]
    model = LlamaForCausalLM(cfg).to("cuda", dtype).eval()
    for p in (128, 1024):
        ids = torch.randint(0, 49152, (1, p), device="cuda")
        with torch.inference_mode():
            ms = cuda_ms(lambda: model(ids, use_cache=False).logits[:, -1].argmax(-1))
        out(op=f"torch_prefill_{name}", tokens=p, ms=round(ms, 3), tokens_per_s=round(p / ms * 1e3, 1))
    for p, g in ((128, 128), (4096, 128)):
        ids = torch.randint(0, 49152, (1, p), device="cuda")
        gen = lambda n: model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                       cache_implementation="static", pad_token_id=0)
        with torch.inference_mode():
            gen(2); gen(2)
            t1 = min(wall_s(lambda: gen(1)) for _ in range(3))
            tg = min(wall_s(lambda: gen(g)) for _ in range(2))
        out(op=f"torch_decode_static_{name}", depth=p, tokens=g,
            tokens_per_s=round((g - 1) / (tg - t1), 1), first_token_ms=round(t1 * 1e3, 2))
    if dtype == torch.float16:
        try:
            model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
            ids = torch.randint(0, 49152, (1, 128), device="cuda")
            gen = lambda n: model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                           cache_implementation="static", pad_token_id=0)
            with torch.inference_mode():
                for _ in range(3): gen(8)
                t1 = min(wall_s(lambda: gen(1)) for _ in range(3))
                tg = min(wall_s(lambda: gen(128)) for _ in range(2))
            out(op="torch_decode_compiled_f16", depth=128, tokens=128, tokens_per_s=round(127 / (tg - t1), 1))
        except Exception as e:  # noqa: BLE001 - the failure is the measurement
            out(op="torch_decode_compiled_f16", error=f"{type(e).__name__}: {str(e)[:300]}")
    del model
    torch.cuda.empty_cache()
