// Schedule perturbation (docs/cuda.md, "Perturbed schedules"): a debug mode in which the launches
// of the CUDA implementation run their blocks in a seeded order, spread over several waves on
// purpose, with the batched copies delayed, so that a kernel or a host sequence that is correct
// only in the order the hardware usually picks (a grid that fits in one wave, a copy that is
// usually done before its reader starts) fails on every run instead of by luck.
//
// What a perturbed launch does: the launch's blocks are numbered 0..n-1 (blockIdx.x fastest); a
// bijection i -> (mul * i + add) mod n (mul coprime with n) gives the block each position runs,
// and the positions are cut into 2 to 4 waves, each launched after the one before it has ended
// (plain launches on the same stream). A persistent kernel (the GDN row kernel) runs its work items
// in the permuted order on a grid cut to a fraction of its CTAs. The batched copies (checkpoint,
// commit, rollback, restore, async checkpoint) start with a delay of 10 to 60 us on their stream,
// and a widen of FP16 h (a prefill on FP16 state) lets the kernel after it start at once and
// stores 10 to 60 us later.
// None of this changes a result bit of a correct implementation: every block's work is the same,
// only when it runs changes.
//
// The plan of every launch comes from the seed and the count of launches since the pool was made,
// so a case's schedule depends on its seed and its ops alone: a failing case reruns the same way.
// Host code only (no CUDA types): the launchers read the schedule of the engine that is enqueueing
// on their thread (ScheduleScope), so the kernel files need no engine.
#pragma once
#include <cstdint>
#include <vector>

namespace ssm::cuda {

// The block order of one launch (or one wave of it), passed to the kernel in its parameters.
// n == 0: the launch as written (blockIdx and gridDim themselves).
struct BlockOrder {
  unsigned n = 0;             // logical blocks: gx * gy
  unsigned gx = 0, gy = 0;    // the logical grid
  unsigned first = 0;         // logical position of this wave's block 0 (waves are 1-D launches)
  unsigned mul = 1, add = 0;  // position i runs logical block (mul * i + add) mod n
};

class Schedule {
 public:
  // seed: perturb every launch from now on, as the seed says; reset() starts the plan again.
  void perturb(uint64_t seed);
  bool on() const { return on_; }
  void reset();  // the plan of the next launch is the first again (a new pool: a case starts)

  struct Plan {
    unsigned mul = 1, add = 0;
    std::vector<unsigned> cuts;  // wave w covers positions [cuts[w], cuts[w + 1]); cuts[0] = 0, back() = n
  };
  Plan next(unsigned n);                    // the plan of the next launch of n blocks
  unsigned persistent_grid(unsigned ctas);  // a persistent kernel's grid: 1/2 to 1/8 of its CTAs
  unsigned delay_ns();                      // the delay before the next batched copies or widen stores

 private:
  uint64_t draw();  // splitmix64 of seed_ and the count so far
  bool on_ = false;
  uint64_t seed_ = 0, count_ = 0;
};

// A bijection on n positions and its waves, as Schedule::next draws them (tests check them).
bool is_bijection(const Schedule::Plan& plan, unsigned n);

// The schedule of the engine enqueueing on this thread, or null (launch as written).
Schedule* current_schedule();

// Makes `s` the current schedule of this thread for the scope's life (null: none).
class ScheduleScope {
 public:
  explicit ScheduleScope(Schedule* s);
  ~ScheduleScope();
  ScheduleScope(const ScheduleScope&) = delete;
  ScheduleScope& operator=(const ScheduleScope&) = delete;

 private:
  Schedule* previous_;
};

}  // namespace ssm::cuda
