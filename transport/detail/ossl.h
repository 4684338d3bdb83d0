// Internal: RAII holders for OpenSSL objects and access to the keys behind SigningKey/VerifyKey.
// Included only by transport/*.cc (and tests); public headers stay free of OpenSSL types.
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "transport/crypto.h"
#include "transport/identity.h"

namespace ballot::transport::detail {

template <auto Fn>
struct Deleter {
  template <typename T>
  void operator()(T* p) const noexcept {
    Fn(p);
  }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, Deleter<EVP_PKEY_CTX_free>>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, Deleter<EVP_MD_CTX_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;

// The identity a node certificate carries in its single "ballot://<role>/<id>" SAN URI.
struct CertIdentity {
  NodeId node = 0;
  Role role = Role::kNode;
};
Result<CertIdentity> certificate_identity(X509* cert);

// DER encoding of a certificate; parse back with parse_certificate_der.
std::vector<std::uint8_t> certificate_der(X509* cert);
Result<X509Ptr> parse_certificate_der(const std::vector<std::uint8_t>& der);

// The OpenSSL error queue as text (and cleared), e.g. "error:0480006C:PEM routines::no start line".
std::string take_openssl_errors();

}  // namespace ballot::transport::detail

namespace ballot::transport {

struct VerifyKey::Impl {
  explicit Impl(detail::PkeyPtr key) : pkey(std::move(key)) {}
  detail::PkeyPtr pkey;
};
struct SigningKey::Impl {
  explicit Impl(detail::PkeyPtr key) : pkey(std::move(key)) {}
  detail::PkeyPtr pkey;
};

// Bridges between the public key classes and OpenSSL (friend of both).
struct KeyAccess {
  // Wrap an Ed25519 key (private for signing, or public for verifying); takes ownership.
  static Result<SigningKey> signing_from_pkey(detail::PkeyPtr key);
  static Result<VerifyKey> verify_from_pkey(detail::PkeyPtr key);
  static EVP_PKEY* pkey(const SigningKey& key) { return key.impl_->pkey.get(); }
  static EVP_PKEY* pkey(const VerifyKey& key) { return key.impl_->pkey.get(); }
};

}  // namespace ballot::transport
