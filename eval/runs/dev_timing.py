"""Development timings for the push runs' scripts (not product figures): a recipe's candidate in each of several
parameter forms, built from a development-set problem, checked against the reference and timed with
`triton.testing.do_bench` (median, its L2 flush) beside eager. Run on the GPU machine from the checkout's root, with
.kb carried; a session's script names the problems, the recipes and the forms, and calls `time_forms`."""
import importlib.util
import tempfile

import torch
import triton

from kskill.agents.recipes.builder import build_candidate


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def time_forms(forms: dict[str, list[dict]], recipes: list[str]) -> None:
    """For each problem of `forms` (a path under .kb), eager's time, then each form's: its parameters as built, its
    largest difference from the reference and its time; a form that fails says why and the next one runs."""
    for problem, params_list in forms.items():
        src = open(f".kb/{problem}").read()
        ref_mod = load(f".kb/{problem}", "ref")
        torch.manual_seed(0)
        ref = ref_mod.Model(*ref_mod.get_init_inputs()).cuda().eval()
        x = [t.cuda() for t in ref_mod.get_inputs()]
        with torch.no_grad():
            want = ref(*x)
            print(f"{problem[:36]:36s} eager {bench(lambda: ref(*x)):.3f} ms", flush=True)
        for params in params_list:
            try:
                cand = build_candidate(src, recipes, params)
                f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
                f.write(cand.source)
                f.close()
                mod = load(f.name, f"c{abs(hash(str(params)))}")
                torch.manual_seed(0)
                new = mod.ModelNew(*ref_mod.get_init_inputs()).cuda().eval()
                with torch.no_grad():
                    err = (new(*x) - want).abs().max().item()
                    t = bench(lambda: new(*x))
                used = {k: v for p in cand.params.values() for k, v in p.items()}
                print(f"{problem[:36]:36s} {str(used):100s} err={err:.1e} {t:.3f} ms", flush=True)
            except Exception as e:
                print(f"{problem[:36]:36s} {params} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
        del ref, x, want
        torch.cuda.empty_cache()
