/* The capture C ABI used from C with nothing but ssmcheck_capture.h: writes DIR/capi.h5 (replays
 * with exit 0), DIR/capi_bad.h5 (a wrong recorded state: exit 1) and an abandoned capture
 * DIR/capi_partial.h5.partial (2 ops recovered), and checks the error codes of misuse. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssmcheck_capture.h"

enum { NK = 1, NV = 2, KD = 8, VD = 12, DC = 4, CD = 2 * NK * KD + NV * VD };

static int failures = 0;
#define EXPECT(cond)                                                                  \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "%s:%d: EXPECT(%s) failed: %s\n", __FILE__, __LINE__, #cond,    \
              ssmc_last_error());                                                     \
      ++failures;                                                                     \
    }                                                                                 \
  } while (0)

static float val(int i, float scale) { return scale * (float)((i * 37 + 11) % 97 - 48) / 64.0f; }

static void fill(float* p, int n, int salt, float scale) {
  for (int i = 0; i < n; ++i) p[i] = val(i + salt * 131, scale);
}

static ssmc_trace* start(const char* path) {
  ssmc_trace* t = NULL;
  EXPECT(ssmc_open(path, "trace_capture_c", "c-test", "capi", "f32", &t) == SSMC_OK);
  EXPECT(ssmc_set_pool(t, 2, NULL, 4, 1) == SSMC_OK);
  static float conv_w[CD * DC], a_log[NV], dt_bias[NV], norm_w[VD];
  fill(conv_w, CD * DC, 1, 0.5f);
  for (int i = 0; i < NV; ++i) { a_log[i] = -4.0f + 0.25f * (float)i; dt_bias[i] = -0.5f; }
  for (int i = 0; i < VD; ++i) norm_w[i] = 1.0f + 0.01f * (float)i;
  ssmc_layer_desc d = {NK, NV, KD, VD, DC, 0, 0, 1e-6f};
  EXPECT(ssmc_add_layer(t, &d, conv_w, NULL, a_log, dt_bias, norm_w) == SSMC_OK);
  return t;
}

static void inputs(ssmc_trace* t, int entry, int rows, int salt) {
  float* x = malloc(sizeof(float) * (size_t)(rows * CD));
  float a[16], b[16];
  float* z = malloc(sizeof(float) * (size_t)(rows * NV * VD));
  fill(x, rows * CD, salt, 1.0f);
  fill(a, rows * NV, salt + 1, 2.0f);
  fill(b, rows * NV, salt + 2, 2.0f);
  fill(z, rows * NV * VD, salt + 3, 1.5f);
  EXPECT(ssmc_op_inputs(t, entry, 0, x, a, b, z, SSMC_HOST) == SSMC_OK);
  free(x);
  free(z);
}

/* A zero state of sequence 0 (fresh after alloc). */
static void zero_state(ssmc_trace* t) {
  static float h[NV * KD * VD], conv[CD * DC];
  EXPECT(ssmc_state_begin(t, 0, 0, 0) == SSMC_OK);
  EXPECT(ssmc_state_tensor(t, 0, 0, "h", 0, SSMC_F32, h, SSMC_HOST) == SSMC_OK);
  EXPECT(ssmc_state_tensor(t, 0, 0, "conv", 0, SSMC_F32, conv, SSMC_HOST) == SSMC_OK);
}

static void write_trace_file(const char* path, int bad) {
  ssmc_trace* t = start(path);
  EXPECT(ssmc_begin_op(t, "alloc") == SSMC_OK);
  zero_state(t);
  EXPECT(ssmc_end_op(t) == SSMC_OK);
  EXPECT(ssmc_begin_op(t, "prefill 3") == SSMC_OK);
  inputs(t, 0, 3, 5);
  if (bad) zero_state(t); /* wrong: the state after a prefill is not zero */
  EXPECT(ssmc_end_op(t) == SSMC_OK);
  EXPECT(ssmc_begin_op(t, "to_f16") == SSMC_OK);
  EXPECT(ssmc_op_refused(t, "wrong_mode") == SSMC_OK);
  EXPECT(ssmc_end_op(t) == SSMC_OK);
  EXPECT(ssmc_begin_op(t, "decode @0,pad") == SSMC_OK); /* padding entry without inputs */
  inputs(t, 0, 1, 9);
  EXPECT(ssmc_end_op(t) == SSMC_OK);
  EXPECT(ssmc_begin_op(t, "release") == SSMC_OK);
  EXPECT(ssmc_end_op(t) == SSMC_OK);
  EXPECT(ssmc_op_count(t) == 5);
  EXPECT(ssmc_close(t) == SSMC_OK);
}

static void misuse(const char* path) {
  ssmc_trace* t = start(path);
  float x[CD] = {0}, a[NV] = {0}, b[NV] = {0}, z[NV * VD] = {0};
  /* what the trace reader refuses is refused here too, and changes nothing (core/model.h bounds) */
  EXPECT(ssmc_set_pool(t, 2, NULL, 70000, 1) == SSMC_ERR_ARGUMENT);
  {
    static float w[CD * DC], v[NV], n[VD];
    ssmc_layer_desc wide = {1, 70000, KD, VD, DC, 0, 0, 1e-6f};
    ssmc_layer_desc inf_eps = {NK, NV, KD, VD, DC, 0, 0, INFINITY};
    EXPECT(ssmc_add_layer(t, &wide, w, NULL, v, v, n) == SSMC_ERR_ARGUMENT);
    EXPECT(ssmc_add_layer(t, &inf_eps, w, NULL, v, v, n) == SSMC_ERR_ARGUMENT);
  }
  EXPECT(ssmc_op_inputs(t, 0, 0, x, a, b, z, SSMC_HOST) == SSMC_ERR_ORDER); /* outside an op */
  EXPECT(strlen(ssmc_last_error()) > 0);
  EXPECT(ssmc_begin_op(t, "frobnicate 3") == SSMC_ERR_ARGUMENT);
  EXPECT(ssmc_begin_op(t, "decode") == SSMC_OK);
  EXPECT(ssmc_op_inputs(t, 1, 0, x, a, b, z, SSMC_HOST) == SSMC_ERR_ARGUMENT); /* no entry 1 */
  EXPECT(ssmc_begin_op(t, "decode") == SSMC_OK); /* the failed call dropped the op */
  EXPECT(ssmc_end_op(t) == SSMC_ERR_INVALID);    /* inputs missing */
  EXPECT(ssmc_begin_op(t, "decode") == SSMC_OK);
  x[3] = NAN;
  EXPECT(ssmc_op_inputs(t, 0, 0, x, a, b, z, SSMC_HOST) == SSMC_OK);
  EXPECT(ssmc_end_op(t) == SSMC_ERR_INVALID); /* NaN input */
  x[3] = 0;
  EXPECT(ssmc_begin_op(t, "commit 0 2") == SSMC_OK);
  EXPECT(ssmc_op_refused(t, "no_such_kind") == SSMC_ERR_ARGUMENT);
  EXPECT(ssmc_begin_op(t, "alloc") == SSMC_OK);
  if (!ssmc_device_support()) {
    EXPECT(ssmc_state_begin(t, 0, 0, 0) == SSMC_OK);
    EXPECT(ssmc_state_tensor(t, 0, 0, "h", 0, SSMC_F32, x, SSMC_DEVICE) == SSMC_ERR_DEVICE);
    EXPECT(ssmc_begin_op(t, "alloc") == SSMC_OK);
  }
  EXPECT(ssmc_state_begin(t, 0, 0, 2) == SSMC_OK);
  static float h[NV * KD * VD], conv[CD * DC];
  EXPECT(ssmc_state_tensor(t, 0, 0, "h", 0, SSMC_F32, h, SSMC_HOST) == SSMC_OK);
  EXPECT(ssmc_state_tensor(t, 0, 0, "conv", 0, SSMC_F16, conv, SSMC_HOST) == SSMC_ERR_ARGUMENT); /* conv is f32 */
  EXPECT(ssmc_begin_op(t, "alloc") == SSMC_OK);
  EXPECT(ssmc_state_begin(t, 0, 0, 2) == SSMC_OK);
  EXPECT(ssmc_state_tensor(t, 0, 0, "h", 0, SSMC_F32, h, SSMC_HOST) == SSMC_OK);
  EXPECT(ssmc_state_tensor(t, 0, 0, "conv", 0, SSMC_F32, conv, SSMC_HOST) == SSMC_OK);
  EXPECT(ssmc_end_op(t) == SSMC_ERR_INVALID); /* K=2 needs intermediate 0 */
  EXPECT(ssmc_trace_version() == SSMC_TRACE_VERSION);
  ssmc_abandon(t);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: trace_capture_c DIR\n");
    return 2;
  }
  char p[4096];
  snprintf(p, sizeof p, "%s/capi.h5", argv[1]);
  write_trace_file(p, 0);
  snprintf(p, sizeof p, "%s/capi_bad.h5", argv[1]);
  write_trace_file(p, 1);
  snprintf(p, sizeof p, "%s/misuse.h5", argv[1]);
  misuse(p);
  /* an engine that dies after two ops: the partial capture keeps both */
  snprintf(p, sizeof p, "%s/capi_partial.h5", argv[1]);
  ssmc_trace* t = start(p);
  EXPECT(ssmc_begin_op(t, "alloc") == SSMC_OK);
  EXPECT(ssmc_end_op(t) == SSMC_OK);
  EXPECT(ssmc_begin_op(t, "prefill 2") == SSMC_OK);
  inputs(t, 0, 2, 3);
  EXPECT(ssmc_end_op(t) == SSMC_OK);
  EXPECT(ssmc_begin_op(t, "decode") == SSMC_OK); /* never ended */
  ssmc_abandon(t);
  if (failures) fprintf(stderr, "%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
