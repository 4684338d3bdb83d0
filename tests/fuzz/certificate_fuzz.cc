// Fuzz target: a peer's certificate as the TLS handshake hands it over (DER), through
// transport/detail/ossl.h's parse_certificate_der and certificate_identity, which reads the
// ballot://<role>/<id> identity the verifier trusts out of the subjectAltName. Seeds: a CA, a
// server and a node certificate of `ballot keys`. Invariants: nothing crashes; a certificate that
// parses re-encodes to DER that parses again to the same identity (or the same refusal).
#include <openssl/x509.h>

#include <cstdint>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "transport/detail/ossl.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ballot::transport;
  using ballot::fuzzing::check;
  const std::vector<std::uint8_t> der(data, data + size);
  auto cert = detail::parse_certificate_der(der);
  if (!cert.ok()) return 0;
  const auto identity = detail::certificate_identity(cert->get());
  if (identity.ok()) check(identity->role == Role::kServer || identity->role == Role::kNode);
  auto again = detail::parse_certificate_der(detail::certificate_der(cert->get()));
  check(again.ok());
  const auto same = detail::certificate_identity(again->get());
  check(same.ok() == identity.ok());
  if (identity.ok()) check(same->node == identity->node && same->role == identity->role);
  return 0;
}
