#include <filesystem>

#include "cli/app.h"
#include "protocol/keys.h"

namespace vt::cli {

void register_keygen(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("keygen", summary_of("keygen"));
  auto out = std::make_shared<std::string>();
  cmd->add_option("--out", *out,
                  "Folder for signing.key.pem, signing.pub.pem, tls.key.pem, "
                  "tls.cert.pem (created; existing keys are never overwritten)")
      ->required();
  cmd->callback([&ctx, out] {
    ctx.action = [&ctx, out]() -> Result<int> {
      VT_ASSIGN_OR_RETURN(IdentitySummary id, generate_identity(*out));
      std::filesystem::path dir(*out);
      emit(ctx,
           {{"folder", dir.string()},
            {"signing_public_key_sha256", id.signing_fingerprint},
            {"tls_certificate_sha256", id.tls_cert_fingerprint}},
           "Wrote " + (dir / "signing.key.pem").string() +
               " (0600), signing.pub.pem, tls.key.pem (0600), tls.cert.pem\n"
               "signing public key sha256: " +
               id.signing_fingerprint +
               "\n"
               "TLS certificate sha256 (pin with --pin): " +
               id.tls_cert_fingerprint + "\n");
      return 0;
    };
  });
}

}  // namespace vt::cli
