#include "kube/watch_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace vramd::kube {
namespace {

std::vector<std::string> FeedAll(LineSplitter& s, const std::vector<std::string>& chunks) {
  std::vector<std::string> lines;
  auto on_line = [&](std::string_view l) {
    lines.emplace_back(l);
    return true;
  };
  for (const auto& c : chunks) EXPECT_TRUE(s.Feed(c, on_line));
  EXPECT_TRUE(s.Finish(on_line));
  return lines;
}

TEST(LineSplitter, JoinsLinesSplitAcrossChunks) {
  LineSplitter s;
  EXPECT_EQ(FeedAll(s, {"{\"a\"", ":1}\n{\"b\":2}\n{\"c", "\":3}\n"}),
            (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "{\"c\":3}"}));
}

TEST(LineSplitter, ByteByByteGivesTheSameLines) {
  const std::string stream = "one\ntwo\r\n\nthree\n";
  std::vector<std::string> chunks;
  for (char c : stream) chunks.emplace_back(1, c);
  LineSplitter s;
  EXPECT_EQ(FeedAll(s, chunks), (std::vector<std::string>{"one", "two", "three"}));
}

TEST(LineSplitter, FinishDeliversAnUnterminatedLastLine) {
  LineSplitter s;
  EXPECT_EQ(FeedAll(s, {"a\nb"}), (std::vector<std::string>{"a", "b"}));
}

TEST(LineSplitter, StopsWhenTheCallbackSaysSo) {
  LineSplitter s;
  int calls = 0;
  EXPECT_FALSE(s.Feed("a\nb\nc\n", [&](std::string_view) { return ++calls < 2; }));
  EXPECT_EQ(calls, 2);
}

TEST(LineSplitter, OverlongLineIsAnError) {
  LineSplitter s(8);
  EXPECT_TRUE(s.Feed("12345", [](std::string_view) { return true; }));
  EXPECT_FALSE(s.Feed("67890", [](std::string_view) { return true; }));
  EXPECT_TRUE(s.overflowed());
}

TEST(WatchLine, AddedPodIsDecoded) {
  std::vector<WatchEvent<PodInfo>> got;
  Status st = HandlePodWatchLine(
      R"({"type":"ADDED","object":{"metadata":{"name":"p","namespace":"ns","resourceVersion":"10"},
          "spec":{"containers":[{"resources":{"limits":{"vramd.io/vram":"1Gi"}}}]}}})",
      "vramd.io/vram", [&](const WatchEvent<PodInfo>& e) { got.push_back(e); });
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].type, WatchEventType::kAdded);
  EXPECT_EQ(got[0].object.name, "p");
  EXPECT_EQ(got[0].object.resource_version, "10");
  EXPECT_EQ(got[0].object.spec.containers.at(0).limit, "1Gi");
}

TEST(WatchLine, BookmarkCarriesOnlyTheResourceVersion) {
  std::vector<WatchEvent<PodInfo>> got;
  Status st = HandlePodWatchLine(
      R"({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12746","creationTimestamp":null},"spec":{"containers":null},"status":{}}})",
      "vramd.io/vram", [&](const WatchEvent<PodInfo>& e) { got.push_back(e); });
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].type, WatchEventType::kBookmark);
  EXPECT_EQ(got[0].object.resource_version, "12746");
}

TEST(WatchLine, ErrorEvent410IsConflictGone) {
  Status st = HandleNodeWatchLine(
      R"J({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (200)","reason":"Expired","code":410}})J",
      [](const WatchEvent<NodeInfo>&) { ADD_FAILURE() << "no event expected"; });
  EXPECT_EQ(st.code(), Code::kConflict);
  EXPECT_EQ(st.message().rfind("410 Gone", 0), 0u) << st.message();
  EXPECT_NE(st.message().find("too old resource version"), std::string::npos);
}

TEST(WatchLine, OtherErrorEventsAreUnavailable) {
  Status st = HandleNodeWatchLine(R"({"type":"ERROR","object":{"code":500,"message":"etcd is sad"}})",
                                  [](const WatchEvent<NodeInfo>&) {});
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find("etcd is sad"), std::string::npos);
}

TEST(WatchLine, UndecodableObjectIsSkipped) {
  int calls = 0;
  Status st = HandleNodeWatchLine(R"({"type":"MODIFIED","object":{"metadata":{"name":7}}})",
                                  [&](const WatchEvent<NodeInfo>&) { ++calls; });
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(calls, 0);
}

TEST(WatchLine, GarbageIsInternal) {
  auto ignore = [](const WatchEvent<NodeInfo>&) {};
  EXPECT_EQ(HandleNodeWatchLine("not json", ignore).code(), Code::kInternal);
  EXPECT_EQ(HandleNodeWatchLine(R"({"object":{}})", ignore).code(), Code::kInternal);
  EXPECT_EQ(HandleNodeWatchLine(R"([1])", ignore).code(), Code::kInternal);
}

}  // namespace
}  // namespace vramd::kube
