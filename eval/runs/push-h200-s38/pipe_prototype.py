"""Prototype (development only): a persistent, pipelined row exchange for instance norm.
G row lanes of SPLIT programs each; a program loads and publishes its chunk of the next row of its lane
before it waits for the current row's siblings, so one row is always loading while another waits.
No fallback: a wait gives up after SPIN polls (a wrong result, caught by the check), so it never hangs."""
import torch, triton, triton.language as tl

@triton.jit
def _stats(x):
    n = x.shape[0] * 1.0
    mean = tl.sum(x, axis=0) / n
    m2 = tl.sum((x - mean) * (x - mean), axis=0)
    return mean, m2

@triton.jit
def _publish(ws_ptr, slot, mean, m2):
    packed = (mean.to(tl.uint32, bitcast=True).to(tl.uint64) << 32) | m2.to(tl.uint32, bitcast=True).to(tl.uint64)
    tl.atomic_xchg(ws_ptr + slot, packed.to(tl.int64, bitcast=True), sem='release')

@triton.jit
def _gather(ws_ptr, row, SPIN, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    ks = tl.arange(0, SPLIT)
    got = tl.load(ws_ptr + row * SPLIT + ks, volatile=True)
    missing = tl.sum((got == -1).to(tl.int32), axis=0)
    spins = 0
    while (missing > 0) & (spins < SPIN):
        got = tl.load(ws_ptr + row * SPLIT + ks, volatile=True)
        missing = tl.sum((got == -1).to(tl.int32), axis=0)
        spins += 1
    bits = got.to(tl.uint64, bitcast=True)
    mean_k = (bits >> 32).to(tl.uint32).to(tl.float32, bitcast=True)
    m2_k = (bits & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True)
    n = BLOCK * 1.0
    mean = tl.sum(mean_k, axis=0) / SPLIT
    m2 = tl.sum(m2_k + n * (mean_k - mean) * (mean_k - mean), axis=0)
    return mean, m2

@triton.jit
def pipe_norm(x_ptr, y_ptr, ws_ptr, SPIN, N, R: tl.constexpr, SPLIT: tl.constexpr, BLOCK: tl.constexpr,
              G: tl.constexpr, EPS: tl.constexpr):
    pid = tl.program_id(0)
    c = pid % SPLIT
    lane = pid // SPLIT
    cols = c * BLOCK + tl.arange(0, BLOCK)
    row = lane
    x = tl.load(x_ptr + row.to(tl.int64) * R + cols)
    mean_t, m2_t = _stats(x)
    _publish(ws_ptr, row * SPLIT + c, mean_t, m2_t)
    while row < N:
        nxt = row + G
        more = nxt < N
        xn = tl.load(x_ptr + nxt.to(tl.int64) * R + cols, mask=(cols * 0 + nxt) < N, other=0.0)
        if more:
            mn, m2n = _stats(xn)
            _publish(ws_ptr, nxt * SPLIT + c, mn, m2n)
        mean, m2 = _gather(ws_ptr, row, SPIN, SPLIT, BLOCK)
        y = (x - mean) * tl.math.rsqrt(m2 / R + EPS)
        tl.store(y_ptr + row.to(tl.int64) * R + cols, y)
        x = xn
        row = nxt

def run(x, block, warps, g):
    n, r = x.shape[0] * x.shape[1], x.shape[2] * x.shape[3]
    split = r // block
    ws = torch.full((n * split,), -1, device=x.device, dtype=torch.int64)
    y = torch.empty_like(x)
    pipe_norm[(g * split,)](x, y, ws, 4096, n, R=r, SPLIT=split, BLOCK=block, G=g, EPS=1e-5, num_warps=warps)
    return y

@triton.jit
def _sm_stats(x):
    m = tl.max(x, axis=0)
    return m, tl.sum(tl.exp(x - m), axis=0)

@triton.jit
def _sm_gather(ws_ptr, row, SPIN, SPLIT: tl.constexpr, SPLIT_P2: tl.constexpr):
    ks = tl.arange(0, SPLIT_P2)
    got = tl.load(ws_ptr + row * SPLIT + ks, mask=ks < SPLIT, other=0, volatile=True)
    missing = tl.sum(((ks < SPLIT) & (got == -1)).to(tl.int32), axis=0)
    spins = 0
    while (missing > 0) & (spins < SPIN):
        got = tl.load(ws_ptr + row * SPLIT + ks, mask=ks < SPLIT, other=0, volatile=True)
        missing = tl.sum(((ks < SPLIT) & (got == -1)).to(tl.int32), axis=0)
        spins += 1
    bits = got.to(tl.uint64, bitcast=True)
    m_k = tl.where(ks < SPLIT, (bits >> 32).to(tl.uint32).to(tl.float32, bitcast=True), float('-inf'))
    s_k = tl.where(ks < SPLIT, (bits & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True), 0.0)
    big = tl.max(m_k, axis=0)
    return big, tl.sum(s_k * tl.exp(m_k - big), axis=0)

@triton.jit
def pipe_softmax(x_ptr, y_ptr, ws_ptr, SPIN, N, R: tl.constexpr, SPLIT: tl.constexpr, SPLIT_P2: tl.constexpr,
                 BLOCK: tl.constexpr, G: tl.constexpr):
    pid = tl.program_id(0)
    c = pid % SPLIT
    lane = pid // SPLIT
    cols = c * BLOCK + tl.arange(0, BLOCK)
    row = lane
    x = tl.load(x_ptr + row.to(tl.int64) * R + cols)
    m_t, s_t = _sm_stats(x)
    _publish(ws_ptr, row * SPLIT + c, m_t, s_t)
    while row < N:
        nxt = row + G
        more = nxt < N
        xn = tl.load(x_ptr + nxt.to(tl.int64) * R + cols, mask=(cols * 0 + nxt) < N, other=0.0)
        if more:
            mn, sn = _sm_stats(xn)
            _publish(ws_ptr, nxt * SPLIT + c, mn, sn)
        big, tot = _sm_gather(ws_ptr, row, SPIN, SPLIT, SPLIT_P2)
        tl.store(y_ptr + row.to(tl.int64) * R + cols, tl.exp(x - big) / tot)
        x = xn
        row = nxt

def run_softmax(x, block, warps, g):
    n, r = x.shape
    split = r // block
    ws = torch.full((n * split,), -1, device=x.device, dtype=torch.int64)
    y = torch.empty_like(x)
    pipe_softmax[(g * split,)](x, y, ws, 4096, n, R=r, SPLIT=split, SPLIT_P2=triton.next_power_of_2(split), BLOCK=block, G=g, num_warps=warps)
    return y

if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.rand(112, 64, 512, 512, device="cuda")
    want = torch.nn.functional.instance_norm(x)
    bench = lambda f: triton.testing.do_bench(f, warmup=25, rep=200, return_mode="median")
    print("eager", round(bench(lambda: torch.nn.functional.instance_norm(x)), 3), flush=True)
    for block, warps in ((2048, 1), (4096, 2), (2048, 2), (4096, 4)):
        for per_sm in (2, 4, 6, 8, 12, 16):
            split = 262144 // block
            g = max(1, per_sm * 132 // split)
            try:
                y = run(x, block, warps, g)
                ok = torch.allclose(y, want, atol=1e-4, rtol=1e-4)
                del y
                t = [bench(lambda: run(x, block, warps, g)) for _ in range(2)]
                print(f"chunk {block}/{warps}w lanes {g} ({per_sm}/SM): ok={ok} " + " / ".join(f"{v:.3f}" for v in t), flush=True)
            except Exception as e:
                print(f"chunk {block}/{warps}w lanes {g}: {type(e).__name__} {str(e)[:200]}", flush=True)
    del x, want
    torch.cuda.empty_cache()
    x = torch.rand(4096, 393216, device="cuda") * 4
    want = torch.softmax(x, dim=-1)
    print("softmax eager", round(bench(lambda: torch.softmax(x, dim=-1)), 3), flush=True)
    for block, warps in ((4096, 4), (4096, 2), (2048, 1), (8192, 4)):
        for per_sm in (2, 4, 6, 8, 12, 16):
            split = 393216 // block
            g = max(1, per_sm * 132 // split)
            try:
                y = run_softmax(x, block, warps, g)
                ok = torch.allclose(y, want, atol=1e-4, rtol=1e-4)
                del y
                t = [bench(lambda: run_softmax(x, block, warps, g)) for _ in range(2)]
                print(f"softmax chunk {block}/{warps}w lanes {g} ({per_sm}/SM): ok={ok} " + " / ".join(f"{v:.3f}" for v in t), flush=True)
            except Exception as e:
                print(f"softmax chunk {block}/{warps}w lanes {g}: {type(e).__name__} {str(e)[:200]}", flush=True)
