#include "src/thread_team.h"

#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace weft {

struct ThreadTeam::Shared {
  pid_t pid = ::getpid();         // the process whose threads these are
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
  if (shared_->pid != ::getpid()) return;  // a forked child's copy: no thread to tell
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stop = true;
  }
  shared_->work.notify_all();
}

void ThreadTeam::run(std::span<const std::function<void()>> jobs) {
  if (jobs.empty()) return;
  // In a child forked since, the kept threads are the parent's: none of them runs here. Start
  // afresh, and leave the old state alone: its mutex may have been held at the fork, and
  // destroying a condition variable the parent's threads waited on may wait for them for ever.
  if (shared_->pid != ::getpid()) {
    new std::shared_ptr<Shared>(std::move(shared_));  // leaked on purpose, once per fork
    shared_ = std::make_shared<Shared>();
  }
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
