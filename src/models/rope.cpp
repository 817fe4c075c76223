#include "models/rope.h"

#include <cmath>

#include "core/error.h"

namespace slapo {

namespace {

double field(const nlohmann::json& table, const char* key, double fallback, const std::string& where) {
  if (!table.contains(key) || table[key].is_null()) return fallback;
  if (!table[key].is_number())
    throw Error(fmt::format("config: {}.{} must be a number, got {}", where, key, table[key].dump()));
  return table[key].get<double>();
}

}  // namespace

std::string RopeScaling::describe() const {
  if (type == "default") return fmt::format("theta={:g}", theta);
  if (type == "llama3")
    return fmt::format("theta={:g}, rope_type=llama3, factor={:g}, low_freq_factor={:g}, high_freq_factor={:g}, "
                       "original_max_position_embeddings={}",
                       theta, factor, low_freq_factor, high_freq_factor, original_max_positions);
  return fmt::format("theta={:g}, rope_type={}, factor={:g}", theta, type, factor);
}

RopeScaling rope_from_config(const ModelConfig& c) {
  RopeScaling r;
  r.theta = c.number("rope_theta", 10000.0);
  // 5.x writes rope_parameters (with rope_theta inside); 4.x rope_scaling beside a top-level rope_theta
  const auto& json = c.json();
  const char* key = c.has("rope_parameters") ? "rope_parameters" : c.has("rope_scaling") ? "rope_scaling" : nullptr;
  if (!key) return r;
  const auto& table = json[key];
  if (!table.is_object()) throw Error(fmt::format("config: {} must be a table, got {}", key, table.dump()));
  r.theta = field(table, "rope_theta", r.theta, key);
  std::string type = "default";
  for (const char* name : {"rope_type", "type"})  // "type": early 4.x configs
    if (table.contains(name) && table[name].is_string()) type = table[name].get<std::string>();
  r.type = type;
  if (type == "default") return r;
  if (type != "linear" && type != "dynamic" && type != "llama3")
    throw Error(fmt::format("config: {}.rope_type '{}' is not supported (supported: default, linear, dynamic, "
                            "llama3); the model would compute other positions than transformers does",
                            key, type));
  r.factor = field(table, "factor", 0.0, key);
  if (!(r.factor >= 1.0))
    throw Error(fmt::format("config: {}.factor must be a number >= 1 for rope_type '{}', got {}", key, type,
                            table.contains("factor") ? table["factor"].dump() : "nothing"));
  double original = field(table, "original_max_position_embeddings",
                          static_cast<double>(c.integer("max_position_embeddings", 2048)), key);
  if (!(original >= 1 && original <= 16777216) || original != std::floor(original))
    throw Error(fmt::format("config: {}.original_max_position_embeddings must be an integer from 1 to 16777216, got {}",
                            key, original));
  r.original_max_positions = static_cast<int64_t>(original);
  if (type == "llama3") {
    r.low_freq_factor = field(table, "low_freq_factor", 1.0, key);
    r.high_freq_factor = field(table, "high_freq_factor", 4.0, key);
    if (!(r.high_freq_factor > r.low_freq_factor))
      throw Error(fmt::format("config: {}.high_freq_factor ({}) must exceed low_freq_factor ({})", key,
                              r.high_freq_factor, r.low_freq_factor));
  }
  return r;
}

at::Tensor rope_inv_freq(const RopeScaling& r, int64_t head_dim, int64_t seq_len, const at::TensorOptions& opts) {
  auto fopts = opts.dtype(at::kFloat);
  auto exponents = torch::arange(0, head_dim, 2, fopts.dtype(at::kLong)).to(at::kFloat) / static_cast<double>(head_dim);
  double base = r.theta;
  if (r.type == "dynamic" && seq_len > r.original_max_positions)  // NTK: a larger base past the trained length
    base *= std::pow(r.factor * static_cast<double>(seq_len) / static_cast<double>(r.original_max_positions) -
                         (r.factor - 1.0),
                     static_cast<double>(head_dim) / static_cast<double>(head_dim - 2));
  auto inv_freq = 1.0 / torch::pow(base, exponents);
  if (r.type == "linear") return inv_freq / r.factor;
  if (r.type != "llama3") return inv_freq;
  // Llama 3.1's rule: long wavelengths divided by factor, short ones kept, the band between blended.
  const double old_len = static_cast<double>(r.original_max_positions);
  const double low_wavelen = old_len / r.low_freq_factor, high_wavelen = old_len / r.high_freq_factor;
  auto wavelen = 2 * M_PI / inv_freq;
  auto scaled = at::where(wavelen > low_wavelen, inv_freq / r.factor, inv_freq);
  auto smooth = (old_len / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  auto smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
  auto medium = wavelen.ge(high_wavelen).logical_and(wavelen.le(low_wavelen));
  return at::where(medium, smoothed, scaled);
}

}  // namespace slapo
