// ThreadTeam: runs several jobs at once, the first on the calling thread and the others on
// threads it keeps for the next run, and returns when all are done.
//
// Why: where one thread ends the groups of several ranks of a communicator (nccl-tests' -g,
// ncclCommInitAll's ranks in one group), a rank's group end may wait for the others'
// (capi_common.cc, end_groups), so each must run on a thread of its own. Starting and joining a
// thread per rank at every group end cost about 40 us a group at four ranks and 125 us at eight
// on the development VM (docs/PERFORMANCE.md, "One thread, several ranks"); a kept thread is woken.
//
// Jobs may wait for each other: each runs on a thread of its own, never queued behind another.
// Kept threads sleep on a condition variable between runs. They are detached and hold the
// shared state themselves, so a team destroyed at its thread's exit only tells them to stop. In a
// process forked from the team's (where its threads do not exist) the team starts threads of
// its own at its next run.
//
// Thread-safety: one thread calls run() at a time (a team belongs to its thread).
#pragma once

#include <functional>
#include <memory>
#include <span>

namespace weft {

class ThreadTeam {
 public:
  ThreadTeam();
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  // Runs jobs[0] here and each other job on a kept thread (started when the team has fewer than
  // jobs.size() - 1), returning once every job has returned. Jobs must not throw.
  void run(std::span<const std::function<void()>> jobs);
  // The threads kept now.
  int kept() const;

 private:
  struct Shared;
  static void serve(const std::shared_ptr<Shared>& s);  // a kept thread's loop
  std::shared_ptr<Shared> shared_;
};

}  // namespace weft
