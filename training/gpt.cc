// GPT-2 configuration and parameter layout. See gpt.h.
#include "training/gpt.h"

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "training/allocation.h"

namespace weft::training {

Status validate(const GPTConfig& config) {
  const std::pair<const char*, int> fields[] = {
      {"max_seq_len", config.max_seq_len}, {"vocab_size", config.vocab_size},
      {"num_layers", config.num_layers},   {"num_heads", config.num_heads},
      {"channels", config.channels},
  };
  for (const auto& [name, value] : fields) {
    if (value <= 0) {
      return invalid_argument(std::string("GPTConfig.") + name + " = " + std::to_string(value) +
                              " must be positive");
    }
  }
  // Bounds that keep every count of the model's (parameters, activations, a layer's indices) in
  // range of the integers that hold it.
  const std::tuple<const char*, int, int> bounded[] = {{"max_seq_len", config.max_seq_len, kMaxSeqLen},
                                                       {"vocab_size", config.vocab_size, kMaxVocabSize},
                                                       {"num_layers", config.num_layers, kMaxLayers},
                                                       {"channels", config.channels, kMaxChannels}};
  for (const auto& [name, value, most] : bounded) {
    if (value > most) {
      return invalid_argument(std::string("GPTConfig.") + name + " = " + std::to_string(value) + " is above " +
                              std::to_string(most));
    }
  }
  if (config.channels % config.num_heads != 0) {
    return invalid_argument("GPTConfig.channels = " + std::to_string(config.channels) +
                            " must be divisible by num_heads = " +
                            std::to_string(config.num_heads));
  }
  return Status();
}

std::string describe(const GPTConfig& c) {
  return "L=" + std::to_string(c.num_layers) + " NH=" + std::to_string(c.num_heads) +
         " C=" + std::to_string(c.channels) + " maxT=" + std::to_string(c.max_seq_len) +
         " V=" + std::to_string(c.vocab_size);
}

std::array<ParameterSpec, kNumParameterTensors> parameter_layout(const GPTConfig& config) {
  const size_t V = static_cast<size_t>(config.vocab_size);
  const size_t maxT = static_cast<size_t>(config.max_seq_len);
  const size_t L = static_cast<size_t>(config.num_layers);
  const size_t C = static_cast<size_t>(config.channels);
  using P = ParameterTensors;
  return {{
      {"wte", &P::wte, V * C},
      {"wpe", &P::wpe, maxT * C},
      {"ln1w", &P::ln1w, L * C},
      {"ln1b", &P::ln1b, L * C},
      {"qkvw", &P::qkvw, L * 3 * C * C},
      {"qkvb", &P::qkvb, L * 3 * C},
      {"attprojw", &P::attprojw, L * C * C},
      {"attprojb", &P::attprojb, L * C},
      {"ln2w", &P::ln2w, L * C},
      {"ln2b", &P::ln2b, L * C},
      {"fcw", &P::fcw, L * 4 * C * C},
      {"fcb", &P::fcb, L * 4 * C},
      {"fcprojw", &P::fcprojw, L * C * 4 * C},
      {"fcprojb", &P::fcprojb, L * C},
      {"lnfw", &P::lnfw, C},
      {"lnfb", &P::lnfb, C},
  }};
}

size_t num_parameters(const GPTConfig& config) {
  size_t total = 0;
  for (const ParameterSpec& spec : parameter_layout(config)) total += spec.count;
  return total;
}

Result<GPTParameters> GPTParameters::create(const GPTConfig& config) {
  WEFT_TRY(validate(config));
  std::vector<float> buffer;
  const size_t n = num_parameters(config);
  WEFT_TRY(allocate("the parameters of model " + describe(config), n * sizeof(float), [&] { buffer.assign(n, 0.0f); }));
  return GPTParameters(config, std::move(buffer));
}

GPTParameters::GPTParameters(const GPTConfig& config, std::vector<float> buffer)
    : config_(config), buffer_(std::move(buffer)) {
  float* next = buffer_.data();
  for (const ParameterSpec& spec : parameter_layout(config)) {
    tensors_.*spec.view = next;
    next += spec.count;
  }
}

}  // namespace weft::training
