"""Why L2/38's pipelined softmax runs slower in the eval's baseline worker than in the search: the kept module,
timed fresh, after torch.compile of the reference in the same process, and with fewer lanes; the repair
flag (workspace slot 0) read after each."""
import importlib.util, torch, triton
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod
ref_mod = load(".kb/level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py", "ref")
mod = load(".gpu/mn38.py", "mn")
ws_seen = []
class Proxy:
    def __getattr__(self, k):
        return getattr(torch, k)
    def full(self, *a, **kw):
        t = torch.full(*a, **kw); ws_seen.append(t); return t
mod.torch = Proxy()
torch.manual_seed(0)
with torch.device("cuda"):
    ref = ref_mod.Model(*ref_mod.get_init_inputs())
    new = mod.ModelNew(*ref_mod.get_init_inputs())
new.load_state_dict(ref.state_dict(), strict=False)
x = [t.cuda() for t in ref_mod.get_inputs()]
def report(tag):
    ws_seen.clear()
    with torch.no_grad():
        t = triton.testing.do_bench(lambda: new(*x), warmup=25, rep=200, return_mode="median")
        ws_seen.clear(); new(*x); torch.cuda.synchronize()
    flags = [int(w[0]) for w in ws_seen]
    lanes = {k: dict(v) for k, v in vars(mod).items() if k.endswith("_lanes") and isinstance(v, dict)}
    print(f"{tag:30s} {t:.3f} ms flags {flags} lanes {lanes}", flush=True)
with torch.no_grad():
    new(*x); new(*x)
report("fresh")
with torch.no_grad():
    e = triton.testing.do_bench(lambda: ref(*x), warmup=25, rep=200, return_mode="median")
print("eager", round(e, 3))
comp = torch.compile(ref)
with torch.no_grad():
    comp(*x); comp(*x)
    c = triton.testing.do_bench(lambda: comp(*x), warmup=25, rep=200, return_mode="median")
print("compile", round(c, 3))
report("after compile")
for n in (22, 20, 16, 12):
    for v in [v for k, v in vars(mod).items() if k.endswith("_lanes") and isinstance(v, dict)]:
        v[x[0].device] = n
    report(f"lanes {n}")
