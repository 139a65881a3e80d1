#!/usr/bin/env python3
"""torch.distributed through a chosen backend, for tools/gpu-check.

  torch_check.py --world N --backend nccl|gloo --out result.json
  torch_check.py --compare a.json b.json

Each run spawns N ranks (all on GPU 0 for backend nccl: weft allows ranks to share a GPU, stock
NCCL does not, so the stock NCCL run uses N=1), runs all_reduce (sum, avg, max), all_gather,
reduce_scatter and broadcast on integer-valued float tensors (exact in any order; their checksums
are summed in float64, exact too), then 8 DDP steps of a small MLP whose global batch is split
across the ranks. Rank 0 writes the collective results, the per-step global loss and a parameter
checksum. --compare checks two such files: collectives identical, losses and checksum within 1e-4
relative (float sums in another order).
"""
import argparse
import faulthandler
import json
import os
import socket
import sys


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, world, backend, out, port):
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dump_after = float(os.environ.get("TORCH_CHECK_DUMP_AFTER", "0"))
    if dump_after > 0:
        faulthandler.dump_traceback_later(dump_after, exit=False)

    def say(what):
        print("rank %d: %s" % (rank, what), file=sys.stderr, flush=True)

    say("init_process_group")
    dev = torch.device("cuda:0") if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(0)
    dist.init_process_group(backend, rank=rank, world_size=world)
    res = {}

    def checksum(t):  # float64: exact for these integer values, in any order and on any device
        return float(t.double().sum().item())

    def vec(n, base):
        return (torch.arange(n, dtype=torch.float32, device=dev) % 97 + base * 1000).contiguous()

    n = 1 << 16
    for name, op in (("sum", dist.ReduceOp.SUM), ("max", dist.ReduceOp.MAX)):
        t = vec(n, rank + 1)
        say("all_reduce " + name)
        dist.all_reduce(t, op=op)
        res["all_reduce_" + name] = t[:64].tolist() + [checksum(t)]
    if backend == "nccl":  # gloo has no AVG
        t = vec(n, rank + 1) * world
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        res["all_reduce_avg_scaled"] = checksum(t)
    t = vec(n, rank + 1)
    say("all_gather")
    g = torch.empty(n * world, device=dev)
    dist.all_gather_into_tensor(g, t)
    res["all_gather"] = [checksum(x) for x in g.chunk(world)]
    t = vec(n * world, rank + 1)
    o = torch.empty(n, device=dev)
    say("reduce_scatter")
    dist.reduce_scatter_tensor(o, t)
    mine = torch.tensor([checksum(o)], dtype=torch.float64, device=dev)
    sums = [torch.zeros(1, dtype=torch.float64, device=dev) for _ in range(world)]
    dist.all_gather(sums, mine)
    res["reduce_scatter"] = [float(x.item()) for x in sums]
    t = vec(n, rank + 1)
    say("broadcast")
    dist.broadcast(t, src=world - 1)
    res["broadcast"] = checksum(t)
    # All-to-all, equal and uneven splits (PyTorch's NCCL backend posts it as a group of
    # send/recv calls), and a ring of isend/irecv in one batch (a group of two).
    say("all_to_all_single")
    t = vec(n * world, rank + 1)
    o = torch.empty(n * world, device=dev)
    dist.all_to_all_single(o, t)
    res["all_to_all"] = [checksum(x) for x in o.chunk(world)]
    ins = [1000 * (rank + 1) + 7 * j for j in range(world)]    # rank sends ins[j] to j
    outs = [1000 * (j + 1) + 7 * rank for j in range(world)]   # and receives j's ins[rank]
    t = vec(sum(ins), rank + 1)
    o = torch.empty(sum(outs), device=dev)
    say("all_to_all_single, uneven")
    dist.all_to_all_single(o, t, output_split_sizes=outs, input_split_sizes=ins)
    res["all_to_all_uneven"] = [checksum(x) for x in o.split(outs)]
    say("batch_isend_irecv")
    t = vec(n, rank + 1)
    o = torch.empty(n, device=dev)
    ops = [dist.P2POp(dist.isend, t, (rank + 1) % world), dist.P2POp(dist.irecv, o, (rank - 1) % world)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    res["send_recv_ring"] = checksum(o)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0] if backend == "nccl" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(64, 32, generator=gen)
    Y = torch.randn(64, 1, generator=gen)
    per = 64 // world
    xs, ys = X[rank * per:(rank + 1) * per].to(dev), Y[rank * per:(rank + 1) * per].to(dev)
    losses = []
    for step in range(8):
        say("DDP step %d" % step)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(xs), ys)
        loss.backward()
        opt.step()
        glob = loss.detach().clone()
        dist.all_reduce(glob)
        losses.append(float(glob.item()) / world)
    res["ddp_losses"] = losses
    res["ddp_param_sum"] = float(sum(p.detach().double().sum().item() for p in model.parameters()))
    if backend == "nccl":
        torch.cuda.synchronize()
    say("barrier")
    dist.barrier()
    say("destroy_process_group")
    dist.destroy_process_group()
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"world": world, "backend": backend, "results": res}, f, indent=1)
        print("rank 0: wrote", out, "losses", ["%.6f" % x for x in losses])


def compare(a_path, b_path):
    a = json.load(open(a_path))
    b = json.load(open(b_path))
    ra, rb = a["results"], b["results"]
    bad = []
    for k in sorted(set(ra) & set(rb)):
        va, vb = ra[k], rb[k]
        if k.startswith("ddp"):
            la = va if isinstance(va, list) else [va]
            lb = vb if isinstance(vb, list) else [vb]
            for x, y in zip(la, lb):
                if abs(x - y) > 1e-4 * max(1.0, abs(y)):
                    bad.append("%s: %r vs %r" % (k, x, y))
                    break
        elif va != vb:
            bad.append("%s differs" % k)
    label = "%s (%s, %d ranks) vs %s (%s, %d ranks)" % (a_path, a["backend"], a["world"], b_path, b["backend"], b["world"])
    if bad:
        print("DIFFER:", label)
        for x in bad:
            print("  ", x)
        return 1
    print("AGREE:", label, "- %d results; losses %s" % (len(set(ra) & set(rb)), ["%.6f" % x for x in ra["ddp_losses"]]))
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--backend", default="nccl")
    p.add_argument("--out", default="torch_check.json")
    p.add_argument("--compare", nargs=2)
    args = p.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    import torch.multiprocessing as mp
    mp.spawn(worker, args=(args.world, args.backend, args.out, free_port()), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
