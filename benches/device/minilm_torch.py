"""PyTorch eager f32 reference for MiniLM throughput on the GPU machine: a transformers
BertModel with all-MiniLM-L6-v2's configuration and random weights (the real 90 MB weights
cannot travel; timing does not depend on their values), mean pooling and L2 normalisation as
sentence-transformers does, batch 1 and 32 of 128 tokens. TF32 off. One JSON line per batch.
Then its projections alone (`F.linear`, weight N x K, bias) at both batches: cuBLAS at the
shapes Ridge's GEMM bench times.
"""
import json, torch
from transformers import BertConfig, BertModel

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
for impl in ("eager", "sdpa"):
    cfg = BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
                     max_position_embeddings=512, layer_norm_eps=1e-12, hidden_act="gelu", vocab_size=30522)
    cfg._attn_implementation = impl
    model = BertModel(cfg, add_pooling_layer=False).cuda().eval()
    for batch in (1, 32):
        ids = torch.randint(1000, 30000, (batch, 128), device="cuda")
        mask = torch.ones_like(ids)
        def run():
            with torch.inference_mode():
                h = model(input_ids=ids, attention_mask=mask).last_hidden_state
                m = mask.unsqueeze(-1).float()
                e = (h * m).sum(1) / m.sum(1)
                return torch.nn.functional.normalize(e, p=2, dim=1)
        for _ in range(5): run()
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); run(); e.record(); torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        times.sort()
        ms = times[len(times) // 2]
        print(json.dumps({"op": f"minilm_{impl}_f32", "shape": [batch, 128], "ms": round(ms, 4),
                          "sentences_per_s": round(batch / ms * 1e3, 1)}), flush=True)

for m in (4096, 128):
    for n, k in ((1152, 384), (384, 384), (1536, 384), (384, 1536)):
        x = torch.randn(m, k, device="cuda")
        w, b = torch.randn(n, k, device="cuda"), torch.randn(n, device="cuda")
        for _ in range(5): torch.nn.functional.linear(x, w, b)
        torch.cuda.synchronize()
        times = []
        for _ in range(50):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); torch.nn.functional.linear(x, w, b); e.record(); torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        times.sort()
        ms = times[len(times) // 2]
        print(json.dumps({"op": "linear_f32", "shape": [m, n, k], "ms": round(ms, 5),
                          "tflops": round(2 * m * n * k / ms / 1e9, 2)}), flush=True)
