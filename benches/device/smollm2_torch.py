"""PyTorch references for SmolLM2-135M on the GPU machine, in the same call as Ridge's
generation bench: transformers' LlamaForCausalLM with SmolLM2-135M's configuration and random
weights (the GGUF cannot travel; timing does not depend on the values), batch 1, greedy.

- prefill: one forward of P tokens (CUDA events, median of 10), f16 and f32;
- decode (issue 25 asks PyTorch as fast as a competent user makes it): transformers'
  StaticCache, the next token picked on the GPU (argmax) and fed back without a host round
  trip, after a prompt of P tokens, wall clock with one synchronisation at the end:
  `eager` (one Python forward a token), `graph` (the step captured once as a CUDA graph and
  replayed: no launch overhead), and in f16 `compiled_graph` (the forward through
  torch.compile, fused kernels, captured the same way). An error line where one fails.
One JSON line per measurement. TF32 off.
"""
import json, time, torch
from transformers import LlamaConfig, LlamaForCausalLM, StaticCache

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

def decode(model, name, p, g, compiled=False):
    """Greedy decode after a p-token prompt with transformers' StaticCache, the next token
    picked on the GPU, wall clock with one synchronisation at the end (g/2 tokens each):
    eagerly (one Python call a token), then as one CUDA graph of the step replayed; compiled:
    the forward through torch.compile(mode="max-autotune-no-cudagraphs"), captured the same
    way. Prints one line per rate, or the error that stopped it."""
    label = "compiled_" if compiled else ""
    try:
        cache = StaticCache(config=model.config, max_cache_len=p + 2 * g + 16)
        ids = torch.randint(0, cfg.vocab_size, (1, p), device="cuda")
        forward = model.forward
        if compiled:
            forward = torch.compile(model.forward, mode="max-autotune-no-cudagraphs", fullgraph=True)
        with torch.inference_mode():
            logits = model(ids, past_key_values=cache, use_cache=True,
                           position_ids=torch.arange(p, device="cuda")[None]).logits
            tok = logits[:, -1:].argmax(-1)
            pos = torch.full((1, 1), p, device="cuda", dtype=torch.long)

            def step():
                o = forward(input_ids=tok, past_key_values=cache, use_cache=True, position_ids=pos)
                tok.copy_(o.logits[:, -1:].argmax(-1))
                pos.add_(1)

            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            n = g // 2
            if not compiled:
                r = n / wall_s(lambda: [step() for _ in range(n)])
                out(op=f"torch_decode_eager_{name}", depth=p, tokens_per_s=round(r, 1))
            label += "graph"
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step()
            graph.replay()
            r = n / wall_s(lambda: [graph.replay() for _ in range(n)])
            out(op=f"torch_decode_{label}_{name}", depth=p, tokens_per_s=round(r, 1))
    except Exception as e:  # noqa: BLE001 - the failure is the measurement
        out(op=f"torch_decode_{label or 'eager'}_{name}", depth=p,
            error=f"{type(e).__name__}: {str(e)[:300]}")


models = {}
for dtype in (torch.float16, torch.float32):
    name = str(dtype)[6:]
    model = LlamaForCausalLM(cfg).to("cuda", dtype).eval()
    for p in (128, 1024):
        ids = torch.randint(0, 49152, (1, p), device="cuda")
        with torch.inference_mode():
            ms = cuda_ms(lambda: model(ids, use_cache=False).logits[:, -1].argmax(-1))
        out(op=f"torch_prefill_{name}", tokens=p, ms=round(ms, 3), tokens_per_s=round(p / ms * 1e3, 1))
    for p in (128, 4096):
        decode(model, name, p, 128)
    models[name] = model
# Compiling takes minutes: last, so that a time limit cuts only it.
for p in (128, 4096):
    decode(models["float16"], "float16", p, 128, compiled=True)
