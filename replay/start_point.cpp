// Start points of a replay (see start_point.h).
#include "replay/start_point.h"

#include <fmt/core.h>

#include <map>
#include <stdexcept>

#include "core/contract.h"

namespace ssm::replay {

std::vector<std::vector<std::pair<int, int>>> live_slots(const formats::TraceSource& tr) {
  Contract c(tr.header.model.spec, tr.header.pool);
  std::map<int, int> live;
  std::vector<std::vector<std::pair<int, int>>> out;
  try {  // a trace cut out of a longer one starts with its start states claimed
    for (const formats::TraceState& ts : tr.header.start) {
      c.on_import(ts.state.slot, c.check_import(ts.state.slot, ts.state));
      live[ts.seq] = ts.state.slot;
    }
  } catch (const std::invalid_argument&) {
    return out;
  }
  for (const formats::TraceOpHead& t : tr.heads) {
    if (!t.refused) {
      const int seq = t.op.seqs.at(0);
      try {
        if (t.op.kind == OpKind::alloc) {
          if (live.count(seq)) break;
          const int slot = c.check_alloc(t.op.alloc_min_capacity());
          c.on_alloc(slot);
          live[seq] = slot;
        } else if (t.op.kind == OpKind::release) {
          if (!live.count(seq)) break;
          c.on_release(live.at(seq));
          live.erase(seq);
        }
      } catch (const StateError&) {
        break;  // the trace accepted what the contract refuses: nothing after it is a start
      }
    }
    out.emplace_back(live.begin(), live.end());
  }
  return out;
}

namespace {

// [first, last] ranges of ops after which a start would miss a snapshot a later restore reads.
std::vector<int> snapshot_blocked(const formats::TraceSource& tr) {
  std::vector<int> diff(tr.size() + 1, 0);
  std::map<int, int> saved;  // snapshot slot -> last accepted save
  for (size_t j = 0; j < tr.size(); ++j) {
    const formats::TraceOpHead& t = tr.heads[j];
    if (t.op.kind == OpKind::snapshot_restore && saved.count(t.op.snapshot_index())) {
      ++diff[size_t(saved.at(t.op.snapshot_index()))];
      --diff[j];
    }
    if (t.op.kind == OpKind::snapshot_save && !t.refused) saved[t.op.snapshot_index()] = int(j);
  }
  std::vector<int> blocked(tr.size(), 0);
  int run = 0;
  for (size_t i = 0; i < tr.size(); ++i) blocked[i] = (run += diff[i]);
  return blocked;
}

std::string why_not(const formats::TraceSource& tr, int op, const std::vector<std::vector<std::pair<int, int>>>& live,
                    const std::vector<int>& blocked) {
  if (op < 0 || size_t(op) >= tr.size()) return fmt::format("no op {} (the trace has {})", op, tr.size());
  if (size_t(op) >= live.size())
    return fmt::format("the contract refuses an alloc or release the trace accepted at or before op {}", live.size());
  if (blocked[size_t(op)])
    return "a later snapshot_restore reads a snapshot saved at or before it (snapshots are not recorded)";
  const formats::TraceOpHead& t = tr.heads[size_t(op)];
  const size_t L = tr.header.model.spec.layers.size();
  for (const auto& [seq, slot] : live[size_t(op)]) {
    const formats::TraceStateHead* s = nullptr;
    for (const formats::TraceStateHead& ts : t.states)
      if (ts.seq == seq) s = &ts;
    if (!s) return fmt::format("the state of live seq {} is not recorded", seq);
    if (size_t(s->layers) != L) return fmt::format("seq {} is recorded in {} of the {} layers", seq, s->layers, L);
    if (tr.header.pool.h_mode == HMode::f16_pool && !s->stage)
      return fmt::format("seq {} is recorded without its h_prefill_stage (f16-pool)", seq);
  }
  return "";
}

}  // namespace

std::vector<int> start_points(const formats::TraceSource& tr) {
  const auto live = live_slots(tr);
  const auto blocked = snapshot_blocked(tr);
  std::vector<int> v;
  for (size_t i = 0; i < live.size(); ++i)
    if (why_not(tr, int(i), live, blocked).empty()) v.push_back(int(i));
  return v;
}

std::string why_not_start(const formats::TraceSource& tr, int op) {
  return why_not(tr, op, live_slots(tr), snapshot_blocked(tr));
}

StartPoint start_point(const formats::TraceSource& tr, int op) {
  StartPoint p;
  p.after_op = op;
  if (op < 0) {  // op 0, from the trace's own start (TraceHeader::start; usually an empty pool)
    for (const formats::TraceState& ts : tr.header.start) p.slots.emplace_back(ts.seq, ts.state.slot);
    return p;
  }
  const auto live = live_slots(tr);
  const std::string why = why_not(tr, op, live, snapshot_blocked(tr));
  if (!why.empty()) throw std::invalid_argument(fmt::format("op {} is not a start point: {}", op, why));
  p.slots = live[size_t(op)];
  return p;
}

std::vector<std::vector<std::pair<int, int>>> live_slots(const formats::Trace& trace) {
  return live_slots(formats::MemoryTrace(trace));
}
std::vector<int> start_points(const formats::Trace& trace) { return start_points(formats::MemoryTrace(trace)); }
StartPoint start_point(const formats::Trace& trace, int op) { return start_point(formats::MemoryTrace(trace), op); }
std::string why_not_start(const formats::Trace& trace, int op) {
  return why_not_start(formats::MemoryTrace(trace), op);
}

}  // namespace ssm::replay
