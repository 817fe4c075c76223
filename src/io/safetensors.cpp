// safetensors reading (mmap + bounds checks) and writing (temp file + rename).
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json_file.h"

namespace slapo {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::vector<std::pair<std::string, at::ScalarType>>& dtypes() {
  static const std::vector<std::pair<std::string, at::ScalarType>> table = {
      {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"F64", at::kDouble}, {"I64", at::kLong},
      {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},      {"U8", at::kByte},    {"BOOL", at::kBool}};
  return table;
}

std::string dtype_code(at::ScalarType t, const std::string& name) {
  for (auto& [code, type] : dtypes())
    if (type == t) return code;
  throw Error(fmt::format("save: tensor '{}' has dtype {}, which safetensors cannot store here", name, c10::toString(t)));
}

// An mmap of a whole file, unmapped on scope exit.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    // O_NONBLOCK: a FIFO or device named as a checkpoint must not block the open
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
    if (fd < 0) throw Error(fmt::format("safetensors: cannot open '{}': {}", path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw Error(fmt::format("safetensors: '{}' is not a regular file", path));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (data_ == MAP_FAILED) {
        ::close(fd);
        throw Error(fmt::format("safetensors: cannot map '{}': {}", path, std::strerror(errno)));
      }
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_ && data_ != MAP_FAILED) ::munmap(data_, size_);
  }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(data_); }
  size_t size() const { return size_; }
  /// Drops the pages of [begin, end) from this process (they stay in the page cache and come
  /// back on the next read), so what was read and copied stops counting as resident memory.
  void release(size_t begin, size_t end) const {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    size_t first = (begin + page - 1) / page * page, last = end / page * page;  // whole pages inside
    if (data_ && first < last) ::madvise(static_cast<uint8_t*>(data_) + first, last - first, MADV_DONTNEED);
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

struct MappedSafetensors::Impl {
  explicit Impl(const std::string& path) : file(path) {}
  MappedFile file;
  struct Entry {
    at::ScalarType dtype;
    std::vector<int64_t> shape;
    uint64_t begin;
  };
  std::map<std::string, Entry> entries;
  std::vector<std::string> names;  // by data offset
  std::map<std::string, std::string> metadata;
  const uint8_t* data = nullptr;
};

MappedSafetensors::MappedSafetensors(const std::string& path) : impl_(std::make_shared<Impl>(path)) {
  const MappedFile& file = impl_->file;
  auto fail = [&](const std::string& why) { return Error(fmt::format("safetensors: '{}' is malformed: {}", path, why)); };
  if (file.size() < 8) throw fail(fmt::format("{} bytes is shorter than the 8-byte header length", file.size()));
  uint64_t header_len = 0;
  std::memcpy(&header_len, file.bytes(), 8);  // little-endian, as the format and x86 agree
  if (header_len > file.size() - 8)
    throw fail(fmt::format("header length {} runs past the end of the {}-byte file", header_len, file.size()));
  json header;
  try {
    header = parse_json_limited(file.bytes() + 8, file.bytes() + 8 + header_len);
  } catch (const std::exception& e) {
    throw fail(fmt::format("header is not valid JSON ({})", e.what()));
  }
  if (!header.is_object()) throw fail("header is not a JSON object");
  impl_->data = file.bytes() + 8 + header_len;
  const uint64_t data_len = file.size() - 8 - header_len;

  std::vector<std::pair<uint64_t, std::string>> by_offset;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw fail("__metadata__ is not an object");
      for (auto& [k, v] : entry.items())
        if (v.is_string()) impl_->metadata[k] = v.get<std::string>();
      continue;
    }
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      throw fail(fmt::format("entry '{}' needs dtype, shape and data_offsets", name));
    if (!entry["dtype"].is_string()) throw fail(fmt::format("entry '{}': dtype is not a string", name));
    std::string code = entry["dtype"].get<std::string>();
    c10::optional<at::ScalarType> type;
    for (auto& [c, t] : dtypes())
      if (c == code) type = t;
    if (!type) throw fail(fmt::format("entry '{}': unsupported dtype '{}' (supported: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL)", name, code));
    std::vector<int64_t> shape;
    if (!entry["shape"].is_array()) throw fail(fmt::format("entry '{}': shape is not an array", name));
    uint64_t numel = 1;
    for (auto& d : entry["shape"]) {
      if (!d.is_number_unsigned()) throw fail(fmt::format("entry '{}': shape holds {}, not a size", name, d.dump()));
      uint64_t size = d.get<uint64_t>();
      if (size > 0 && numel > UINT64_MAX / size) throw fail(fmt::format("entry '{}': shape overflows", name));
      numel *= size;
      shape.push_back(static_cast<int64_t>(size));
    }
    auto& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      throw fail(fmt::format("entry '{}': data_offsets must be [begin, end]", name));
    uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    uint64_t item = c10::elementSize(*type);
    if (begin > end || end > data_len)
      throw fail(fmt::format("entry '{}': data_offsets [{}, {}] lie outside the {}-byte data section", name, begin, end, data_len));
    if (numel > UINT64_MAX / item || end - begin != numel * item)
      throw fail(fmt::format("entry '{}': {} bytes of data for shape [{}] of {} ({} bytes expected)", name, end - begin,
                             fmt::join(shape, ", "), code, numel * item));
    impl_->entries[name] = Impl::Entry{*type, std::move(shape), begin};
    by_offset.emplace_back(begin, name);
  }
  std::stable_sort(by_offset.begin(), by_offset.end(), [](auto& a, auto& b) { return a.first < b.first; });
  for (auto& e : by_offset) impl_->names.push_back(std::move(e.second));
}

const std::vector<std::string>& MappedSafetensors::names() const { return impl_->names; }
const std::map<std::string, std::string>& MappedSafetensors::metadata() const { return impl_->metadata; }
bool MappedSafetensors::contains(const std::string& name) const { return impl_->entries.count(name) > 0; }

void MappedSafetensors::release(const std::string& name) const {
  auto found = impl_->entries.find(name);
  if (found == impl_->entries.end()) return;
  auto& e = found->second;
  size_t offset = static_cast<size_t>(impl_->data - impl_->file.bytes()) + e.begin;
  size_t bytes = c10::elementSize(e.dtype);
  for (auto d : e.shape) bytes *= static_cast<size_t>(d);
  impl_->file.release(offset, offset + bytes);
}

at::Tensor MappedSafetensors::view(const std::string& name) const {
  auto found = impl_->entries.find(name);
  if (found == impl_->entries.end()) throw Error(fmt::format("safetensors: no tensor '{}'", name));
  auto& e = found->second;
  auto keep = impl_;  // the view keeps the file mapped
  return torch::from_blob(const_cast<uint8_t*>(impl_->data + e.begin), e.shape, [keep](void*) {},
                          at::TensorOptions().dtype(e.dtype));
}

TensorFile read_safetensors(const std::string& path) {
  MappedSafetensors file(path);
  TensorFile out;
  out.metadata = file.metadata();
  for (auto& name : file.names()) {
    out.tensors.emplace_back(name, file.view(name).clone());
    file.release(name);
  }
  return out;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata, const char* caller) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> blobs;
  uint64_t offset = 0;
  for (auto& [name, t] : tensors) {
    if (header.contains(name)) throw Error(fmt::format("save: two tensors are named '{}'", name));
    auto cpu = t.detach().to(at::kCPU).contiguous();
    uint64_t bytes = cpu.numel() * cpu.element_size();
    header[name] = {{"dtype", dtype_code(cpu.scalar_type(), name)},
                    {"shape", cpu.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    blobs.push_back(cpu);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  uint64_t header_len = text.size();

  write_file_atomically(path, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(&header_len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (auto& b : blobs) out.write(static_cast<const char*>(b.data_ptr()), static_cast<std::streamsize>(b.numel() * b.element_size()));
  }, caller);
}

std::vector<CheckpointFile> checkpoint_files(const std::string& dir) {
  fs::path index = fs::path(dir) / "model.safetensors.index.json";
  fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(single)) return {{single.string(), {}}};
  if (!fs::exists(index))
    throw Error(fmt::format("from_pretrained: '{}' has neither model.safetensors nor model.safetensors.index.json", dir));
  json j = read_json_file(index.string(), "from_pretrained");
  if (!j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(fmt::format("from_pretrained: '{}' has no weight_map object", index.string()));
  std::vector<CheckpointFile> shards;
  for (auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) throw Error(fmt::format("from_pretrained: weight_map['{}'] is not a file name", name));
    auto f = file.get<std::string>();
    if (f.find('/') != std::string::npos || f == "..")
      throw Error(fmt::format("from_pretrained: weight_map['{}'] = '{}' points outside '{}'", name, f, dir));
    auto path = (fs::path(dir) / f).string();
    auto shard = std::find_if(shards.begin(), shards.end(), [&](const CheckpointFile& c) { return c.path == path; });
    if (shard == shards.end()) shard = shards.insert(shards.end(), CheckpointFile{path, {}});
    shard->listed.insert(name);
  }
  return shards;
}

NamedTensors read_checkpoint_dir(const std::string& dir) {
  NamedTensors all;
  for (auto& file : checkpoint_files(dir)) {
    auto part = read_safetensors(file.path);
    for (auto& t : part.tensors)
      if (file.takes(t.first)) all.push_back(std::move(t));
  }
  return all;
}

void write_checkpoint_dir(const std::string& dir, const NamedTensors& tensors, int64_t max_shard_bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw Error(fmt::format("save: cannot create the directory '{}': {}", dir,
                            ec ? ec.message() : "a file of that name is in the way"));
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  if (max_shard_bytes <= 0) {
    write_safetensors((fs::path(dir) / "model.safetensors").string(), tensors, meta);
    return;
  }
  std::vector<NamedTensors> shards(1);
  int64_t current = 0, total = 0;
  for (auto& t : tensors) {
    int64_t bytes = t.second.numel() * t.second.element_size();
    if (current > 0 && current + bytes > max_shard_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(t);
    current += bytes;
    total += bytes;
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", json::object()}};
  for (size_t i = 0; i < shards.size(); ++i) {
    std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    write_safetensors((fs::path(dir) / file).string(), shards[i], meta);
    for (auto& t : shards[i]) index["weight_map"][t.first] = file;
  }
  std::ofstream((fs::path(dir) / "model.safetensors.index.json").string()) << index.dump(2) << "\n";
}

}  // namespace slapo
