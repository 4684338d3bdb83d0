#include "transport/pki.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>

#include "test_pki.h"

namespace ballot::transport {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::TestPki;

mode_t mode_of(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return st.st_mode & 0777;
}

bool mentions(const Error& error, const fs::path& path) {
  return error.message.find(path.string()) != std::string::npos;
}

TEST(Pki, InitIssueLoad) {
  TestPki pki(2);
  EXPECT_EQ(mode_of(ca_key_path(pki.dir)), 0600u);
  EXPECT_EQ(mode_of(node_key_path(pki.dir, 1)), 0600u);
  EXPECT_EQ(mode_of(pki.dir), 0700u);
  const Credentials server = pki.credentials(0);
  EXPECT_EQ(server.node, 0u);
  EXPECT_EQ(server.role, Role::kServer);
  const Credentials node = pki.credentials(2);
  EXPECT_EQ(node.node, 2u);
  EXPECT_EQ(node.role, Role::kNode);
  EXPECT_FALSE(node.certificate_der.empty());
  EXPECT_EQ(node.ca_certificate_der, server.ca_certificate_der);

  const Registry registry = pki.registry();
  ASSERT_EQ(registry.size(), 3u);
  ASSERT_NE(registry.find(2), nullptr);
  EXPECT_EQ(registry.find(2)->key, node.key.verify_key());  // pinned: the exact key
  EXPECT_EQ(registry.find(0)->role, Role::kServer);
  EXPECT_EQ(registry.find(7), nullptr);
}

TEST(Pki, ShowDescribesCertificates) {
  TestPki pki(1);
  auto infos = list_certificates(pki.dir);
  ASSERT_TRUE(infos.ok()) << infos.error().to_string();
  ASSERT_EQ(infos->size(), 3u);
  EXPECT_TRUE((*infos)[0].is_ca);
  EXPECT_FALSE((*infos)[0].node.has_value());
  EXPECT_FALSE((*infos)[1].is_ca);
  EXPECT_EQ((*infos)[1].node, 0u);
  EXPECT_EQ((*infos)[1].role, Role::kServer);
  EXPECT_EQ((*infos)[2].node, 1u);
  EXPECT_EQ((*infos)[2].public_key, pki.credentials(1).key.verify_key().bytes());
  EXPECT_EQ((*infos)[2].fingerprint.size(), 64u);
  const std::string text = format_certificate((*infos)[2]);
  EXPECT_NE(text.find("node 1"), std::string::npos) << text;
  EXPECT_NE(text.find("ballot-node-1"), std::string::npos) << text;
}

TEST(Pki, NeverOverwrites) {
  TestPki pki(1);
  auto again = init_ca(pki.dir);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(mentions(again.error(), ca_key_path(pki.dir))) << again.error().to_string();
  auto reissue = issue_node(pki.dir, 1, Role::kNode);
  ASSERT_FALSE(reissue.ok());
  EXPECT_TRUE(mentions(reissue.error(), node_key_path(pki.dir, 1))) << reissue.error().to_string();
}

// A write cut short leaves nothing behind: no key without its certificate, no torn file, no
// temporary file, so the same command run again succeeds (a file size limit plays the full disk).
TEST(Pki, AnIssueCutShortLeavesNothingAndCanBeRunAgain) {
  TestPki pki(0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 300;  // an Ed25519 key's PEM fits, its certificate does not
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  auto cut = issue_node(pki.dir, 1, Role::kNode);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  std::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.error().code, ErrorCode::kIo);
  EXPECT_TRUE(mentions(cut.error(), node_cert_path(pki.dir, 1))) << cut.error().to_string();
  for (const auto& entry : fs::directory_iterator(pki.dir)) {
    const auto name = entry.path().filename().string();
    EXPECT_TRUE(name == "ca.key" || name == "ca.crt" || name == "node-0.key" || name == "node-0.crt")
        << name << " was left behind";
  }
  auto again = issue_node(pki.dir, 1, Role::kNode);
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(mode_of(again->key), 0600u);
  EXPECT_EQ(mode_of(again->certificate), 0644u);
  EXPECT_TRUE(load_credentials(pki.dir, 1).ok());
}

TEST(Pki, MissingFileIsNamed) {
  TempDir tmp;
  auto issued = issue_node(tmp.path(), 1, Role::kNode);
  ASSERT_FALSE(issued.ok());
  EXPECT_EQ(issued.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(mentions(issued.error(), ca_cert_path(tmp.path()))) << issued.error().to_string();

  TestPki pki(1);
  auto missing = load_credentials(pki.dir, 9);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(mentions(missing.error(), node_cert_path(pki.dir, 9))) << missing.error().to_string();
}

// A key that cannot be read: a directory where the file belongs (which root cannot read either),
// and, for other users, a file of mode 0.
TEST(Pki, UnreadableFileIsNamed) {
  TestPki pki(1);
  fs::remove(node_key_path(pki.dir, 1));
  fs::create_directory(node_key_path(pki.dir, 1));
  fs::permissions(node_key_path(pki.dir, 1), fs::perms::owner_all);  // not refused for its mode first
  auto directory = load_credentials(pki.dir, 1);
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.error().code, ErrorCode::kIo);
  EXPECT_TRUE(mentions(directory.error(), node_key_path(pki.dir, 1))) << directory.error().to_string();
  if (::geteuid() == 0) return;  // root reads files regardless of their mode
  TestPki again(1);
  ASSERT_EQ(::chmod(node_key_path(again.dir, 1).c_str(), 0), 0);
  auto loaded = load_credentials(again.dir, 1);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().code, ErrorCode::kIo);
  EXPECT_TRUE(mentions(loaded.error(), node_key_path(again.dir, 1))) << loaded.error().to_string();
}

TEST(Pki, GarbageFileIsNamed) {
  TestPki pki(1);
  fs::remove(node_cert_path(pki.dir, 1));
  std::ofstream(node_cert_path(pki.dir, 1)) << "not a certificate\n";
  auto loaded = load_credentials(pki.dir, 1);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().code, ErrorCode::kMalformed);
  EXPECT_TRUE(mentions(loaded.error(), node_cert_path(pki.dir, 1))) << loaded.error().to_string();
}

TEST(Pki, AFifoOrAHugeFileIsNamedNotReadForever) {
  TestPki pki(2);
  fs::remove(node_cert_path(pki.dir, 1));
  ASSERT_EQ(::mkfifo(node_cert_path(pki.dir, 1).c_str(), 0600), 0);  // no writer: a read would block
  auto fifo = load_credentials(pki.dir, 1);
  ASSERT_FALSE(fifo.ok());
  EXPECT_TRUE(mentions(fifo.error(), node_cert_path(pki.dir, 1))) << fifo.error().to_string();
  fs::remove(node_cert_path(pki.dir, 2));
  std::ofstream(node_cert_path(pki.dir, 2)).close();
  fs::resize_file(node_cert_path(pki.dir, 2), std::uintmax_t{4} << 30);  // sparse: 4 GiB read as nothing
  auto huge = load_credentials(pki.dir, 2);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().code, ErrorCode::kLimitExceeded);
  EXPECT_TRUE(mentions(huge.error(), node_cert_path(pki.dir, 2))) << huge.error().to_string();
}

TEST(Pki, ExpiredCertificateIsNamed) {
  TestPki pki(0);
  const auto now = std::chrono::system_clock::now();
  IssueOptions options;
  options.not_before = now - std::chrono::hours(48);
  options.not_after = now - std::chrono::hours(24);
  ASSERT_TRUE(issue_node(pki.dir, 5, Role::kNode, options).ok());
  auto loaded = load_credentials(pki.dir, 5);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().code, ErrorCode::kAuthentication);
  EXPECT_NE(loaded.error().message.find("expired"), std::string::npos) << loaded.error().to_string();
  EXPECT_TRUE(mentions(loaded.error(), node_cert_path(pki.dir, 5)));
  auto registry = load_registry(pki.dir);
  ASSERT_FALSE(registry.ok());
  EXPECT_TRUE(mentions(registry.error(), node_cert_path(pki.dir, 5))) << registry.error().to_string();
  auto info = read_certificate(node_cert_path(pki.dir, 5));
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->expired);
}

TEST(Pki, MismatchedKeyIsNamed) {
  TestPki pki(2);
  fs::remove(node_key_path(pki.dir, 1));
  fs::copy_file(node_key_path(pki.dir, 2), node_key_path(pki.dir, 1));
  auto loaded = load_credentials(pki.dir, 1);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().code, ErrorCode::kAuthentication);
  EXPECT_TRUE(mentions(loaded.error(), node_key_path(pki.dir, 1))) << loaded.error().to_string();
}

TEST(Pki, CertificateOfAnotherCaIsRefused) {
  TestPki ours(1, "ours");
  TestPki theirs(1, "theirs");
  fs::remove(node_cert_path(ours.dir, 1));
  fs::remove(node_key_path(ours.dir, 1));
  fs::copy_file(node_cert_path(theirs.dir, 1), node_cert_path(ours.dir, 1));
  fs::copy_file(node_key_path(theirs.dir, 1), node_key_path(ours.dir, 1));
  auto loaded = load_credentials(ours.dir, 1);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().code, ErrorCode::kAuthentication);
  EXPECT_NE(loaded.error().message.find("does not verify against CA"), std::string::npos) << loaded.error().to_string();
  EXPECT_FALSE(load_registry(ours.dir).ok());
}

TEST(Pki, ExplicitFilesAndRoleParsing) {
  TestPki pki(1);
  auto loaded = load_credentials(ca_cert_path(pki.dir), node_cert_path(pki.dir, 1), node_key_path(pki.dir, 1));
  ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
  EXPECT_EQ(loaded->node, 1u);
  EXPECT_EQ(parse_role("worker").value(), Role::kNode);
  EXPECT_EQ(parse_role("server").value(), Role::kServer);
  EXPECT_FALSE(parse_role("admin").ok());
}

}  // namespace
}  // namespace ballot::transport
