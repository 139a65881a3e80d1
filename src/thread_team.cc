#include "src/thread_team.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace weft {

struct ThreadTeam::Shared {
  std::mutex mu;
  std::condition_variable work;   // a job was queued, or stop
  std::condition_variable done;   // pending reached 0
  std::deque<const std::function<void()>*> jobs;
  int threads = 0;                // kept threads started
  int pending = 0;                // jobs of the current run not yet returned
  bool stop = false;
};

void ThreadTeam::serve(const std::shared_ptr<Shared>& s) {
  std::unique_lock<std::mutex> lock(s->mu);
  for (;;) {
    s->work.wait(lock, [&] { return s->stop || !s->jobs.empty(); });
    if (s->stop) return;
    const std::function<void()>* job = s->jobs.front();
    s->jobs.pop_front();
    lock.unlock();
    (*job)();
    lock.lock();
    if (--s->pending == 0) s->done.notify_one();
  }
}

ThreadTeam::ThreadTeam() : shared_(std::make_shared<Shared>()) {}

ThreadTeam::~ThreadTeam() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stop = true;
  }
  shared_->work.notify_all();
}

void ThreadTeam::run(std::span<const std::function<void()>> jobs) {
  if (jobs.empty()) return;
  Shared& s = *shared_;
  const int others = static_cast<int>(jobs.size()) - 1;
  if (others > 0) {
    std::lock_guard<std::mutex> lock(s.mu);
    // Every kept thread is idle between runs (run() returns once all jobs have), so it takes at
    // most one job of this run: each job gets a thread of its own.
    for (; s.threads < others; ++s.threads) std::thread([sp = shared_] { serve(sp); }).detach();
    for (int i = 1; i <= others; ++i) s.jobs.push_back(&jobs[static_cast<size_t>(i)]);
    s.pending = others;
  }
  if (others == 1) s.work.notify_one();
  else if (others > 1) s.work.notify_all();
  jobs[0]();
  if (others == 0) return;
  std::unique_lock<std::mutex> lock(s.mu);
  s.done.wait(lock, [&] { return s.pending == 0; });
}

int ThreadTeam::kept() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->threads;
}

}  // namespace weft
