// Pure validation of GPU-lock input: owners, nodes, GPU indices, POST bodies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "vramd/gpulock/locks.h"
#include "vramd/http/routes.h"

namespace vramd::gpulock {
namespace {

using ::testing::HasSubstr;
using http::DecodeLockCall;  // the POST bodies are decoded by the routes (src/http/routes/locks.cc)
using http::LockOp;

TEST(LockOwner, AcceptsPodUidSlashInstance) {
  EXPECT_TRUE(ValidateOwner("0b6f2c7e-1a2b-4c3d-8e9f-0123456789ab/trainer-0-1234").ok());
  EXPECT_TRUE(ValidateOwner("local/dev.box:7@x+y").ok());
  EXPECT_EQ(OwnerPod("abc/def"), "abc");
}

TEST(LockOwner, RejectsMalformedOwnersWithAReason) {
  struct Case {
    const char* name;
    std::string owner;
    const char* says;
  };
  std::vector<Case> cases = {
      {"empty", "", "required"},
      {"no slash", "pod", "POD_UID/INSTANCE"},
      {"empty pod", "/inst", "pod UID part"},
      {"empty instance", "pod/", "instance part"},
      {"space", "pod/a b", "instance part"},
      {"second slash", "pod/a/b", "instance part"},
      {"newline", "pod\n/a", "pod UID part"},
      {"pod too long", std::string(129, 'p') + "/a", "pod UID part"},
      {"instance too long", "p/" + std::string(129, 'i'), "instance part"},
  };
  for (const Case& c : cases) {
    Status s = ValidateOwner(c.owner);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.name;
    EXPECT_THAT(s.message(), HasSubstr(c.says)) << c.name;
  }
  EXPECT_TRUE(ValidateOwner(std::string(128, 'p') + "/" + std::string(128, 'i')).ok()) << "the bounds are inclusive";
}

TEST(LockOwner, OnlyKubernetesUidsLookLikePodUids) {
  EXPECT_TRUE(LooksLikePodUid("0b6f2c7e-1a2b-4c3d-8e9f-0123456789ab"));
  EXPECT_TRUE(LooksLikePodUid("0B6F2C7E-1A2B-4C3D-8E9F-0123456789AB"));
  EXPECT_FALSE(LooksLikePodUid("local"));
  EXPECT_FALSE(LooksLikePodUid("0b6f2c7e-1a2b-4c3d-8e9f-0123456789a"));
  EXPECT_FALSE(LooksLikePodUid("0b6f2c7e_1a2b-4c3d-8e9f-0123456789ab"));
  EXPECT_FALSE(LooksLikePodUid("zb6f2c7e-1a2b-4c3d-8e9f-0123456789ab"));
}

TEST(LockTarget, NodesAndGpuIndices) {
  EXPECT_TRUE(ValidateNode("gpu-node-1.example").ok());
  EXPECT_FALSE(ValidateNode("").ok());
  EXPECT_FALSE(ValidateNode("n{1}").ok()) << "braces would break the hash tag";
  EXPECT_FALSE(ValidateNode("n:1").ok());
  EXPECT_FALSE(ValidateNode("n*").ok());
  EXPECT_FALSE(ValidateNode(std::string(254, 'n')).ok());
  EXPECT_EQ(*ParseGpu("0"), 0);
  EXPECT_EQ(*ParseGpu("1023"), 1023);
  for (const char* bad : {"", "-1", "x", "1.5", "1024", "99999", " 1", "0x1"}) {
    EXPECT_EQ(ParseGpu(bad).status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST(LockBody, AcquireWithDefaults) {
  auto c = DecodeLockCall(LockOp::kAcquire, R"({"owner":"p/a"})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->owner, "p/a");
  EXPECT_EQ(c->ttl_ms, 0) << "0: the service default";
  EXPECT_EQ(c->wait_ms, 0);
}

TEST(LockBody, FractionalSecondsBecomeMilliseconds) {
  auto c = DecodeLockCall(LockOp::kAcquire, R"({"owner":"p/a","ttl_seconds":0.3,"wait_seconds":2.5})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->ttl_ms, 300);
  EXPECT_EQ(c->wait_ms, 2500);
}

TEST(LockBody, RejectsBadBodies) {
  struct Case {
    const char* name;
    LockOp op;
    const char* body;
    const char* says;
  };
  std::vector<Case> cases = {
      {"malformed", LockOp::kAcquire, "{", "not valid JSON"},
      {"array", LockOp::kAcquire, "[]", "JSON object"},
      {"missing owner", LockOp::kHeartbeat, "{}", "owner is required"},
      {"owner number", LockOp::kRelease, R"({"owner":1})", "must be a string"},
      {"ttl too small", LockOp::kAcquire, R"({"owner":"p/a","ttl_seconds":0.01})", "ttl_seconds must be from"},
      {"ttl too large", LockOp::kHeartbeat, R"({"owner":"p/a","ttl_seconds":86401})", "ttl_seconds must be from"},
      {"ttl negative", LockOp::kAcquire, R"({"owner":"p/a","ttl_seconds":-5})", "ttl_seconds must be from"},
      {"ttl null", LockOp::kAcquire, R"({"owner":"p/a","ttl_seconds":null})", "number"},
      {"wait too large", LockOp::kAcquire, R"({"owner":"p/a","wait_seconds":1e9})", "wait_seconds must be from"},
      {"wait on heartbeat", LockOp::kHeartbeat, R"({"owner":"p/a","wait_seconds":1})", "unknown field"},
      {"ttl on release", LockOp::kRelease, R"({"owner":"p/a","ttl_seconds":1})", "unknown field"},
      {"typo", LockOp::kAcquire, R"({"owner":"p/a","ttl":60})", "unknown field \"ttl\""},
  };
  for (const Case& c : cases) {
    auto r = DecodeLockCall(c.op, c.body);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << c.name;
    EXPECT_THAT(r.status().message(), HasSubstr(c.says)) << c.name;
  }
}

}  // namespace
}  // namespace vramd::gpulock
