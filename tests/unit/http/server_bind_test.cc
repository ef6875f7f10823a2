// The HTTP server's listening socket: a port another listener holds is an
// error at Start, never a silent second listener sharing the port.
#include <gtest/gtest.h>

#include "vramd/http/server.h"
#include "vramd/metrics/registry.h"

namespace vramd::http {
namespace {

TEST(ServerBind, APortAnotherServerHoldsIsRefused) {
  metrics::Registry registry;
  ServerOptions first_opts;
  first_opts.port = 0;
  first_opts.threads = 1;
  Server first(first_opts, &registry);
  ASSERT_TRUE(first.Start().ok());
  ASSERT_GT(first.port(), 0);

  ServerOptions second_opts = first_opts;
  second_opts.port = first.port();
  Server second(second_opts, &registry);
  Status s = second.Start();
  EXPECT_FALSE(s.ok()) << "a second server bound port " << first.port() << " too";
  EXPECT_NE(s.message().find("in use"), std::string::npos) << s.message();
  first.Stop();
}

TEST(ServerBind, APortIsFreeAgainAfterStop) {
  metrics::Registry registry;
  ServerOptions opts;
  opts.port = 0;
  opts.threads = 1;
  int port = 0;
  {
    Server first(opts, &registry);
    ASSERT_TRUE(first.Start().ok());
    port = first.port();
    first.Stop();
  }
  opts.port = port;
  Server again(opts, &registry);
  EXPECT_TRUE(again.Start().ok()) << "port " << port;
  again.Stop();
}

}  // namespace
}  // namespace vramd::http
