// One commitment record: its canonical body, signature, stored line and the checks on it.

#include "protocol/log.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "common/json.h"
#include "common/json_fields.h"
#include "common/sha256.h"

namespace vt {
namespace {

using nlohmann::json;

bool is_lower_hex(std::string_view s, std::size_t digits) {
  return s.size() == digits && std::ranges::all_of(s, [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// "YYYY-MM-DDTHH:MM:SS" with an optional fraction of 1-9 digits, then "Z".
bool is_utc_timestamp(std::string_view s) {
  constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:dd";
  if (s.size() < kShape.size() + 1 || s.back() != 'Z') return false;
  for (std::size_t i = 0; i < kShape.size(); ++i) {
    bool digit = s[i] >= '0' && s[i] <= '9';
    if (kShape[i] == 'd' ? !digit : s[i] != kShape[i]) return false;
  }
  std::string_view rest = s.substr(kShape.size(), s.size() - kShape.size() - 1);
  if (rest.empty()) return true;
  if (rest.size() < 2 || rest.size() > 10 || rest[0] != '.') return false;
  return std::ranges::all_of(rest.substr(1), [](char c) { return c >= '0' && c <= '9'; });
}

// A digest field: 64 lower-case hex digits, one spelling per value.
Result<Digest> digest_field(const JsonFields& r, std::string_view field) {
  std::string text;
  VT_RETURN_IF_ERROR(r.string(field, text, true));
  if (!is_lower_hex(text, 64)) return r.wrong(field, "64 lower-case hex digits", text);
  return digest_from_hex(text, field);
}

// Doubles are written with a fraction or exponent ("2.0", never "2"): one spelling per value
// (docs/log.md, "Numbers"); a loss that was not finite is null.
Status double_field(const JsonFields& r, std::string_view field, double& out, bool nullable) {
  VT_ASSIGN_OR_RETURN(const json* v, r.find(field, true, "a number"));
  if (nullable && v->is_null()) {
    out = NAN;
    return {};
  }
  if (!v->is_number_float()) {
    return r.wrong(field,
                   nullable ? "a number with a fraction or exponent, or null"
                            : "a number with a fraction or exponent",
                   *v);
  }
  out = v->get<double>();
  return {};
}

Result<EvalClaim> read_eval(const JsonFields& m) {
  VT_ASSIGN_OR_RETURN(JsonFields e, m.child("eval", true));
  VT_RETURN_IF_ERROR(e.known_keys({"accuracy", "examples", "loss"}));
  EvalClaim out;
  VT_RETURN_IF_ERROR(double_field(e, "loss", out.loss, true));
  if (e.value().contains("accuracy")) {
    double accuracy = 0.0;
    VT_RETURN_IF_ERROR(double_field(e, "accuracy", accuracy, false));
    if (!(accuracy >= 0.0 && accuracy <= 1.0))
      return e.wrong("accuracy", "a number in [0, 1]", e.value()["accuracy"]);
    out.accuracy = accuracy;
  }
  VT_RETURN_IF_ERROR(e.unsigned64("examples", out.examples, true));
  return out;
}

Result<CommitMetrics> read_metrics(const JsonFields& body) {
  VT_ASSIGN_OR_RETURN(JsonFields m, body.child("metrics", true));
  VT_RETURN_IF_ERROR(m.known_keys({"eval", "loss", "samples", "seconds", "steps"}));
  CommitMetrics out;
  if (m.value().contains("eval")) {
    VT_ASSIGN_OR_RETURN(out.eval, read_eval(m));
  }
  VT_RETURN_IF_ERROR(double_field(m, "loss", out.loss, true));
  VT_RETURN_IF_ERROR(double_field(m, "seconds", out.seconds, false));
  VT_RETURN_IF_ERROR(m.unsigned64("steps", out.steps, true));
  VT_RETURN_IF_ERROR(m.unsigned64("samples", out.samples, true));
  return out;
}

Result<CommitRecord> read_body(const json& body, std::string_view where) {
  const JsonFields r(body, std::string(where), "", "a record");
  VT_RETURN_IF_ERROR(
      r.known_keys({"data_order_digest", "environment", "epoch", "fingerprint", "format", "metrics",
                    "prev", "root", "signer", "task_id", "time", "tracking_fingerprint", "trail"}));
  std::string format;
  VT_RETURN_IF_ERROR(r.string("format", format, true));
  if (format != kCommitFormat)
    return r.wrong("format", "\"" + std::string(kCommitFormat) + "\"", format);
  CommitRecord rec;
  VT_ASSIGN_OR_RETURN(rec.task_id, digest_field(r, "task_id"));
  VT_RETURN_IF_ERROR(r.unsigned64("epoch", rec.epoch, true));
  VT_ASSIGN_OR_RETURN(rec.prev, digest_field(r, "prev"));
  VT_ASSIGN_OR_RETURN(rec.root, digest_field(r, "root"));
  VT_ASSIGN_OR_RETURN(rec.data_order_digest, digest_field(r, "data_order_digest"));
  VT_ASSIGN_OR_RETURN(Digest signer, digest_field(r, "signer"));
  rec.signer.assign(signer.begin(), signer.end());
  // Produced by fingerprint/: the log keeps them as they are and never interprets them.
  VT_ASSIGN_OR_RETURN(const json* fp, r.find("fingerprint", true, "a fingerprint"));
  VT_ASSIGN_OR_RETURN(const json* tracking, r.find("tracking_fingerprint", true, "a fingerprint"));
  VT_ASSIGN_OR_RETURN(const json* trail, r.find("trail", true, "an array"));
  if (!trail->is_array()) return r.wrong("trail", "an array", *trail);
  rec.fingerprint = *fp;
  rec.tracking_fingerprint = *tracking;
  rec.trail.assign(trail->begin(), trail->end());
  VT_ASSIGN_OR_RETURN(rec.metrics, read_metrics(r));
  VT_RETURN_IF_ERROR(r.string("time", rec.time, true));
  if (!is_utc_timestamp(rec.time))
    return r.wrong("time", "a UTC time like \"2025-06-01T12:00:00.123Z\"", rec.time);
  if (auto env = body.find("environment"); env != body.end()) {
    VT_ASSIGN_OR_RETURN(rec.environment,
                        environment_from_json(*env, std::string(where) + ": environment"));
  }
  return rec;
}

}  // namespace

std::string utc_now_iso8601() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[80];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

Result<std::string> commit_body_json(const CommitRecord& r) {
  if (r.signer.size() != kEd25519PublicKeySize) {
    return invalid_input("commit record: signer must be a 32-byte Ed25519 key, got " +
                         std::to_string(r.signer.size()) + " bytes");
  }
  if (!is_utc_timestamp(r.time)) {
    return invalid_input(
        "commit record: time must be UTC like \"2025-06-01T12:00:00.123Z\", got \"" + r.time +
        "\"");
  }
  if (!std::isfinite(r.metrics.seconds)) {
    return invalid_input("commit record: metrics.seconds must be finite");
  }
  json body = json::object();
  body["format"] = kCommitFormat;
  body["task_id"] = hex_encode(r.task_id);
  body["epoch"] = r.epoch;
  body["prev"] = hex_encode(r.prev);
  body["root"] = hex_encode(r.root);
  body["fingerprint"] = r.fingerprint;
  body["tracking_fingerprint"] = r.tracking_fingerprint;
  body["trail"] = json::array();
  for (const auto& t : r.trail) body["trail"].push_back(t);
  body["data_order_digest"] = hex_encode(r.data_order_digest);
  json metrics = json::object();
  metrics["loss"] = std::isfinite(r.metrics.loss) ? json(r.metrics.loss) : json(nullptr);
  metrics["steps"] = r.metrics.steps;
  metrics["seconds"] = r.metrics.seconds;
  metrics["samples"] = r.metrics.samples;
  if (const auto& e = r.metrics.eval) {
    json eval = json::object();
    eval["loss"] = std::isfinite(e->loss) ? json(e->loss) : json(nullptr);
    if (e->accuracy) eval["accuracy"] = *e->accuracy;
    eval["examples"] = e->examples;
    metrics["eval"] = std::move(eval);
  }
  body["metrics"] = std::move(metrics);
  if (r.environment) body["environment"] = environment_to_json(*r.environment);
  body["time"] = r.time;
  body["signer"] = hex_encode(r.signer);
  try {
    return canonical_json(body);
  } catch (const json::exception& e) {
    // Only the opaque fingerprint values can hold text we did not check.
    return invalid_input(std::string("commit record for epoch ") + std::to_string(r.epoch) +
                         ": cannot be written as JSON: " + e.what());
  }
}

Result<SignedRecord> sign_record(CommitRecord record, const SigningKey& key) {
  record.signer = key.public_key().raw();
  SignedRecord out;
  VT_ASSIGN_OR_RETURN(out.body, commit_body_json(record));
  out.signature = key.sign(as_bytes(out.body));
  out.record = std::move(record);
  out.hash = sha256(encode_record(out));
  return out;
}

Bytes encode_record(const SignedRecord& r) {
  Bytes line(r.body.begin(), r.body.end());
  line.push_back('\t');
  std::string sig = hex_encode(r.signature);
  line.insert(line.end(), sig.begin(), sig.end());
  line.push_back('\n');
  return line;
}

Result<SignedRecord> decode_record(ByteSpan line, std::string_view where) {
  auto bad = [&](const std::string& problem) {
    return invalid_input(std::string(where) + ": " + problem);
  };
  if (line.size() > kMaxRecordBytes) {
    return bad("record is " + std::to_string(line.size()) + " bytes, more than the limit of " +
               std::to_string(kMaxRecordBytes));
  }
  if (line.empty() || line.back() != '\n') return bad("record does not end with a newline");
  std::string_view text(reinterpret_cast<const char*>(line.data()), line.size() - 1);
  auto tab = text.find('\t');
  if (tab == std::string_view::npos || text.find('\t', tab + 1) != std::string_view::npos ||
      text.find('\n') != std::string_view::npos) {
    return bad("expected one line of BODY, a tab, and SIGNATURE");
  }
  std::string_view body = text.substr(0, tab);
  std::string_view sig_hex = text.substr(tab + 1);
  if (!is_lower_hex(sig_hex, 2 * kEd25519SignatureSize)) {
    return bad("signature: expected 128 lower-case hex digits");
  }
  auto parsed = parse_json_bounded(body, "body");
  if (!parsed.ok()) return bad(parsed.error().message);
  json value = std::move(parsed).value();
  if (!value.is_object()) return bad("body is not a JSON object");
  // One record has one byte form: this also refuses duplicate keys, which readers in other
  // languages might resolve differently from us.
  std::string canonical;
  try {
    canonical = canonical_json(value);
  } catch (const json::exception& e) {
    return bad(std::string("body cannot be re-serialized: ") + e.what());
  }
  if (canonical != body) {
    return bad(
        "body is not canonical JSON (sorted keys, no whitespace, numbers as docs/log.md spells "
        "them)");
  }
  SignedRecord out;
  VT_ASSIGN_OR_RETURN(out.record, read_body(value, where));
  out.body = std::string(body);
  out.signature = *hex_decode(sig_hex);
  out.hash = sha256(line);
  return out;
}

Status verify_record(const SignedRecord& r, std::uint64_t epoch, const Digest& task_id,
                     const Digest& prev, const std::optional<PublicKey>& signer,
                     std::string_view where) {
  auto fail = [&](const std::string& problem) {
    return rejected(std::string(where) + ": " + problem);
  };
  const CommitRecord& rec = r.record;
  if (rec.epoch != epoch) {
    return fail("commits epoch " + std::to_string(rec.epoch) + " where epoch " +
                std::to_string(epoch) + " belongs (epochs run 0, 1, 2, ... without gaps)");
  }
  auto key = PublicKey::from_raw(rec.signer);
  if (!key) return fail("signer is not a valid Ed25519 key");
  if (signer && key->raw() != signer->raw()) {
    return fail("signed by key " + key->fingerprint() + ", expected " + signer->fingerprint());
  }
  if (!key->verify(as_bytes(r.body), r.signature)) {
    return fail("signature does not verify (the record was changed after signing)");
  }
  if (rec.task_id != task_id) {
    return fail("belongs to task " + hex_encode(rec.task_id) + ", not to task " +
                hex_encode(task_id));
  }
  if (rec.prev != prev) {
    return fail("prev is " + hex_encode(rec.prev) + " but " +
                (epoch == 0 ? std::string("epoch 0 must name all zeros")
                            : "the record of epoch " + std::to_string(epoch - 1) + " hashes to " +
                                  hex_encode(prev)) +
                " (broken chain)");
  }
  return {};
}

}  // namespace vt
