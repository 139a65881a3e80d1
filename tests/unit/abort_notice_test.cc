// The text of abort notices (src/abort_notice.h): a failure passed on from rank to rank
// keeps its cause, at the end of the text, however many ranks passed it on. And the reason an
// abort without one gives (src/last_failure.h): another communicator's failure.
#include "src/abort_notice.h"

#include "src/last_failure.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

namespace weft {
namespace {

// What rank 1 sends after ranks 2 to `hops` + 1 passed on the death of rank `hops` + 2, each
// naming the rank it heard from ("rank 2 aborted: ").
std::string passed_on(int hops) {
  std::string text = "rank 1: ";
  for (int r = 2; r < hops + 2; ++r) text += "rank " + std::to_string(r) + " aborted: ";
  return text + "rank " + std::to_string(hops + 2) + " (shm, channel 0): process 99 exited";
}

TEST(AbortNotice, AShortReasonIsSentWhole) {
  EXPECT_EQ(abort_notice_text("rank 3 ran out of disk", 255), "rank 3 ran out of disk");
  const std::string exact(255, 'x');
  EXPECT_EQ(abort_notice_text(exact, 255), exact);
}

TEST(AbortNotice, ALongReasonKeepsItsStartAndItsCause) {
  const std::string chain = passed_on(30);
  ASSERT_GT(chain.size(), 255u);
  const std::string sent = abort_notice_text(chain, 255);
  EXPECT_EQ(sent.size(), 255u);
  EXPECT_EQ(sent.rfind("rank 1: rank 2 aborted: ", 0), 0u) << sent;
  EXPECT_NE(sent.find(" [...] "), std::string::npos) << sent;
  const std::string cause = "rank 32 (shm, channel 0): process 99 exited";
  EXPECT_EQ(sent.substr(sent.size() - cause.size()), cause) << sent;
}

TEST(AbortNotice, ThePeerIsNamedOnce) {
  // Rank 2 passed on rank 3's death, then rank 1: rank 0 reports each rank once.
  EXPECT_EQ(peer_abort_message(1, passed_on(1)), "rank 1 aborted: rank 2 aborted: rank 3 (shm, channel 0): process 99 exited");
  // A reason that does not start with the peer's own name is kept as it is.
  EXPECT_EQ(peer_abort_message(1, "rank 1 ran out of disk"), "rank 1 aborted: rank 1 ran out of disk");
  EXPECT_EQ(peer_abort_message(1, "rank 12: timed out"), "rank 1 aborted: rank 12: timed out");
  EXPECT_EQ(peer_abort_message(7, ""), "rank 7 aborted: ");
}

// Communicator 2 fails after communicator 1: an abort of 2 still names 1's failure (before, only
// the latest failure of the process was kept, and 2's own hid it), of 1 or of another names 2's;
// a communicator made after them (a shrink's, say) names neither.
TEST(FailureElsewhere, NamesTheLatestFailureOfAnotherCommunicator) {
  constexpr uint64_t kFirst = 0x5eed0001, kSecond = 0x5eed0002, kOther = 0x5eed0003, kLater = 0x5eed0004;
  const auto made = std::chrono::steady_clock::now();  // when the first three were made
  const auto elsewhere = [&](uint64_t tag) { return failure_elsewhere(tag, made); };
  EXPECT_EQ(elsewhere(kFirst), "");
  note_failure(kFirst, "world rank 3 (shm, channel 0): process 4242 exited");
  EXPECT_EQ(elsewhere(kFirst), "");
  EXPECT_NE(elsewhere(kOther).find(" ms earlier: world rank 3 (shm, channel 0): process 4242 exited"), std::string::npos)
      << elsewhere(kOther);
  note_failure(kSecond, "world rank 0 aborted");
  EXPECT_NE(elsewhere(kSecond).find("process 4242 exited"), std::string::npos) << elsewhere(kSecond);
  EXPECT_NE(elsewhere(kFirst).find(": world rank 0 aborted"), std::string::npos) << elsewhere(kFirst);
  EXPECT_NE(elsewhere(kOther).find(": world rank 0 aborted"), std::string::npos) << elsewhere(kOther);
  // The first communicator failing again is the latest once more.
  note_failure(kFirst, "world rank 5 timed out");
  EXPECT_NE(elsewhere(kOther).find("world rank 5 timed out"), std::string::npos) << elsewhere(kOther);
  EXPECT_NE(elsewhere(kFirst).find("world rank 0 aborted"), std::string::npos) << elsewhere(kFirst);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a clock tick past the last failure
  EXPECT_EQ(failure_elsewhere(kLater, std::chrono::steady_clock::now()), "");
}

}  // namespace
}  // namespace weft
