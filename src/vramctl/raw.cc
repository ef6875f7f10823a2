// `vramctl raw GET|POST PATH [-f FILE]`: one request to any path of vramd,
// with vramctl's transport (TLS flags, client certificate, token) and its
// error descriptions; the body as received on stdout. For what no command
// covers yet, and for checking what an endpoint answers a given client (the
// real-node test uses it from a pod to show the extender verbs are refused).
#include <fstream>
#include <iostream>
#include <sstream>

#include "client.h"
#include "commands.h"
#include "output.h"

namespace vramctl {

int RawCommand(const Context& c, const std::vector<std::string>& args) {
  const std::string usage = "usage: " + c.program + " raw GET PATH | raw POST PATH -f FILE (- for stdin)";
  if (args.size() < 2 || (args[0] != "GET" && args[0] != "POST") || args[1].empty() || args[1][0] != '/') {
    return Fail(usage, 2);
  }
  const bool post = args[0] == "POST";
  if (post ? !(args.size() == 4 && args[2] == "-f") : args.size() != 2) return Fail(usage, 2);
  Client cli(c.target);
  Answer a;
  if (post) {
    std::stringstream body;
    if (args[3] == "-") {
      body << std::cin.rdbuf();
    } else {
      std::ifstream in(args[3]);
      if (!in) return Fail("cannot read " + args[3]);
      body << in.rdbuf();
    }
    a = cli.PostText(args[1], body.str(), "application/json");
  } else {
    a = cli.Get(args[1]);
  }
  if (!a.reached) return Fail(a.error);
  std::cout << a.text;
  if (!a.text.empty() && a.text.back() != '\n') std::cout << "\n";
  if (a.status < 200 || a.status >= 300) return Fail(Describe(a));
  return 0;
}

}  // namespace vramctl
