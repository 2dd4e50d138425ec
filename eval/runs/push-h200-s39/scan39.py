"""Where the suite's cumsum candidate (fused_scan) differs from torch.cumsum on the GPU."""
import importlib.util, tempfile, torch
from kskill.agents.recipes.builder import build_candidate
src = open("eval/problems/21_cumsum.py").read()
cand = build_candidate(src, ["fused_scan"], {})
f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False); f.write(cand.source); f.close()
spec = importlib.util.spec_from_file_location("c", f.name); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
print(cand.params)
for shape in [(16384, 4000), (64, 4000), (16384, 4000)]:
    torch.manual_seed(1)
    x = torch.randn(*shape, device="cuda")
    try:
        got = m.ModelNew()(x)
    except Exception as e:
        print(shape, "raised", str(e)[:200]); continue
    exact = torch.cumsum(x.double(), 1); ref = torch.cumsum(x, 1)
    d = (got.double() - exact).abs(); r = (ref.double() - exact).abs()
    bad = (got - ref).abs() > 1e-4 + 1e-4 * ref.abs()
    idx = bad.nonzero()
    print(shape, "kernel err", d.max().item(), "torch err", r.max().item(), "bad", int(bad.sum()), "first bad", idx[:5].tolist(),
          "cols of bad", sorted(set(idx[:, 1].tolist()))[:10] if len(idx) else [], "rows", len(set(idx[:, 0].tolist())) if len(idx) else 0)
