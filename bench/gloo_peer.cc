// weft-gloo-bench: the peer benchmark for Gloo (Debian's libgloo), with the same sweep, inputs,
// check and timing as weft-bench (bench/peer_bench.h). Launch it with weft-run, which gives each
// process WEFT_RANK and WEFT_NRANKS; ranks meet through a Gloo FileStore in $WEFT_GLOO_STORE (or
// /tmp/weft-gloo-<uid>-<launch id>) and connect over TCP on 127.0.0.1: Gloo has no shared-memory
// transport, so it runs over TCP loopback whatever class the comparison is in.
//
//   weft-run -n 2 -- weft-gloo-bench allreduce -A ring -b 8 -e 64M --csv
//
// -A for allreduce: ring (gloo::allreduce, RING: what PyTorch's gloo backend calls), bcube
// (gloo::allreduce, BCUBE), halving_doubling (gloo::AllreduceHalvingDoubling). reduce_scatter runs
// gloo::ReduceScatterHalvingDoubling; allgather, alltoall, broadcast and reduce Gloo's one algorithm
// each. The halving-doubling classes work in place: each call copies the input to a work buffer
// first and the result out (reduce-scatter leaves each rank's block at the buffer's start), and
// those copies are part of the measured time.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/peer_bench.h"

namespace {

using weft::algorithms::Collective;
using weft::algorithms::CollectiveArgs;

void sum_float(void* out, const void* a, const void* b, size_t n) {
  gloo::sum<float>(out, a, b, n);
}

class GlooPeer {
 public:
  GlooPeer(std::shared_ptr<gloo::Context> ctx, std::string algorithm) : ctx_(std::move(ctx)), algorithm_(std::move(algorithm)) {}

  // Builds the in-place algorithm objects for this size (their set-up is not a call's cost).
  std::string prepare(const CollectiveArgs& a) {
    hd_.reset();
    rs_.reset();
    const size_t total = a.count * (a.coll == Collective::kReduceScatter ? a.nranks : 1);
    if (a.coll == Collective::kAllReduce && algorithm_ == "halving_doubling") {
      work_.assign(total, 0.0f);
      hd_ = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx_, std::vector<float*>{work_.data()},
                                                                     static_cast<int>(total));
    } else if (a.coll == Collective::kReduceScatter) {
      work_.assign(total, 0.0f);
      rs_ = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
          ctx_, std::vector<float*>{work_.data()}, static_cast<int>(total),
          std::vector<int>(a.nranks, static_cast<int>(a.count)));
    } else if (a.coll == Collective::kAllReduce && algorithm_ != "ring" && algorithm_ != "bcube") {
      return "unknown gloo allreduce algorithm '" + algorithm_ + "' (ring, bcube, halving_doubling)";
    }
    return {};
  }

  std::string run(const CollectiveArgs& a, const void* send, void* recv) {
    try {
      call(a, const_cast<float*>(static_cast<const float*>(send)), static_cast<float*>(recv));
    } catch (const std::exception& e) {
      return e.what();
    }
    return {};
  }

  void barrier() {
    gloo::BarrierOptions opts(ctx_);
    gloo::barrier(opts);
  }

  double sum(double v) {
    double out = 0;
    gloo::AllreduceOptions opts(ctx_);
    opts.setInput(&v, 1);
    opts.setOutput(&out, 1);
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
    gloo::allreduce(opts);
    return out;
  }

 private:
  void call(const CollectiveArgs& a, float* send, float* recv) {
    const size_t c = a.count, n = static_cast<size_t>(a.nranks);
    switch (a.coll) {
      case Collective::kAllReduce: {
        if (hd_) {
          std::memcpy(work_.data(), send, c * sizeof(float));
          hd_->run();
          std::memcpy(recv, work_.data(), c * sizeof(float));
          return;
        }
        gloo::AllreduceOptions opts(ctx_);
        opts.setAlgorithm(algorithm_ == "bcube" ? gloo::AllreduceOptions::Algorithm::BCUBE
                                                : gloo::AllreduceOptions::Algorithm::RING);
        opts.setInput(send, c);
        opts.setOutput(recv, c);
        opts.setReduceFunction(&sum_float);
        gloo::allreduce(opts);
        return;
      }
      case Collective::kReduceScatter: {
        std::memcpy(work_.data(), send, c * n * sizeof(float));
        rs_->run();
        std::memcpy(recv, work_.data(), c * sizeof(float));
        return;
      }
      case Collective::kAllGather: {
        gloo::AllgatherOptions opts(ctx_);
        opts.setInput(send, c);
        opts.setOutput(recv, c * n);
        gloo::allgather(opts);
        return;
      }
      case Collective::kAllToAll: {
        gloo::AlltoallOptions opts(ctx_);
        opts.setInput(send, c * n);
        opts.setOutput(recv, c * n);
        gloo::alltoall(opts);
        return;
      }
      case Collective::kBroadcast: {
        gloo::BroadcastOptions opts(ctx_);
        if (ctx_->rank == a.root) opts.setInput(send, c);
        opts.setOutput(recv, c);
        opts.setRoot(a.root);
        gloo::broadcast(opts);
        return;
      }
      case Collective::kReduce: {
        gloo::ReduceOptions opts(ctx_);
        opts.setInput(send, c);
        opts.setOutput(recv, c);
        opts.setRoot(a.root);
        opts.setReduceFunction(&sum_float);
        gloo::reduce(opts);
        return;
      }
      default:
        throw std::runtime_error("collective not supported by the Gloo peer");
    }
  }

  std::shared_ptr<gloo::Context> ctx_;
  std::string algorithm_;
  std::vector<float> work_;
  std::unique_ptr<gloo::AllreduceHalvingDoubling<float>> hd_;
  std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> rs_;
};

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  weft::bench::PeerOptions o;
  o.transport = "tcp";
  o.algorithm = "";
  std::string error;
  if (!weft::bench::parse_peer_options(argc, argv, &o, &error)) {
    std::fprintf(stderr, "weft-gloo-bench: %s\n", error.c_str());
    return 2;
  }
  if (o.coll != Collective::kAllReduce) {
    if (!o.algorithm.empty() && o.algorithm != "default") {
      std::fprintf(stderr, "weft-gloo-bench: -A chooses among Gloo's allreduce algorithms only\n");
      return 2;
    }
    o.algorithm = o.coll == Collective::kReduceScatter ? "halving_doubling" : "default";
  } else if (o.algorithm.empty()) {
    o.algorithm = "ring";
  }
  const int rank = env_int("WEFT_RANK"), nranks = env_int("WEFT_NRANKS");
  if (rank < 0 || nranks < 1 || rank >= nranks) {
    std::fprintf(stderr, "weft-gloo-bench: WEFT_RANK and WEFT_NRANKS are not set: launch it with weft-run\n");
    return 2;
  }
  const char* id = std::getenv("WEFT_UNIQUE_ID");
  std::string dir;
  if (const char* d = std::getenv("WEFT_GLOO_STORE")) {
    dir = d;
  } else {
    dir = "/tmp/weft-gloo-" + std::to_string(getuid()) + "-" + std::to_string(std::hash<std::string>()(id ? id : "none"));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  int rc = 1;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(dir);
    gloo::rendezvous::PrefixStore prefix("weft-gloo-bench", store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
    ctx->setTimeout(std::chrono::seconds(120));
    ctx->connectFullMesh(prefix, device);
    GlooPeer peer(ctx, o.algorithm);
    weft::bench::PeerComm comm;
    comm.library = "gloo";
    comm.rank = rank;
    comm.nranks = nranks;
    comm.barrier = [&] { peer.barrier(); };
    comm.sum = [&](double v) { return peer.sum(v); };
    comm.prepare = [&](const CollectiveArgs& a) { return peer.prepare(a); };
    comm.run = [&](const CollectiveArgs& a, const void* s, void* r) { return peer.run(a, s, r); };
    rc = weft::bench::run_peer_sweep(o, comm);
    peer.barrier();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-gloo-bench: rank %d: %s\n", rank, e.what());
  }
  if (rank == 0) std::filesystem::remove_all(dir, ec);
  return rc;
}
