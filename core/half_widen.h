// Many halves to floats at once, for the host loops that widen whole FP16 blocks (the reference's
// head loads, the comparison's FP16 sides): on an x86 CPU with F16C (and AVX) 8 halves per
// vcvtph2ps, elsewhere half_to_float one at a time. The values are the same either way (the F16C
// conversion is exact, as half_to_float is); only a signalling NaN's float differs, F16C returning
// it quieted.
#pragma once
#include <cstdint>

namespace ssm {

// out[k] = half_to_float(in[k]) for k < n (F16C where the CPU has it); as doubles, exactly.
void widen_halves(const uint16_t* in, float* out, int64_t n);
void widen_halves(const uint16_t* in, double* out, int64_t n);

// Whether widen_halves takes the F16C path: the CPU has F16C and AVX (checked once).
bool cpu_has_f16c();

}  // namespace ssm
