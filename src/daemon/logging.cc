#include "daemon/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "vramd/http/server.h"
#include "vramd/json_string.h"

namespace vramd::daemon {

namespace {

// %* : the message as a JSON string (quoted).
class JsonMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    std::string e;
    AppendJsonString(std::string_view(msg.payload.data(), msg.payload.size()), &e);
    dest.append(e.data(), e.data() + e.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonMessage>(); }
};

// %& : ,"request_id":"..." when the thread serves a request (JSON form).
class JsonRequestId final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    const std::string& id = http::CurrentRequestId();
    if (id.empty()) return;
    std::string s = ",\"request_id\":";
    AppendJsonString(id, &s);
    dest.append(s.data(), s.data() + s.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonRequestId>(); }
};

// %@ : " [req ID]" when the thread serves a request (text form).
class TextRequestId final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    const std::string& id = http::CurrentRequestId();
    if (id.empty()) return;
    std::string s = " [req " + id + "]";
    dest.append(s.data(), s.data() + s.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<TextRequestId>(); }
};

}  // namespace

void SetupLogging(const std::string& level, bool json) {
  auto logger = spdlog::stderr_logger_mt("vramd");
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  if (json) {
    formatter->add_flag<JsonMessage>('*').add_flag<JsonRequestId>('&').set_pattern(
        R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","msg":%*%&})");
  } else {
    formatter->add_flag<TextRequestId>('@').set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$%@ %v");
  }
  logger->set_formatter(std::move(formatter));
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::flush_on(spdlog::level::info);
}

}  // namespace vramd::daemon
