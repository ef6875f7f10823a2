// The pooled client's commands: one command, pipelines, scripts (EVALSHA
// with the NOSCRIPT fallback) and WAIT after replicated writes. The pool,
// the route through Sentinel and pub/sub are in pool.cc, sentinel_route.cc
// and subscriber.cc (store/pooled_client.h has the whole picture); replies
// and RESP in reply.cc; URLs in url.cc.
#include <openssl/sha.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "store/pooled_client.h"
#include "store/reply.h"
#include "vramd/store/valkey_client.h"

namespace vramd::store {

Result<Reply> PooledValkeyClient::Command(const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("valkey: empty command");
  auto lease = Borrow();
  if (!lease.ok()) return lease.status();
  ContextPtr c = std::move(lease).value();
  ReplyPtr r = Run(c.get(), argv);
  if (!r) return Broken(std::move(c), argv[0]);
  Done(std::move(c), *r);
  return std::move(*r);
}

Result<std::vector<Reply>> PooledValkeyClient::Pipeline(const std::vector<std::vector<std::string>>& cmds) {
  std::vector<Reply> out;
  out.reserve(cmds.size());
  Status s = PipelineEach(cmds, [&out](size_t, Reply& r) { out.push_back(std::move(r)); });
  if (!s.ok()) return s;
  return out;
}

Status PooledValkeyClient::PipelineEach(const std::vector<std::vector<std::string>>& cmds,
                                        const std::function<void(size_t, Reply&)>& each) {
  if (cmds.empty()) return Status::Ok();
  // The whole batch is encoded once (RESP multi-bulk) and handed to
  // hiredis as one preformatted write.
  size_t size = 0;
  for (const auto& cmd : cmds) {
    if (cmd.empty()) return InvalidArgument("valkey: empty command in pipeline");
    size += 16;
    for (const auto& a : cmd) size += a.size() + 16;
  }
  std::string resp;
  resp.reserve(size);
  for (const auto& cmd : cmds) AppendResp(&resp, cmd);

  auto lease = Borrow();
  if (!lease.ok()) return lease.status();
  ContextPtr c = std::move(lease).value();
  if (redisAppendFormattedCommand(c.get(), resp.data(), resp.size()) != REDIS_OK) {
    return Broken(std::move(c), "pipeline");
  }
  bool readonly = false;
  for (size_t i = 0; i < cmds.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(c.get(), &raw) != REDIS_OK || raw == nullptr) {
      FreeReply(raw);
      return Broken(std::move(c), "pipeline");
    }
    ReplyPtr r(static_cast<Reply*>(raw));
    readonly = readonly || IsReadonly(*r);
    try {
      each(i, *r);
    } catch (...) {
      // The connection still has unread replies: it cannot be reused.
      (void)Broken(std::move(c), "pipeline callback");
      throw;
    }
  }
  if (readonly && sentinel_) {
    Demoted(std::move(c));
  } else {
    GiveBack(std::move(c));
  }
  return Status::Ok();
}

Result<Reply> PooledValkeyClient::Eval(const Script& script, const std::vector<std::string>& keys,
                                       const std::vector<std::string>& args) {
  auto lease = Borrow();
  if (!lease.ok()) return lease.status();
  ContextPtr c = std::move(lease).value();
  auto r = RunScript(&c, script, keys, args);
  if (!r.ok()) return r.status();
  Done(std::move(c), *r);
  return r;
}

Result<ValkeyClient::ReplicatedReply> PooledValkeyClient::EvalReplicated(const Script& script,
                                                                         const std::vector<std::string>& keys,
                                                                         const std::vector<std::string>& args) {
  auto lease = Borrow();
  if (!lease.ok()) return lease.status();
  ContextPtr c = std::move(lease).value();
  auto r = RunScript(&c, script, keys, args);
  if (!r.ok()) return r.status();
  ReplicatedReply out{std::move(r).value(), Status::Ok()};
  if (opts_.min_replicas_ack <= 0 || out.reply.is_error()) {
    Done(std::move(c), out.reply);
    return out;
  }
  // WAIT blocks up to wait_timeout on the server: the socket may wait
  // that much longer than for other replies.
  const auto wait = std::max(opts_.wait_timeout, milliseconds(1));
  const std::string need = std::to_string(opts_.min_replicas_ack);
  redisSetTimeout(c.get(), ToTimeval(opts_.command_timeout + wait));
  ReplyPtr w = Run(c.get(), {"WAIT", need, std::to_string(wait.count())});
  if (!w) {
    out.replication = Broken(std::move(c), "WAIT");
    return out;
  }
  if (redisSetTimeout(c.get(), ToTimeval(opts_.command_timeout)) != REDIS_OK) {
    out.replication = Broken(std::move(c), "WAIT");
    return out;
  }
  if (w->type == Reply::Type::kInteger && w->integer >= opts_.min_replicas_ack) {
    if (short_of_replicas_.exchange(false)) {
      spdlog::info("valkey {}: writes reach {} replica(s) again", Display(), w->integer);
    }
  } else {
    std::string msg = "valkey " + Display() + ": ";
    msg += w->is_error() ? "WAIT failed: " + w->str
                         : "the write reached " + std::to_string(w->integer) + " of the " + need +
                               " replica(s) valkey.min_replicas_ack asks for within " +
                               std::to_string(wait.count()) + "ms";
    if (!short_of_replicas_.exchange(true)) {
      spdlog::warn("{}", msg);
    } else {
      spdlog::debug("{}", msg);
    }
    out.replication = Unavailable(std::move(msg));
  }
  GiveBack(std::move(c));
  return out;
}

Result<Reply> PooledValkeyClient::RunScript(ContextPtr* c, const Script& script, const std::vector<std::string>& keys,
                                            const std::vector<std::string>& args) {
  std::vector<std::string> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.emplace_back("EVALSHA");
  argv.push_back(script.sha1());
  argv.push_back(std::to_string(keys.size()));
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());

  ReplyPtr r = Run(c->get(), argv);
  if (!r) return Broken(std::move(*c), "EVALSHA");
  if (r->is_error() && r->str.starts_with("NOSCRIPT")) {
    // The server does not have the script cached (first use, restart,
    // SCRIPT FLUSH): send the source, which also caches it.
    argv[0] = "EVAL";
    argv[1] = script.source();
    r = Run(c->get(), argv);
    if (!r) return Broken(std::move(*c), "EVAL");
  }
  return std::move(*r);
}

void PooledValkeyClient::Done(ContextPtr c, const Reply& r) {
  if (sentinel_ && IsReadonly(r)) {
    Demoted(std::move(c));
  } else {
    GiveBack(std::move(c));
  }
}

Script::Script(std::string source) : source_(std::move(source)) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(source_.data()), source_.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  sha1_.reserve(2 * SHA_DIGEST_LENGTH);
  for (unsigned char b : digest) {
    sha1_.push_back(kHex[b >> 4]);
    sha1_.push_back(kHex[b & 0xf]);
  }
}

std::shared_ptr<ValkeyClient> NewValkeyClient(const ValkeyOptions& opts) {
  if (!IsSentinelUrl(opts.url)) {
    return std::make_shared<PooledValkeyClient>(opts, ParseValkeyUrl(opts.url));
  }
  Result<SentinelUrl> url = ParseSentinelUrl(opts.url);
  if (!url.ok()) return std::make_shared<PooledValkeyClient>(opts, url.status());
  ValkeyEndpoint primary;  // credentials and database; the address comes from the sentinels
  primary.username = url->username;
  primary.password = url->password;
  primary.db = url->db;
  SentinelOptions so;
  so.sentinels = url->sentinels;
  so.master_name = url->master_name;
  so.username = opts.sentinel_username;
  so.password = opts.sentinel_password;
  so.timeout = opts.connect_timeout;
  return std::make_shared<PooledValkeyClient>(opts, std::move(primary),
                                              std::make_unique<SentinelResolver>(std::move(so)));
}

}  // namespace vramd::store
