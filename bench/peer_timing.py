# peer_timing.py: the timing both peers benchmarks share (bench/peers_gdn.py, bench/peers_mamba2.py).
#   copy_gbps(torch, reps)        the device-to-device copy bandwidth (1 GiB FP32, read + written),
#                                 the ceiling every fraction is measured against, in the same process;
#   Timer(torch, reps, graph).us(fns, launches)
#                                 the median over `reps` of a loop of at least `launches` calls of
#                                 fns[0], fns[1], ... (round robin), per call, in microseconds; the
#                                 loop captured in a CUDA graph when capture works, else plain
#                                 launches (said in the returned mode);
#   cold_pools(pool_bytes, cold_mib)
#                                 how many state pools a loop rotates over so that it touches
#                                 >= cold_mib MiB: a small batch's state is then not served from L2.
import math
import statistics


def median_ms(torch, fn, reps):
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    return statistics.median(ts)


def copy_gbps(torch, reps):
    n = (1 << 30) // 4  # 1 GiB float32, read + written
    src = torch.ones(n, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    gbps = 2 * n * 4 / (median_ms(torch, lambda: dst.copy_(src), max(reps, 20)) * 1e-3) / 1e9
    del src, dst
    return gbps


def cold_pools(pool_bytes, cold_mib):
    return max(1, math.ceil(cold_mib * 2**20 / max(pool_bytes, 1)))


class Timer:
    def __init__(self, torch, reps, graph=True):
        self.torch, self.reps, self.graph = torch, reps, graph

    def us(self, fns, launches):
        """-> (us per call, timing mode, calls per timed loop)."""
        torch = self.torch
        nl = math.ceil(max(launches, len(fns)) / len(fns)) * len(fns)

        def loop():
            for j in range(nl):
                fns[j % len(fns)]()

        for _ in range(2):  # JIT compile and warm up outside any capture
            loop()
        torch.cuda.synchronize()
        run, mode = loop, "plain"
        if self.graph:
            try:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    loop()
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    loop()
                run, mode = g.replay, "cuda_graph"
            except Exception as ex:  # noqa: BLE001
                torch.cuda.synchronize()
                self.graph = False
                print(f"note: CUDA graph capture failed ({ex!r}); timing plain launches")
        run()
        torch.cuda.synchronize()
        return median_ms(torch, run, self.reps) * 1e3 / nl, mode, nl
