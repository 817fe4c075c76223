// Ring attention's forward and backward as one autograd Function over point-to-point messages.
#include "distributed/ring_attention.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "distributed/attention_pieces.h"
#include "distributed/world.h"

namespace slapo::dist {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Messages of one pass around the ring match by tag: every rank of a group makes its passes in the
// same order (each attention's forward, its recomputation, its backward), so a count kept per
// process names them alike on every rank, apart from other point-to-point traffic.
int next_pass_tag() {
  static int pass = 0;
  constexpr int kBase = 1 << 22, kPasses = 1 << 12, kSteps = 1 << 8;
  return kBase + (pass++ % kPasses) * kSteps;
}

// The repeated heads' gradients summed back onto their key/value head.
at::Tensor sum_heads(const at::Tensor& g, int64_t groups) {
  if (groups == 1) return g;
  auto s = g.sizes();
  return g.view({s[0], s[1] / groups, groups, s[2], s[3]}).sum(2);
}

// Hands `block` to the next rank and takes the previous rank's: the send starts before the caller's
// compute on the block in hand and the receive is waited for after it.
class RingStep {
 public:
  RingStep(const std::shared_ptr<Group>& group, int tag) : group_(group), tag_(tag) {}
  void start(const at::Tensor& block) {
    const int n = group_->size();
    group_->send(block, (group_->rank() + 1) % n, tag_, "ring_attention");
  }
  at::Tensor finish(const at::Tensor& like) {
    const int n = group_->size();
    at::Tensor incoming = at::empty_like(like);
    group_->recv(incoming, (group_->rank() + n - 1) % n, tag_++, "ring_attention");
    group_->wait_sends();
    return incoming;
  }

 private:
  std::shared_ptr<Group> group_;
  int tag_;
};

// Where every rank's tokens sit: the positions on the queries' device (for the masks) and each
// rank's runs, read once on the host (which pieces to compute is decided there).
struct RingPositions {
  at::Tensor on_device;
  std::vector<std::vector<Run>> runs;
  RingPositions(const at::Tensor& positions, const at::Device& device) : on_device(positions.to(device)) {
    auto host = positions.to(at::kCPU).contiguous();
    for (int64_t r = 0; r < host.size(0); ++r) runs.push_back(runs_of(host[r]));
  }
};

// The scores of one piece's queries against its keys, -inf where a key comes after the query (or
// before its window, or in another document), in float32. The queries x keys matrices are the
// ring's largest tensors, so each step works on them in place: one or two alive at a time.
at::Tensor piece_scores(const Piece& piece, const at::Tensor& q, const at::Tensor& keys, const at::Tensor& q_pos,
                        const at::Tensor& k_pos, double scale, int64_t window, const at::Tensor& documents) {
  auto scores = at::matmul(q.narrow(2, piece.row, piece.length),
                           keys.narrow(2, piece.keys.start, piece.keys.length).transpose(-1, -2))
                    .mul_(scale);
  if (!piece.masked && !piece.documents) return scores;
  auto key_index = k_pos.narrow(0, piece.keys.start, piece.keys.length), query_index = q_pos.narrow(0, piece.row, piece.length);
  auto key_pos = key_index.unsqueeze(0), query_pos = query_index.unsqueeze(1);
  auto hidden = key_pos > query_pos;
  if (window > 0) hidden = hidden.logical_or_(key_pos <= query_pos - window);
  if (piece.documents)  // [B, 1, queries, keys]: each row's own documents
    hidden = hidden.logical_or(documents.index_select(1, query_index).unsqueeze(2) !=
                               documents.index_select(1, key_index).unsqueeze(1))
                 .unsqueeze(1);
  return scores.masked_fill_(hidden, -std::numeric_limits<float>::infinity());
}


// The ring's group by id, or none (kAlone): this rank's block alone, no messages.
constexpr int64_t kAlone = -1;
std::shared_ptr<Group> group_of(int64_t id) { return id == kAlone ? nullptr : group_by_id(static_cast<int>(id)); }

struct RingAttention : public torch::autograd::Function<RingAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q_in, const at::Tensor& k_in,
                            const at::Tensor& v_in, const at::Tensor& positions, int64_t group_id, double scale,
                            int64_t score_bytes, int64_t window, const at::Tensor& documents_in) {
    auto group = group_of(group_id);
    const int n = group ? group->size() : 1, me = group ? group->rank() : 0;
    const int64_t groups = q_in.size(1) / k_in.size(1);
    auto q = q_in.to(at::kFloat);
    const RingPositions where(positions, q.device());
    auto q_pos = where.on_device[me];
    // none: an empty tensor (autograd's Function takes no undefined inputs)
    const at::Tensor documents = documents_in.numel() > 0 ? documents_in.to(q.device()) : at::Tensor();
    const DocumentSpans spans(documents_in.numel() > 0 ? documents_in : at::Tensor());
    // a row may have no key yet in a piece (all masked at a window's edge, or in other documents)
    const bool may_be_empty = window > 0 || documents.defined();
    auto kv = at::stack({k_in, v_in}).contiguous();  // one message a step
    auto out = at::zeros_like(q), sum = at::zeros({q.size(0), q.size(1), q.size(2), 1}, q.options());
    auto max = at::full_like(sum, -std::numeric_limits<float>::infinity());
    RingStep ring(group, n > 1 ? next_pass_tag() : 0);
    const int64_t side = piece_side(q, score_bytes);
    for (int step = 0, owner = me; step < n; ++step, owner = (owner + n - 1) % n) {
      if (step + 1 < n) ring.start(kv);
      auto keys = repeat_heads(kv[0].to(at::kFloat), groups), values = repeat_heads(kv[1].to(at::kFloat), groups);
      for (auto& piece : pieces_of(where.runs[me], where.runs[owner], side, window, spans)) {
        auto row_max = max.narrow(2, piece.row, piece.length), row_sum = sum.narrow(2, piece.row, piece.length);
        auto row_out = out.narrow(2, piece.row, piece.length);
        auto scores = piece_scores(piece, q, keys, q_pos, where.on_device[owner], scale, window, documents);
        auto new_max = at::maximum(row_max, std::get<0>(scores.max(-1, /*keepdim=*/true)));
        // a row with no key yet (all masked so far) subtracts 0: its terms are 0
        auto shift = may_be_empty ? new_max.masked_fill(new_max.isinf(), 0.0) : new_max;
        auto correction = (row_max - shift).exp();
        auto p = scores.sub_(shift).exp_();
        row_sum.mul_(correction).add_(p.sum(-1, /*keepdim=*/true));
        row_out.mul_(correction).add_(at::matmul(p, values.narrow(2, piece.keys.start, piece.keys.length)));
        row_max.copy_(new_max);
      }
      if (step + 1 < n) kv = ring.finish(kv);
    }
    out = out / sum;
    ctx->save_for_backward({q_in, k_in, v_in, positions, out, max + sum.log(), documents_in});
    ctx->saved_data["group"] = group_id;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["score_bytes"] = score_bytes;
    ctx->saved_data["window"] = window;
    return out.to(q_in.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &q_in = saved[0], &k_in = saved[1], &v_in = saved[2], &positions = saved[3], &out = saved[4],
               &lse = saved[5];
    const at::Tensor documents = saved[6].numel() > 0 ? saved[6].to(q_in.device()) : at::Tensor();
    const DocumentSpans spans(saved[6].numel() > 0 ? saved[6] : at::Tensor());
    auto group = group_of(ctx->saved_data["group"].toInt());
    const double scale = ctx->saved_data["scale"].toDouble();
    const int n = group ? group->size() : 1, me = group ? group->rank() : 0;
    const int64_t groups = q_in.size(1) / k_in.size(1);
    auto q = q_in.to(at::kFloat), dout = grads[0].to(at::kFloat);
    const RingPositions where(positions, q.device());
    auto q_pos = where.on_device[me];
    auto delta = (dout * out).sum(-1, /*keepdim=*/true);
    auto dq = at::zeros_like(q);
    // each block travels with its key and value gradients: [k, v, dk, dv]
    auto block = at::cat({at::stack({k_in, v_in}).to(at::kFloat), at::zeros({2, k_in.size(0), k_in.size(1),
                                                                               k_in.size(2), k_in.size(3)}, q.options())})
                     .contiguous();
    RingStep ring(group, n > 1 ? next_pass_tag() : 0);
    const int64_t side = piece_side(q, ctx->saved_data["score_bytes"].toInt());
    const int64_t window = ctx->saved_data["window"].toInt();
    for (int step = 0, owner = me; step < n; ++step, owner = (owner + n - 1) % n) {
      auto keys = repeat_heads(block[0], groups), values = repeat_heads(block[1], groups);
      for (auto& piece : pieces_of(where.runs[me], where.runs[owner], side, window, spans)) {
        const int64_t row = piece.row, length = piece.length, key = piece.keys.start, key_length = piece.keys.length;
        auto row_q = q.narrow(2, row, length), row_dout = dout.narrow(2, row, length);
        auto piece_values = values.narrow(2, key, key_length);
        auto p = piece_scores(piece, q, keys, q_pos, where.on_device[owner], scale, window, documents)
                     .sub_(lse.narrow(2, row, length))
                     .exp_();
        auto ds = at::matmul(row_dout, piece_values.transpose(-1, -2)).sub_(delta.narrow(2, row, length)).mul_(p);
        dq.narrow(2, row, length).add_(at::matmul(ds, keys.narrow(2, key, key_length)), scale);
        block[2].narrow(2, key, key_length) += sum_heads(at::matmul(ds.transpose(-1, -2), row_q) * scale, groups);
        block[3].narrow(2, key, key_length) += sum_heads(at::matmul(p.transpose(-1, -2), row_dout), groups);
      }
      if (step + 1 < n) {
        ring.start(block);
        block = ring.finish(block);
      }
    }
    // the block in hand is the next rank's: its gradients go home, and this rank's come back
    at::Tensor mine = block.narrow(0, 2, 2).contiguous();
    if (n > 1) {
      ring.start(mine);
      mine = ring.finish(mine);
    }
    return {dq.to(q_in.scalar_type()), mine[0].to(k_in.scalar_type()), mine[1].to(v_in.scalar_type()), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor repeat_heads(const at::Tensor& x, int64_t groups) {
  if (groups == 1) return x;
  auto s = x.sizes();
  return x.unsqueeze(2).expand({s[0], s[1], groups, s[2], s[3]}).reshape({s[0], s[1] * groups, s[2], s[3]});
}

at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& positions,
                          const std::shared_ptr<Group>& group, double scale, int64_t score_bytes, int64_t window,
                          const at::Tensor& documents) {
  return RingAttention::apply(q, k, v, positions, static_cast<int64_t>(group->id()), scale, score_bytes, window,
                              documents.defined() ? documents : at::empty({0}, at::kLong));
}

at::Tensor blockwise_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const at::Tensor& positions, double scale, int64_t score_bytes, int64_t window,
                                      const at::Tensor& documents) {
  return RingAttention::apply(q, k, v, positions.reshape({1, -1}), kAlone, scale, score_bytes, window,
                              documents.defined() ? documents : at::empty({0}, at::kLong));
}

}  // namespace slapo::dist
