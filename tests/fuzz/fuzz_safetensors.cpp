// libFuzzer target: any bytes as a .safetensors file. read_safetensors must return tensors or
// throw slapo::Error; a crash, a sanitizer report, a hang or another exception is a bug.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // the reader maps a file, so the input goes through one (per process: -jobs run several)
  static const std::string path = "/tmp/slapo-fuzz-" + std::to_string(::getpid()) + ".safetensors";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    auto file = slapo::read_safetensors(path);
    for (auto& [name, tensor] : file.tensors) (void)tensor.sum().item<double>();  // every byte is readable
  } catch (const slapo::Error&) {
  }
  return 0;
}
