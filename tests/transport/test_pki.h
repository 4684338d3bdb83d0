// Test helpers: a throw-away cluster PKI in a fresh temporary directory, made in-process with the
// OpenSSL API (transport/pki.h), removed when the fixture goes away.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "transport/pki.h"

namespace ballot::transport::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ballot-transport-XXXXXX").string();
    char* made = ::mkdtemp(pattern.data());
    if (made == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A CA in <tmp>/<name> with node 0 as server and nodes 1..nodes as workers.
struct TestPki {
  explicit TestPki(int nodes, const std::string& name = "pki") : dir(tmp.path() / name) {
    auto made = init_ca(dir, CaOptions{name, 30});
    if (!made.ok()) throw std::runtime_error(made.error().to_string());
    issue(0, Role::kServer);
    for (int i = 1; i <= nodes; ++i) issue(static_cast<NodeId>(i), Role::kNode);
  }
  void issue(NodeId id, Role role) {
    auto issued = issue_node(dir, id, role);
    if (!issued.ok()) throw std::runtime_error(issued.error().to_string());
  }
  Credentials credentials(NodeId id) const {
    auto loaded = load_credentials(dir, id);
    if (!loaded.ok()) throw std::runtime_error(loaded.error().to_string());
    return std::move(loaded).value();
  }
  Registry registry() const {
    auto loaded = load_registry(dir);
    if (!loaded.ok()) throw std::runtime_error(loaded.error().to_string());
    return std::move(loaded).value();
  }
  TempDir tmp;
  std::filesystem::path dir;
};

}  // namespace ballot::transport::testing
