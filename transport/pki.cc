#include "transport/pki.h"

#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <sstream>

#include "core/enforce.h"
#include "core/file_io.h"
#include "transport/detail/ossl.h"

namespace ballot::transport {

namespace fs = std::filesystem;
using detail::BioPtr;
using detail::PkeyPtr;
using detail::X509Ptr;

namespace {

constexpr std::string_view kUriPrefix = "ballot://";

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

// A PEM key or certificate: a few KiB. The cap makes a FIFO, /dev/zero or a huge file an error
// naming it instead of an endless read.
constexpr std::uint64_t kMaxPemBytes = std::uint64_t{1} << 20;

Result<std::string> read_file(const fs::path& path) {
  BALLOT_ASSIGN_OR_RETURN(auto bytes, ballot::read_file(path, kMaxPemBytes, "PEM file"));
  std::string data(bytes.begin(), bytes.end());
  OPENSSL_cleanse(bytes.data(), bytes.size());  // a private key's bytes are not left behind
  return data;
}

// Never overwrites, and the path appears whole or not at all (core/file_io.h), so a write cut short
// (a full disk, the process killed) leaves no torn file that the same command, run again, would
// refuse to overwrite.
Status write_new_file(const fs::path& path, const std::string& data, mode_t mode) {
  return write_file_atomically(path, std::span(reinterpret_cast<const std::uint8_t*>(data.data()), data.size()), mode,
                               IfExists::kRefuse);
}

std::string bio_to_string(BIO* bio) {
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(length));
}

Result<X509Ptr> parse_certificate_pem(const std::string& pem, const fs::path& path) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert)
    return make_error(ErrorCode::kMalformed,
                      quoted(path) + " is not a PEM certificate: " + detail::take_openssl_errors());
  return cert;
}

Result<X509Ptr> load_certificate(const fs::path& path) {
  BALLOT_ASSIGN_OR_RETURN(std::string pem, read_file(path));
  return parse_certificate_pem(pem, path);
}

// As ssh does: a private key that group or others may read is refused, with the fix.
Status check_private_key_mode(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};  // read_file reports what is wrong
  const unsigned mode = st.st_mode & 0777u;
  if ((mode & 077u) == 0) return {};
  char octal[8];
  std::snprintf(octal, sizeof(octal), "%04o", mode);
  return make_error(ErrorCode::kAuthentication, "private key " + quoted(path) +
                                                    " is readable by group or others (mode " + octal +
                                                    "); make it private: chmod 600 " + quoted(path));
}

Result<PkeyPtr> load_private_key(const fs::path& path) {
  BALLOT_TRY(check_private_key_mode(path));
  BALLOT_ASSIGN_OR_RETURN(std::string pem, read_file(path));
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  OPENSSL_cleanse(pem.data(), pem.size());
  if (!key)
    return make_error(ErrorCode::kMalformed,
                      quoted(path) + " is not a PEM private key: " + detail::take_openssl_errors());
  if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519)
    return make_error(ErrorCode::kMalformed, quoted(path) + " is not an Ed25519 key");
  return key;
}

std::string time_text(const ASN1_TIME* time) {
  std::tm tm{};
  if (time == nullptr || ASN1_TIME_to_tm(time, &tm) != 1) return "(invalid time)";
  char buffer[64];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buffer;
}

std::string name_text(const X509_NAME* name) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_ONELINE & ~ASN1_STRFLGS_ESC_MSB) < 0) return "?";
  return bio_to_string(bio.get());
}

// A strictly decimal id in [0, 2^32): no sign, no leading zeros (one spelling per id).
std::optional<NodeId> parse_node_id(std::string_view text) {
  if (text.empty() || text.size() > 10 || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (value > 0xFFFFFFFFull) return std::nullopt;
  return static_cast<NodeId>(value);
}

std::string identity_uri(NodeId node, Role role) {
  return std::string(kUriPrefix) + std::string(role_name(role)) + "/" + std::to_string(node);
}

Status add_extension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str());
  if (ext == nullptr)
    return make_error(ErrorCode::kInternal, "cannot make extension " + value + ": " + detail::take_openssl_errors());
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return make_error(ErrorCode::kInternal, "cannot add extension: " + detail::take_openssl_errors());
  return {};
}

struct CertificateRequest {
  std::string common_name;
  std::string organization;
  EVP_PKEY* subject_key = nullptr;
  X509* issuer = nullptr;  // nullptr: self-signed
  EVP_PKEY* issuer_key = nullptr;
  std::time_t not_before = 0;
  std::time_t not_after = 0;
  std::vector<std::pair<int, std::string>> extensions;
};

Result<X509Ptr> make_certificate(const CertificateRequest& request) {
  X509Ptr cert(X509_new());
  if (!cert) return make_error(ErrorCode::kInternal, "X509_new failed");
  bool ok = X509_set_version(cert.get(), X509_VERSION_3) == 1;
  // A random 127-bit serial (RFC 5280: positive, at most 20 octets, unpredictable).
  std::unique_ptr<BIGNUM, detail::Deleter<BN_free>> serial(BN_new());
  ok = ok && serial && BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
       BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) != nullptr;
  ok = ok && ASN1_TIME_set(X509_getm_notBefore(cert.get()), request.not_before) != nullptr &&
       ASN1_TIME_set(X509_getm_notAfter(cert.get()), request.not_after) != nullptr;
  ok = ok && X509_set_pubkey(cert.get(), request.subject_key) == 1;
  X509_NAME* name = X509_get_subject_name(cert.get());
  ok = ok &&
       X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                                  reinterpret_cast<const unsigned char*>(request.organization.c_str()), -1, -1, 0) == 1;
  ok = ok &&
       X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                  reinterpret_cast<const unsigned char*>(request.common_name.c_str()), -1, -1, 0) == 1;
  ok = ok && X509_set_issuer_name(cert.get(), request.issuer ? X509_get_subject_name(request.issuer) : name) == 1;
  if (!ok) return make_error(ErrorCode::kInternal, "cannot fill certificate: " + detail::take_openssl_errors());
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, request.issuer ? request.issuer : cert.get(), cert.get(), nullptr, nullptr, 0);
  for (const auto& [nid, value] : request.extensions) BALLOT_TRY(add_extension(cert.get(), &ctx, nid, value));
  // Ed25519 signs the TBS certificate directly: no separate digest (md = nullptr).
  if (X509_sign(cert.get(), request.issuer_key, nullptr) <= 0)
    return make_error(ErrorCode::kInternal, "cannot sign certificate: " + detail::take_openssl_errors());
  return cert;
}

Result<std::string> certificate_pem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1)
    return make_error(ErrorCode::kInternal, "cannot encode certificate: " + detail::take_openssl_errors());
  return bio_to_string(bio.get());
}

Result<std::string> private_key_pem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return make_error(ErrorCode::kInternal, "cannot encode private key: " + detail::take_openssl_errors());
  return bio_to_string(bio.get());
}

Result<PkeyPtr> generate_ed25519() {
  BALLOT_ASSIGN_OR_RETURN(SigningKey key, SigningKey::generate());
  EVP_PKEY* raw = KeyAccess::pkey(key);
  EVP_PKEY_up_ref(raw);
  return PkeyPtr(raw);
}

std::time_t to_time_t(std::chrono::system_clock::time_point t) { return std::chrono::system_clock::to_time_t(t); }

Status check_validity(X509* cert, const fs::path& path) {
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0)
    return make_error(ErrorCode::kAuthentication,
                      "certificate " + quoted(path) + " expired on " + time_text(X509_get0_notAfter(cert)));
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0)
    return make_error(ErrorCode::kAuthentication,
                      "certificate " + quoted(path) + " is not valid before " + time_text(X509_get0_notBefore(cert)));
  return {};
}

// Full chain check of a node certificate against the CA (signature, dates, CA constraints,
// purpose), with OpenSSL's reason in the message.
Status verify_against_ca(X509* cert, X509* ca, const fs::path& path, const fs::path& ca_path) {
  BALLOT_TRY(check_validity(ca, ca_path));
  BALLOT_TRY(check_validity(cert, path));
  std::unique_ptr<X509_STORE, detail::Deleter<X509_STORE_free>> store(X509_STORE_new());
  std::unique_ptr<X509_STORE_CTX, detail::Deleter<X509_STORE_CTX_free>> ctx(X509_STORE_CTX_new());
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert, nullptr) != 1)
    return make_error(ErrorCode::kInternal, "cannot set up verification: " + detail::take_openssl_errors());
  X509_STORE_CTX_set_flags(ctx.get(), X509_V_FLAG_X509_STRICT);
  if (X509_verify_cert(ctx.get()) != 1) {
    const int reason = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return make_error(ErrorCode::kAuthentication, "certificate " + quoted(path) + " does not verify against CA " +
                                                      quoted(ca_path) + ": " + X509_verify_cert_error_string(reason));
  }
  return {};
}

Result<Credentials> make_credentials(X509* ca, const fs::path& ca_path, X509* cert, const fs::path& cert_path,
                                     PkeyPtr key, const fs::path& key_path) {
  BALLOT_TRY(verify_against_ca(cert, ca, cert_path, ca_path));
  auto identity = detail::certificate_identity(cert);
  if (!identity.ok()) return make_error(identity.error().code, quoted(cert_path) + ": " + identity.error().message);
  if (EVP_PKEY_eq(key.get(), X509_get0_pubkey(cert)) != 1) {
    ERR_clear_error();
    return make_error(ErrorCode::kAuthentication,
                      "private key " + quoted(key_path) + " does not match certificate " + quoted(cert_path));
  }
  BALLOT_ASSIGN_OR_RETURN(SigningKey signing, KeyAccess::signing_from_pkey(std::move(key)));
  Credentials credentials;
  credentials.node = identity->node;
  credentials.role = identity->role;
  credentials.key = std::move(signing);
  credentials.certificate_der = detail::certificate_der(cert);
  credentials.ca_certificate_der = detail::certificate_der(ca);
  return credentials;
}

std::optional<NodeId> node_id_of_file_name(const std::string& name) {
  constexpr std::string_view kPrefix = "node-", kSuffix = ".crt";
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.rfind(kPrefix, 0) != 0 ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return std::nullopt;
  return parse_node_id(std::string_view(name).substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size()));
}

}  // namespace

namespace detail {

Result<CertIdentity> certificate_identity(X509* cert) {
  using Names = STACK_OF(GENERAL_NAME);
  std::unique_ptr<Names, Deleter<GENERAL_NAMES_free>> names(
      static_cast<Names*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  if (!names)
    return make_error(ErrorCode::kAuthentication, "certificate has no subjectAltName with a ballot:// identity");
  std::optional<CertIdentity> found;
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type != GEN_URI) continue;
    const ASN1_IA5STRING* uri = name->d.uniformResourceIdentifier;
    const std::string_view text(reinterpret_cast<const char*>(ASN1_STRING_get0_data(uri)),
                                static_cast<std::size_t>(ASN1_STRING_length(uri)));
    if (text.substr(0, kUriPrefix.size()) != kUriPrefix) continue;
    if (found) return make_error(ErrorCode::kAuthentication, "certificate carries more than one ballot:// identity");
    const std::string_view rest = text.substr(kUriPrefix.size());
    const std::size_t slash = rest.find('/');
    if (slash == std::string_view::npos)
      return make_error(ErrorCode::kAuthentication, "malformed identity URI '" + std::string(text) + "'");
    auto role = parse_role(rest.substr(0, slash));
    const auto node = parse_node_id(rest.substr(slash + 1));
    if (!role.ok() || !node || rest.substr(0, slash) == "worker")
      return make_error(ErrorCode::kAuthentication, "malformed identity URI '" + std::string(text) + "'");
    found = CertIdentity{*node, *role};
  }
  if (!found) return make_error(ErrorCode::kAuthentication, "certificate has no ballot:// identity URI");
  return *found;
}

std::vector<std::uint8_t> certificate_der(X509* cert) {
  const int length = i2d_X509(cert, nullptr);
  BALLOT_ENFORCE(length > 0, "i2d_X509 failed");
  std::vector<std::uint8_t> der(static_cast<std::size_t>(length));
  unsigned char* out = der.data();
  i2d_X509(cert, &out);
  return der;
}

Result<X509Ptr> parse_certificate_der(const std::vector<std::uint8_t>& der) {
  const unsigned char* in = der.data();
  X509Ptr cert(d2i_X509(nullptr, &in, static_cast<long>(der.size())));
  if (!cert) return make_error(ErrorCode::kMalformed, "bad DER certificate: " + take_openssl_errors());
  return cert;
}

}  // namespace detail

fs::path ca_key_path(const fs::path& dir) { return dir / "ca.key"; }
fs::path ca_cert_path(const fs::path& dir) { return dir / "ca.crt"; }
fs::path node_key_path(const fs::path& dir, NodeId node) { return dir / ("node-" + std::to_string(node) + ".key"); }
fs::path node_cert_path(const fs::path& dir, NodeId node) { return dir / ("node-" + std::to_string(node) + ".crt"); }

namespace {

// Parents as `mkdir -p` would make them; the key directory itself owner-only. ("keys/" names
// the directory "keys": its parent_path() would be "keys" itself.)
Status make_private_directory(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec)) return {};
  fs::path target = dir;
  while (!target.empty() && !target.has_filename() && target.parent_path() != target) target = target.parent_path();
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (::mkdir(target.c_str(), 0700) != 0)
    return make_error(ErrorCode::kIo, "cannot create directory " + quoted(dir) + ": " + std::strerror(errno));
  return {};
}

bool same_directory(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

}  // namespace

Status init_ca(const fs::path& ca_dir, const fs::path& keys_dir, const CaOptions& options) {
  if (same_directory(ca_dir, keys_dir))
    return make_error(ErrorCode::kInvalidArgument,
                      "the CA directory " + quoted(ca_dir) + " must not be the key directory that nodes receive");
  for (const auto& path : {ca_key_path(ca_dir), ca_cert_path(ca_dir), ca_cert_path(keys_dir)}) {
    std::error_code ec;
    if (fs::exists(path, ec))
      return make_error(ErrorCode::kInvalidArgument, "refusing to overwrite existing file " + quoted(path));
  }
  BALLOT_TRY(init_ca(ca_dir, options));
  // The CA and its copy for the nodes, or nothing (a CA left without the copy would make the same
  // command refuse to overwrite it).
  Status published = make_private_directory(keys_dir);
  if (published.ok()) {
    auto cert_pem = read_file(ca_cert_path(ca_dir));
    published = cert_pem.ok() ? write_new_file(ca_cert_path(keys_dir), *cert_pem, 0644) : Status(cert_pem.error());
  }
  if (!published.ok()) {
    std::error_code ec;
    fs::remove(ca_key_path(ca_dir), ec);
    fs::remove(ca_cert_path(ca_dir), ec);
  }
  return published;
}

Status init_ca(const fs::path& dir, const CaOptions& options) {
  if (options.valid_days <= 0) return make_error(ErrorCode::kInvalidArgument, "CA validity must be positive");
  std::error_code ec;
  BALLOT_TRY(make_private_directory(dir));
  for (const auto& path : {ca_key_path(dir), ca_cert_path(dir)})
    if (fs::exists(path, ec))
      return make_error(ErrorCode::kInvalidArgument, "refusing to overwrite existing file " + quoted(path));
  BALLOT_ASSIGN_OR_RETURN(PkeyPtr key, generate_ed25519());
  const std::time_t now = std::time(nullptr);
  CertificateRequest request;
  request.common_name = "Ballot cluster CA " + options.cluster_name;
  request.organization = options.cluster_name;
  request.subject_key = key.get();
  request.issuer_key = key.get();
  request.not_before = now - 60;  // tolerate small clock skew between machines
  request.not_after = now + static_cast<std::time_t>(options.valid_days) * 86400;
  request.extensions = {{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                        {NID_key_usage, "critical,keyCertSign,cRLSign"},
                        {NID_subject_key_identifier, "hash"},
                        {NID_authority_key_identifier, "keyid:always"}};
  BALLOT_ASSIGN_OR_RETURN(X509Ptr cert, make_certificate(request));
  BALLOT_ASSIGN_OR_RETURN(std::string key_pem, private_key_pem(key.get()));
  BALLOT_ASSIGN_OR_RETURN(std::string cert_pem, certificate_pem(cert.get()));
  const Status written = write_new_file(ca_key_path(dir), key_pem, 0600);
  OPENSSL_cleanse(key_pem.data(), key_pem.size());
  BALLOT_TRY(written);
  // The pair or nothing: a key without its certificate would make the next try refuse to overwrite.
  Status certified = write_new_file(ca_cert_path(dir), cert_pem, 0644);
  if (!certified.ok()) fs::remove(ca_key_path(dir), ec);
  return certified;
}

Result<IssuedFiles> issue_node(const fs::path& dir, NodeId node, Role role, const IssueOptions& options) {
  return issue_node(dir, dir, node, role, options);
}

Result<IssuedFiles> issue_node(const fs::path& dir, const fs::path& keys_dir, NodeId node, Role role,
                               const IssueOptions& options) {
  IssuedFiles files{node_key_path(keys_dir, node), node_cert_path(keys_dir, node)};
  std::error_code ec;
  for (const auto& path : {files.key, files.certificate})
    if (fs::exists(path, ec))
      return make_error(ErrorCode::kInvalidArgument, "refusing to overwrite existing file " + quoted(path));
  if (!fs::exists(keys_dir, ec)) BALLOT_TRY(make_private_directory(keys_dir));
  BALLOT_ASSIGN_OR_RETURN(X509Ptr ca, load_certificate(ca_cert_path(dir)));
  BALLOT_ASSIGN_OR_RETURN(PkeyPtr ca_key, load_private_key(ca_key_path(dir)));
  if (EVP_PKEY_eq(ca_key.get(), X509_get0_pubkey(ca.get())) != 1) {
    ERR_clear_error();
    return make_error(ErrorCode::kAuthentication, "CA key " + quoted(ca_key_path(dir)) +
                                                      " does not match CA certificate " + quoted(ca_cert_path(dir)));
  }
  BALLOT_TRY(check_validity(ca.get(), ca_cert_path(dir)));
  const std::time_t now = std::time(nullptr);
  CertificateRequest request;
  if (options.not_before.has_value() != options.not_after.has_value())
    return make_error(ErrorCode::kInvalidArgument, "give both not_before and not_after, or neither");
  if (options.not_before) {
    request.not_before = to_time_t(*options.not_before);
    request.not_after = to_time_t(*options.not_after);
  } else {
    if (options.valid_days <= 0)
      return make_error(ErrorCode::kInvalidArgument, "certificate validity must be positive");
    request.not_before = now - 60;
    request.not_after = now + static_cast<std::time_t>(options.valid_days) * 86400;
  }
  if (request.not_after <= request.not_before)
    return make_error(ErrorCode::kInvalidArgument, "certificate validity window is empty");
  BALLOT_ASSIGN_OR_RETURN(PkeyPtr key, generate_ed25519());
  request.common_name = "ballot-" + std::string(role_name(role)) + "-" + std::to_string(node);
  request.organization = "ballot";
  request.subject_key = key.get();
  request.issuer = ca.get();
  request.issuer_key = ca_key.get();
  request.extensions = {
      {NID_basic_constraints, "critical,CA:FALSE"},   {NID_key_usage, "critical,digitalSignature"},
      {NID_ext_key_usage, "serverAuth,clientAuth"},   {NID_subject_key_identifier, "hash"},
      {NID_authority_key_identifier, "keyid:always"}, {NID_subject_alt_name, "URI:" + identity_uri(node, role)}};
  BALLOT_ASSIGN_OR_RETURN(X509Ptr cert, make_certificate(request));
  BALLOT_ASSIGN_OR_RETURN(std::string key_pem, private_key_pem(key.get()));
  BALLOT_ASSIGN_OR_RETURN(std::string cert_pem, certificate_pem(cert.get()));
  const Status written = write_new_file(files.key, key_pem, 0600);
  OPENSSL_cleanse(key_pem.data(), key_pem.size());
  BALLOT_TRY(written);
  if (Status certified = write_new_file(files.certificate, cert_pem, 0644); !certified.ok()) {
    fs::remove(files.key, ec);  // the pair or nothing (see init_ca)
    return certified.error();
  }
  return files;
}

Result<CertificateInfo> read_certificate(const fs::path& file) {
  BALLOT_ASSIGN_OR_RETURN(X509Ptr cert, load_certificate(file));
  CertificateInfo info;
  info.file = file;
  info.subject = name_text(X509_get_subject_name(cert.get()));
  info.issuer = name_text(X509_get_issuer_name(cert.get()));
  info.is_ca = X509_check_ca(cert.get()) != 0;
  if (auto identity = detail::certificate_identity(cert.get()); identity.ok()) {
    info.node = identity->node;
    info.role = identity->role;
  }
  info.not_before = time_text(X509_get0_notBefore(cert.get()));
  info.not_after = time_text(X509_get0_notAfter(cert.get()));
  info.expired = X509_cmp_current_time(X509_get0_notAfter(cert.get())) < 0;
  info.not_yet_valid = X509_cmp_current_time(X509_get0_notBefore(cert.get())) > 0;
  EVP_PKEY* key = X509_get0_pubkey(cert.get());
  std::size_t length = info.public_key.size();
  if (key == nullptr || EVP_PKEY_get_id(key) != EVP_PKEY_ED25519 ||
      EVP_PKEY_get_raw_public_key(key, info.public_key.data(), &length) != 1) {
    ERR_clear_error();
    return make_error(ErrorCode::kMalformed, "certificate " + quoted(file) + " does not hold an Ed25519 key");
  }
  const auto der = detail::certificate_der(cert.get());
  info.fingerprint = to_hex(sha256(der));
  return info;
}

Result<std::vector<CertificateInfo>> list_certificates(const fs::path& dir) {
  std::vector<CertificateInfo> infos;
  BALLOT_ASSIGN_OR_RETURN(CertificateInfo ca, read_certificate(ca_cert_path(dir)));
  infos.push_back(std::move(ca));
  std::map<NodeId, fs::path> nodes;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (auto id = node_id_of_file_name(entry.path().filename().string())) nodes.emplace(*id, entry.path());
  if (ec) return make_error(ErrorCode::kIo, "cannot list " + quoted(dir) + ": " + ec.message());
  for (const auto& [id, path] : nodes) {
    BALLOT_ASSIGN_OR_RETURN(CertificateInfo info, read_certificate(path));
    infos.push_back(std::move(info));
  }
  return infos;
}

std::string format_certificate(const CertificateInfo& info) {
  std::ostringstream out;
  out << info.file.string() << "\n";
  if (info.is_ca) out << "  kind:        cluster CA\n";
  if (info.node) out << "  identity:    " << role_name(*info.role) << " " << *info.node << "\n";
  out << "  subject:     " << info.subject << "\n";
  out << "  issuer:      " << info.issuer << "\n";
  out << "  valid:       " << info.not_before << " .. " << info.not_after
      << (info.expired         ? "  (EXPIRED)"
          : info.not_yet_valid ? "  (NOT YET VALID)"
                               : "")
      << "\n";
  out << "  public key:  ed25519 " << to_hex(info.public_key) << "\n";
  out << "  fingerprint: sha256 " << info.fingerprint << "\n";
  return out.str();
}

Result<Credentials> load_credentials(const fs::path& dir, NodeId node) {
  BALLOT_ASSIGN_OR_RETURN(Credentials credentials,
                          load_credentials(ca_cert_path(dir), node_cert_path(dir, node), node_key_path(dir, node)));
  if (credentials.node != node)
    return make_error(ErrorCode::kAuthentication, "certificate " + quoted(node_cert_path(dir, node)) + " names node " +
                                                      std::to_string(credentials.node) + ", not " +
                                                      std::to_string(node));
  return credentials;
}

Result<Credentials> load_credentials(const fs::path& ca_cert, const fs::path& cert, const fs::path& key) {
  BALLOT_ASSIGN_OR_RETURN(X509Ptr ca, load_certificate(ca_cert));
  BALLOT_ASSIGN_OR_RETURN(X509Ptr node_cert, load_certificate(cert));
  BALLOT_ASSIGN_OR_RETURN(PkeyPtr node_key, load_private_key(key));
  return make_credentials(ca.get(), ca_cert, node_cert.get(), cert, std::move(node_key), key);
}

Result<Registry> load_registry(const fs::path& dir) {
  BALLOT_ASSIGN_OR_RETURN(X509Ptr ca, load_certificate(ca_cert_path(dir)));
  std::map<NodeId, fs::path> nodes;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (auto id = node_id_of_file_name(entry.path().filename().string())) nodes.emplace(*id, entry.path());
  if (ec) return make_error(ErrorCode::kIo, "cannot list " + quoted(dir) + ": " + ec.message());
  Registry registry;
  for (const auto& [id, path] : nodes) {
    BALLOT_ASSIGN_OR_RETURN(X509Ptr cert, load_certificate(path));
    BALLOT_TRY(verify_against_ca(cert.get(), ca.get(), path, ca_cert_path(dir)));
    auto identity = detail::certificate_identity(cert.get());
    if (!identity.ok()) return make_error(identity.error().code, quoted(path) + ": " + identity.error().message);
    if (identity->node != id)
      return make_error(ErrorCode::kAuthentication, "certificate " + quoted(path) + " names node " +
                                                        std::to_string(identity->node) + ", not " + std::to_string(id));
    EVP_PKEY* key = X509_get0_pubkey(cert.get());
    if (key == nullptr || EVP_PKEY_up_ref(key) != 1)
      return make_error(ErrorCode::kMalformed, "certificate " + quoted(path) + " has no public key");
    auto verify_key = KeyAccess::verify_from_pkey(PkeyPtr(key));
    if (!verify_key.ok()) return make_error(verify_key.error().code, quoted(path) + ": " + verify_key.error().message);
    BALLOT_TRY(registry.add(id, identity->role, std::move(verify_key).value()));
  }
  if (registry.size() == 0) return make_error(ErrorCode::kNotFound, "no node-<id>.crt certificates in " + quoted(dir));
  return registry;
}

}  // namespace ballot::transport
