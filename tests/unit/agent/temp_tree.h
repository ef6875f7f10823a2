// A directory tree under /tmp for the agent's tests (a fake /proc, /sys or
// config), removed with the object.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace vramd::agent::testing {

class TempTree {
 public:
  TempTree() {
    std::string t = (std::filesystem::temp_directory_path() / "vramd-agent-test-XXXXXX").string();
    root_ = mkdtemp(t.data());
  }
  ~TempTree() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  const std::string& root() const { return root_; }
  std::string Path(const std::string& rel) const { return root_ + "/" + rel; }

  // Writes `text` at root/rel (parents created); replaces an existing file
  // through a rename, so a reader sees the old or the new file whole.
  std::string Write(const std::string& rel, const std::string& text) const {
    std::filesystem::path p = Path(rel);
    std::filesystem::create_directories(p.parent_path());
    std::string tmp = p.string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << text;
    }
    std::filesystem::rename(tmp, p);
    return p.string();
  }
  void Link(const std::string& rel, const std::string& target) const {
    std::filesystem::path p = Path(rel);
    std::filesystem::create_directories(p.parent_path());
    std::filesystem::create_symlink(target, p);
  }

 private:
  std::string root_;
};

}  // namespace vramd::agent::testing
