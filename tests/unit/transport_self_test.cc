// The self transport: a rank's ordered byte stream to itself.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "transport/transport.h"

namespace weft::transport {
namespace {

std::unique_ptr<Connection> connect_self(int rank = 0, int nranks = 1, int channel = 0) {
  TransportContext ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  auto t = make_self_transport(ctx);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  if (!t.ok()) return nullptr;
  EXPECT_EQ((*t)->name(), "self");
  EXPECT_TRUE((*t)->set_peer_cards(std::vector<std::vector<uint8_t>>(nranks)).ok());
  auto c = (*t)->connect(rank, channel, Deadline::after(std::chrono::seconds(1)));
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? std::move(*c) : nullptr;
}

std::vector<uint8_t> pattern(size_t n, unsigned seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed * 7 + (i >> 9));
  return v;
}

TEST(SelfTransport, ConnectsOnlyToItself) {
  TransportContext ctx;
  ctx.rank = 2;
  ctx.nranks = 4;
  auto t = make_self_transport(ctx);
  ASSERT_TRUE(t.ok());
  auto bad = (*t)->connect(1, 0, Deadline::after(std::chrono::seconds(1)));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("rank 1"), std::string::npos) << bad.status().message();
  auto good = (*t)->connect(2, 3, Deadline::after(std::chrono::seconds(1)));
  ASSERT_TRUE(good.ok());
  EXPECT_EQ((*good)->describe(), "self to rank 2 channel 3");

  ctx.rank = 4;
  EXPECT_FALSE(make_self_transport(ctx).ok());
}

TEST(SelfTransport, CopiesEverySize) {
  auto c = connect_self();
  ASSERT_NE(c, nullptr);
  const size_t sizes[] = {0, 1, 7, 8, 63, 64, 65, 4095, (size_t{1} << 20) + 3};
  unsigned seed = 0;
  for (size_t n : sizes) {
    SCOPED_TRACE(n);
    auto src = pattern(n, ++seed);
    std::vector<uint8_t> dst(n + 1, 0xee);
    auto st = c->post_send(src.data(), n);
    ASSERT_TRUE(st.ok());
    auto rt = c->post_recv(RecvSink{dst.data()}, n);
    ASSERT_TRUE(rt.ok());
    EXPECT_EQ(*st, c->sends_done() + 1);
    EXPECT_FALSE(c->idle());
    ASSERT_TRUE(c->progress().ok());
    EXPECT_EQ(c->sends_done(), *st);
    EXPECT_EQ(c->recvs_done(), *rt);
    EXPECT_TRUE(c->idle());
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
    EXPECT_EQ(dst[n], 0xee);  // nothing past the end
  }
}

TEST(SelfTransport, MatchesInOrderWhicheverSideIsPostedFirst) {
  auto c = connect_self();
  ASSERT_NE(c, nullptr);
  const size_t kMessages = 1000;
  std::vector<std::vector<uint8_t>> src, dst;
  for (size_t i = 0; i < kMessages; ++i) {
    src.push_back(pattern(i % 37, static_cast<unsigned>(i)));
    dst.emplace_back(i % 37, 0);
  }
  // Receives first for the first half, sends first for the second; progress in between.
  for (size_t i = 0; i < kMessages / 2; ++i) ASSERT_TRUE(c->post_recv({dst[i].data()}, dst[i].size()).ok());
  ASSERT_TRUE(c->progress().ok());
  EXPECT_EQ(c->recvs_done(), 0u);
  for (size_t i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(c->post_send(src[i].data(), src[i].size()).ok());
    if (i % 100 == 0) {
      ASSERT_TRUE(c->progress().ok());
    }
  }
  for (size_t i = kMessages / 2; i < kMessages; ++i) ASSERT_TRUE(c->post_recv({dst[i].data()}, dst[i].size()).ok());
  ASSERT_TRUE(c->progress().ok());
  EXPECT_EQ(c->sends_done(), kMessages);
  EXPECT_EQ(c->recvs_done(), kMessages);
  for (size_t i = 0; i < kMessages; ++i) EXPECT_EQ(src[i], dst[i]) << "message " << i;
}

TEST(SelfTransport, ZeroByteMessagesKeepTheStreamInStep) {
  auto c = connect_self();
  ASSERT_NE(c, nullptr);
  uint32_t a = 0x11223344, b = 0;
  ASSERT_TRUE(c->post_send(nullptr, 0).ok());
  ASSERT_TRUE(c->post_send(&a, sizeof(a)).ok());
  ASSERT_TRUE(c->post_recv(RecvSink{}, 0).ok());
  ASSERT_TRUE(c->post_recv(RecvSink{&b}, sizeof(b)).ok());
  ASSERT_TRUE(c->progress().ok());
  EXPECT_EQ(c->recvs_done(), 2u);
  EXPECT_EQ(b, a);
}

struct SumCtx {
  int32_t* dst;
  size_t calls = 0;
  size_t next_offset = 0;
};
void sum_int32(void* ctx, size_t offset, const void* src, size_t bytes) {
  auto* s = static_cast<SumCtx*>(ctx);
  ++s->calls;
  EXPECT_EQ(offset, s->next_offset);
  s->next_offset = offset + bytes;
  const auto* in = static_cast<const int32_t*>(src);
  for (size_t i = 0; i < bytes / 4; ++i) s->dst[offset / 4 + i] += in[i];
}

TEST(SelfTransport, ReduceSinkGetsTheWholeMessage) {
  auto c = connect_self();
  ASSERT_NE(c, nullptr);
  const size_t n = (size_t{1} << 18) + 3;
  std::vector<int32_t> a(n), b(n);
  std::iota(a.begin(), a.end(), 1);
  std::iota(b.begin(), b.end(), -5);
  SumCtx ctx{b.data()};
  ASSERT_TRUE(c->post_send(a.data(), n * 4).ok());
  ASSERT_TRUE(c->post_recv(RecvSink{b.data(), sum_int32, &ctx}, n * 4).ok());
  ASSERT_TRUE(c->progress().ok());
  EXPECT_EQ(ctx.calls, 1u);
  EXPECT_EQ(ctx.next_offset, n * 4);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], static_cast<int32_t>(2 * i - 4)) << i;
}

TEST(SelfTransport, InPlaceAndOverlappingCopies) {
  auto c = connect_self();
  ASSERT_NE(c, nullptr);
  auto buf = pattern(100, 3);
  auto expect = buf;
  ASSERT_TRUE(c->post_send(buf.data(), 100).ok());
  ASSERT_TRUE(c->post_recv({buf.data()}, 100).ok());
  ASSERT_TRUE(c->progress().ok());
  EXPECT_EQ(buf, expect);
  ASSERT_TRUE(c->post_send(buf.data(), 60).ok());
  ASSERT_TRUE(c->post_recv({buf.data() + 20}, 60).ok());
  ASSERT_TRUE(c->progress().ok());
  EXPECT_TRUE(std::equal(expect.begin(), expect.begin() + 60, buf.begin() + 20));
}

TEST(SelfTransport, SizeMismatchIsAnInternalError) {
  auto c = connect_self();
  ASSERT_NE(c, nullptr);
  char a[8] = {}, b[8];
  ASSERT_TRUE(c->post_send(a, 8).ok());
  ASSERT_TRUE(c->post_recv({b}, 4).ok());
  Status s = c->progress();
  EXPECT_EQ(s.code(), StatusCode::kInternalError);
  EXPECT_NE(s.message().find("8 bytes"), std::string::npos) << s.message();
  EXPECT_FALSE(c->progress().ok());  // sticky
  EXPECT_FALSE(c->post_send(a, 8).ok());
}

TEST(SelfTransport, NullBuffersAreRejected) {
  auto c = connect_self();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->post_send(nullptr, 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c->post_recv(RecvSink{}, 4).status().code(), StatusCode::kInvalidArgument);
}

TEST(SelfTransport, AbortFailsLaterCalls) {
  auto c = connect_self();
  ASSERT_NE(c, nullptr);
  char a = 0;
  c->abort("test says stop");
  c->abort("second reason is ignored");
  auto r = c->post_send(&a, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("test says stop"), std::string::npos);
  EXPECT_FALSE(c->post_recv({&a}, 1).ok());
  EXPECT_FALSE(c->progress().ok());
}

}  // namespace
}  // namespace weft::transport
