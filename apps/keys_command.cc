// `ballot keys init|issue|show`: the cluster PKI (transport/pki.h).
#include <cstdio>
#include <filesystem>

#include "apps/commands.h"
#include "transport/pki.h"

namespace ballot::apps {
namespace {
int fail(const Error& error) {
  std::fprintf(stderr, "ballot keys: %s\n", error.to_string().c_str());
  return 1;
}
}  // namespace

int run_keys_init(const std::string& dir, const std::string& ca_dir) {
  if (auto status = transport::init_ca(ca_dir, dir); !status.ok()) return fail(status.error());
  std::printf(
      "created %s and %s (keep %s with the operator, off the training machines)\n"
      "and %s (every machine gets it)\n",
      transport::ca_key_path(ca_dir).c_str(), transport::ca_cert_path(ca_dir).c_str(), ca_dir.c_str(),
      transport::ca_cert_path(dir).c_str());
  return 0;
}

int run_keys_issue(const std::string& dir, const std::string& ca_dir, std::uint32_t node,
                   const std::string& role_text) {
  auto role = transport::parse_role(role_text);
  if (!role.ok()) return fail(role.error());
  // A cluster's server is id 0 and its nodes 1..n (runtime::kServerId): another pairing gives a
  // certificate no cluster accepts, which would only show as a silent cluster.
  if ((node == 0) != (*role == transport::Role::kServer)) {
    return fail(make_error(ErrorCode::kInvalidArgument, node == 0 ? "id 0 is the server's: issue it with --role server"
                                                                  : "the server is id 0; id " + std::to_string(node) +
                                                                        " is a node's (--role node)"));
  }
  auto files = transport::issue_node(ca_dir, dir, node, *role);
  if (!files.ok()) return fail(files.error());
  std::printf("issued %s and %s\n", files->key.c_str(), files->certificate.c_str());
  return 0;
}

int run_keys_show(const std::string& path) {
  if (std::filesystem::is_directory(path)) {
    auto all = transport::list_certificates(path);
    if (!all.ok()) return fail(all.error());
    for (const auto& info : *all) std::printf("%s\n", transport::format_certificate(info).c_str());
    return 0;
  }
  auto info = transport::read_certificate(path);
  if (!info.ok()) return fail(info.error());
  std::printf("%s\n", transport::format_certificate(*info).c_str());
  return 0;
}

}  // namespace ballot::apps
