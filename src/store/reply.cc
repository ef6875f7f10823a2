// Replies and RESP (store/reply.h).
#include "store/reply.h"

#include <algorithm>
#include <charconv>
#include <new>

namespace vramd::store {
namespace {

// Replies are built straight into Reply trees by hiredis's reader, so there
// is no redisReply tree to copy from: a child is constructed in place in its
// parent's `elements`, which CreateArray sized beforehand. hiredis frees only
// roots (freeObject), and only roots are allocated with new.
Reply* ReplySlot(const redisReadTask* task) {
  if (task->parent != nullptr) {
    auto* parent = static_cast<Reply*>(task->parent->obj);
    return &parent->elements[static_cast<size_t>(task->idx)];
  }
  return new (std::nothrow) Reply();
}

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  Reply* r = ReplySlot(task);
  if (r == nullptr) return nullptr;
  r->type = task->type == REDIS_REPLY_ERROR    ? Reply::Type::kError
            : task->type == REDIS_REPLY_STATUS ? Reply::Type::kStatus
                                               : Reply::Type::kString;
  try {
    r->str.assign(str, len);
  } catch (...) {  // bad_alloc must not unwind through hiredis
    if (task->parent == nullptr) delete r;
    return nullptr;
  }
  return r;
}

void* CreateArray(const redisReadTask* task, int n) {
  Reply* r = ReplySlot(task);
  if (r == nullptr) return nullptr;
  r->type = Reply::Type::kArray;
  try {
    r->elements.resize(static_cast<size_t>(std::max(n, 0)));
  } catch (...) {
    if (task->parent == nullptr) delete r;
    return nullptr;
  }
  return r;
}

void* CreateInteger(const redisReadTask* task, long long v) {  // NOLINT: hiredis's type
  Reply* r = ReplySlot(task);
  if (r == nullptr) return nullptr;
  r->type = Reply::Type::kInteger;
  r->integer = v;
  return r;
}

void* CreateNil(const redisReadTask* task) {
  Reply* r = ReplySlot(task);
  if (r != nullptr) r->type = Reply::Type::kNil;
  return r;
}

}  // namespace

void FreeReply(void* r) { delete static_cast<Reply*>(r); }

redisReplyObjectFunctions kReplyFunctions = {CreateString, CreateArray, CreateInteger, CreateNil,
                                             FreeReply};

bool IsReadonly(const Reply& r) { return r.is_error() && r.str.starts_with("READONLY"); }

void AppendResp(std::string* out, const std::vector<std::string>& argv) {
  char num[24];
  auto append_len = [&](char tag, size_t n) {
    out->push_back(tag);
    auto [end, ec] = std::to_chars(num, num + sizeof(num), n);
    out->append(num, end);
    out->append("\r\n", 2);
  };
  append_len('*', argv.size());
  for (const auto& a : argv) {
    append_len('$', a.size());
    out->append(a);
    out->append("\r\n", 2);
  }
}

ReplyPtr Run(redisContext* c, const std::vector<std::string>& argv) {
  ArgvView v(argv);
  return ReplyPtr(static_cast<Reply*>(redisCommandArgv(c, v.argc(), v.argv(), v.lens())));
}

}  // namespace vramd::store
