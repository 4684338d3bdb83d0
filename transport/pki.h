// The cluster PKI: a cluster CA, one certificate + Ed25519 key per participant, the pinned registry.
//
// Layout (what `ballot keys` manages): the CA directory, which stays with the operator,
//   ca/ca.key  (0600)  the CA's Ed25519 private key   ca/ca.crt  the self-signed CA certificate
// and the key directory, from which each machine receives ca.crt, every node-<id>.crt and its own
// node-<id>.key:
//   keys/ca.crt (a copy)   keys/node-<id>.key (0600)   keys/node-<id>.crt  issued by the CA
// The one-directory forms of init_ca/issue_node (CA and nodes together) are for throw-away PKIs
// inside one process, e.g. tests. A private key that group or others may read is refused when
// loaded (kAuthentication, the message says how to fix it), as ssh refuses one.
// A node certificate carries its identity twice: subject CN "ballot-<role>-<id>" for people, and
// exactly one subjectAltName URI "ballot://<role>/<id>" that the code parses. The certificate's
// Ed25519 key is also the node's envelope-signing key (one key per node; TLS 1.3 supports it).
// Everything is made with the OpenSSL 3 API; no external program runs.
//
// Errors name the file involved: a missing file is kNotFound, an unreadable or unwritable one kIo,
// a file that does not parse kMalformed, an expired certificate, one not issued by the CA or a key
// that does not match its certificate kAuthentication. Existing files are never overwritten.
//
// Thread-safety: the functions are reentrant; Credentials is an immutable value.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "transport/crypto.h"
#include "transport/identity.h"

namespace ballot::transport {

struct CaOptions {
  std::string cluster_name = "ballot";  // goes into the CA's subject
  int valid_days = 3650;
};

struct IssueOptions {
  int valid_days = 365;
  // Explicit validity window (both or neither); overrides valid_days. For rotation and tests.
  std::optional<std::chrono::system_clock::time_point> not_before;
  std::optional<std::chrono::system_clock::time_point> not_after;
};

std::filesystem::path ca_key_path(const std::filesystem::path& dir);
std::filesystem::path ca_cert_path(const std::filesystem::path& dir);
std::filesystem::path node_key_path(const std::filesystem::path& dir, NodeId node);
std::filesystem::path node_cert_path(const std::filesystem::path& dir, NodeId node);

// `ballot keys init`: creates `dir` (0700) if needed and writes ca.key (0600) and ca.crt.
// Fails (kInvalidArgument) if either file exists.
Status init_ca(const std::filesystem::path& dir, const CaOptions& options = {});
// The same in `ca_dir`, plus a copy of ca.crt in `keys_dir` (created 0700 if needed): the CA key
// never lands where node keys are handed out. The two directories must differ.
Status init_ca(const std::filesystem::path& ca_dir, const std::filesystem::path& keys_dir,
               const CaOptions& options = {});

struct IssuedFiles {
  std::filesystem::path key;
  std::filesystem::path certificate;
};
// `ballot keys issue <node-id> --role <role>`: a fresh Ed25519 key and a certificate signed by
// the CA in `dir`. Fails if the node's files exist or the CA files are missing/mismatched.
Result<IssuedFiles> issue_node(const std::filesystem::path& dir, NodeId node, Role role,
                               const IssueOptions& options = {});
// With the CA in `ca_dir` and the node's files written to `keys_dir`.
Result<IssuedFiles> issue_node(const std::filesystem::path& ca_dir, const std::filesystem::path& keys_dir, NodeId node,
                               Role role, const IssueOptions& options = {});

struct CertificateInfo {
  std::filesystem::path file;
  std::string subject;
  std::string issuer;
  bool is_ca = false;
  std::optional<NodeId> node;  // from the SAN URI of a node certificate
  std::optional<Role> role;
  std::string not_before;  // "2025-01-31 12:00:00 UTC"
  std::string not_after;
  bool expired = false;        // now > not_after
  bool not_yet_valid = false;  // now < not_before
  PublicKeyBytes public_key{};
  std::string fingerprint;  // SHA-256 of the DER certificate, hex
};

// `ballot keys show [file]`: parses one certificate (no chain check).
Result<CertificateInfo> read_certificate(const std::filesystem::path& file);
// `ballot keys show` on a directory: ca.crt then every node-*.crt, by node id.
Result<std::vector<CertificateInfo>> list_certificates(const std::filesystem::path& dir);
// Several human-readable lines describing one certificate.
std::string format_certificate(const CertificateInfo& info);

// What a process needs to take part in the cluster as `node`: its key, its certificate (DER),
// the CA certificate (DER) and its identity, all checked against each other.
struct Credentials {
  NodeId node = 0;
  Role role = Role::kNode;
  SigningKey key;
  std::vector<std::uint8_t> certificate_der;
  std::vector<std::uint8_t> ca_certificate_der;
};

// Loads and checks ca.crt, node-<id>.crt and node-<id>.key from `dir`: the certificate is issued
// by the CA, currently valid, names `node`, and the key matches it.
Result<Credentials> load_credentials(const std::filesystem::path& dir, NodeId node);
// The same from explicit files (for deployments that keep them apart); the id comes from the
// certificate.
Result<Credentials> load_credentials(const std::filesystem::path& ca_cert, const std::filesystem::path& cert,
                                     const std::filesystem::path& key);

// The pinned registry of every node-*.crt in `dir`, each checked against ca.crt and currently
// valid. A certificate that fails any check is an error naming it (a registry with holes would
// silently drop a participant).
Result<Registry> load_registry(const std::filesystem::path& dir);

}  // namespace ballot::transport
