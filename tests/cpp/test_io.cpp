// safetensors round trips and rejection of malformed files, from C++.
#include <torch/torch.h>
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/safetensors.h"

using namespace slapo;
namespace fs = std::filesystem;

namespace {
std::string temp_path(const std::string& name) { return (fs::temp_directory_path() / name).string(); }

void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}
}  // namespace

TEST_CASE("safetensors: every supported dtype round-trips exactly") {
  NamedTensors tensors = {
      {"f32", torch::randn({3, 4})},
      {"f16", torch::randn({5}).to(at::kHalf)},
      {"bf16", torch::randn({2, 2}).to(at::kBFloat16)},
      {"f64", torch::randn({2}, at::kDouble)},
      {"i64", torch::randint(-100, 100, {7})},
      {"i32", torch::randint(-100, 100, {3}).to(at::kInt)},
      {"i8", torch::randint(-100, 100, {3}).to(at::kChar)},
      {"u8", torch::randint(0, 255, {3}).to(at::kByte)},
      {"bool", torch::randint(0, 2, {4}).to(at::kBool)},
      {"scalar", torch::tensor(3.5)},
      {"empty", torch::zeros({0, 3})},
  };
  auto path = temp_path("slapo_all_dtypes.safetensors");
  write_safetensors(path, tensors, {{"format", "pt"}});
  auto back = read_safetensors(path);
  REQUIRE(back.tensors.size() == tensors.size());
  CHECK(back.metadata.at("format") == "pt");
  for (size_t i = 0; i < tensors.size(); ++i) {
    CHECK(back.tensors[i].first == tensors[i].first);
    CHECK(std::string(c10::toString(back.tensors[i].second.scalar_type())) == c10::toString(tensors[i].second.scalar_type()));
    CHECK(torch::equal(back.tensors[i].second, tensors[i].second));
  }
  fs::remove(path);
}

TEST_CASE("safetensors: the data section starts 8-byte aligned") {
  auto path = temp_path("slapo_aligned.safetensors");
  write_safetensors(path, {{"x", torch::ones({1})}});
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  CHECK(n % 8 == 0);
  fs::remove(path);
}

TEST_CASE("safetensors: malformed files raise errors naming the fault") {
  auto path = temp_path("slapo_bad.safetensors");
  auto expect_error = [&](const std::string& header, const std::string& data, const std::string& fault) {
    write_raw(path, header, data);
    try {
      read_safetensors(path);
      FAIL("no error for: " << fault);
    } catch (const Error& e) {
      CHECK_MESSAGE(std::string(e.what()).find(fault) != std::string::npos, e.what());
    }
  };
  expect_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234", "lie outside the 4-byte data section");
  expect_error(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", "12345678", "not a size");
  expect_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", "12345678", "lie outside");
  expect_error(R"({"w":{"dtype":"F32","shape":[2]}})", "12345678", "needs dtype, shape and data_offsets");
  expect_error(R"([1,2])", "", "not a JSON object");
  expect_error(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})", "12345678",
               "shape overflows");
  CHECK_THROWS_AS(read_safetensors(temp_path("slapo_no_such_file.safetensors")), Error);
  fs::remove(path);
}
