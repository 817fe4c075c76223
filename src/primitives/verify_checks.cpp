// The comparisons verify makes (primitives/verify_checks.h).
#include "primitives/verify_checks.h"

#include "core/error.h"

namespace slapo {

Value same_on_all_ranks(const Value& v, const std::shared_ptr<dist::Group>& g) {
  if (v.isTensor()) {
    at::Tensor t = v.toTensor().detach().clone();
    g->broadcast(t, 0, "verify");
    return t;
  }
  if (v.isList()) {
    c10::impl::GenericList out(c10::AnyType::get());
    for (const auto& e : v.toListRef()) out.push_back(same_on_all_ranks(e, g));
    return out;
  }
  if (v.isGenericDict()) {
    c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
    for (auto& e : v.toGenericDict()) out.insert(e.key(), same_on_all_ranks(e.value(), g));
    return out;
  }
  return v;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.detach().to(at::kDouble) - b.detach().to(at::kDouble)).abs().max().item<double>();
}

double atol_for(const at::Tensor& reference, const VerifyOptions& o) {
  if (o.atol >= 0) return o.atol;
  double scale = reference.numel() ? reference.detach().abs().max().item<double>() : 0.0;
  return 1e-5 * std::max(1.0, scale);
}

bool close(const at::Tensor& ref, const at::Tensor& got, const VerifyOptions& o) {
  return ref.sizes() == got.sizes() &&
         at::allclose(got.detach().to(at::kDouble), ref.detach().to(at::kDouble), o.rtol, atol_for(ref, o));
}

bool any_rank(bool failed, const std::shared_ptr<dist::Group>& g) {
  at::Tensor flag = torch::full({1}, failed ? 1.0 : 0.0);
  g->all_reduce(flag, "verify");
  return flag.item<double>() > 0;
}

void check_same_weights(Module& reference, const std::shared_ptr<dist::Group>& g) {
  if (g->size() == 1) return;
  std::vector<std::string> names;
  std::vector<double> sums;
  for (auto& p : reference.named_parameters()) {
    names.push_back(p.key());
    sums.push_back(p.value().detach().to(at::kDouble).sum().item<double>());
  }
  at::Tensor mine = torch::tensor(sums, at::kDouble);
  at::Tensor first = mine.clone();
  g->broadcast(first, 0, "verify");
  at::Tensor differs = mine.ne(first).to(at::kDouble);
  g->all_reduce(differs, "verify");  // every rank learns which parameters differ anywhere
  auto bad = differs.nonzero();
  if (bad.size(0) == 0) return;
  throw Error(fmt::format("verify: parameter '{}' of the unscheduled model differs between ranks; build the model "
                          "from the same seed on every rank (slapo.manual_seed before building)",
                          names[static_cast<size_t>(bad[0][0].item<int64_t>())]));
}

}  // namespace slapo
