// Schedule perturbation: the seeded plans (see schedule.h).
#include "cuda/schedule.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace ssm::cuda {

namespace {
thread_local Schedule* t_current = nullptr;
}  // namespace

void Schedule::perturb(uint64_t seed) {
  on_ = true;
  seed_ = seed;
  count_ = 0;
}

void Schedule::reset() { count_ = 0; }

uint64_t Schedule::draw() {
  uint64_t z = seed_ + 0x9e3779b97f4a7c15ull * ++count_;  // splitmix64
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

Schedule::Plan Schedule::next(unsigned n) {
  Plan p;
  const uint64_t r = draw();
  if (n > 1) {
    // a multiplier coprime with n (1 is, so the search ends)
    unsigned mul = unsigned(r % n);
    while (std::gcd(mul, n) != 1) mul = (mul + 1) % n;
    p.mul = mul;
    p.add = unsigned((r >> 32) % n);
  }
  // 2 to 4 waves (as many as there are blocks), cut at drawn positions
  const unsigned waves = n < 2 ? 1 : std::min<unsigned>(n, 2 + unsigned((r >> 20) % 3));
  p.cuts.push_back(0);
  for (unsigned w = 1; w < waves; ++w) {
    const unsigned lo = p.cuts.back() + 1, hi = n - (waves - w);  // leave a block for each later wave
    p.cuts.push_back(lo + unsigned(draw() % (hi - lo + 1)));
  }
  p.cuts.push_back(n);
  return p;
}

unsigned Schedule::persistent_grid(unsigned ctas) {
  const unsigned shift = 1 + unsigned(draw() % 3);  // 1/2, 1/4 or 1/8 of the CTAs
  return std::max(1u, ctas >> shift);
}

unsigned Schedule::delay_ns() { return 10000 + unsigned(draw() % 50001); }

bool is_bijection(const Schedule::Plan& plan, unsigned n) {
  if (plan.cuts.empty() || plan.cuts.front() != 0 || plan.cuts.back() != n) return false;
  for (size_t w = 1; w < plan.cuts.size(); ++w)
    if (plan.cuts[w] <= plan.cuts[w - 1] && n > 0) return false;
  std::vector<bool> seen(n, false);
  for (unsigned i = 0; i < n; ++i) {
    const unsigned l = unsigned((uint64_t(plan.mul) * i + plan.add) % n);
    if (seen[l]) return false;
    seen[l] = true;
  }
  return true;
}

Schedule* current_schedule() { return t_current; }

ScheduleScope::ScheduleScope(Schedule* s) : previous_(t_current) { t_current = s && s->on() ? s : nullptr; }
ScheduleScope::~ScheduleScope() { t_current = previous_; }

}  // namespace ssm::cuda
