/* The capture C ABI used from C with nothing but ssmcheck_capture.h: writes DIR/capi.h5 (replays
 * with exit 0), DIR/capi_bad.h5 (a wrong recorded state: exit 1) and an abandoned capture
 * DIR/capi_partial.h5.partial (2 ops recovered), and checks the error codes of misuse.
 * Mamba-2 layers (ABI minor 1): DIR/capi_mamba2.h5, two Mamba-2 layers (one with conv bias and
 * the norm after the gate, one without bias, norm before the gate, dt limits that clamp) whose
 * outputs and full states (checkpoint, verify intermediates, commit) this file computes itself
 * from the contract's Mamba-2 step (replays with exit 0); DIR/capi_mamba2_bad.h5, the same with
 * one h element off after the decode (exit 1); DIR/capi_mixed.h5, GDN and Mamba-2 layers
 * alternating, inputs of every layer and the states of the Mamba-2 layers (exit 0); and the
 * error codes and messages of Mamba-2 misuse.
 * Conventions (ABI minor 4): DIR/capi_mamba2_engine.h5 and DIR/capi_mixed_engine.h5, the same
 * models recorded by an engine that declares (ssmc_set_layer_convention) a d_conv-1 conv window
 * and h as [nh][ns][hp] on every layer, and torch gates on the GDN layers, and hands its states
 * over so (replay with exit 0; the GDN layers print as gates=torch); the refusals of unknown
 * convention names and values, of a convention after the first op, and the shapes
 * ssmc_state_field_shape reports. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssmcheck_capture.h"

enum { NK = 1, NV = 2, KD = 8, VD = 12, DC = 4, CD = 2 * NK * KD + NV * VD };

static int failures = 0;
/* 1: the Mamba-2 traces are recorded by an engine with a d_conv-1 window and h [nh][ns][hp] */
static int engine_layout = 0;
#define EXPECT(cond)                                                                  \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "%s:%d: EXPECT(%s) failed: %s\n", __FILE__, __LINE__, #cond,    \
              ssmc_last_error());                                                     \
      ++failures;                                                                     \
    }                                                                                 \
  } while (0)

#define EXPECT_MSG(cond, text)                                                        \
  do {                                                                                \
    EXPECT(cond);                                                                     \
    if (!strstr(ssmc_last_error(), text)) {                                           \
      fprintf(stderr, "%s:%d: the error \"%s\" does not say \"%s\"\n", __FILE__, __LINE__, \
              ssmc_last_error(), text);                                               \
      ++failures;                                                                     \
    }                                                                                 \
  } while (0)

static float val(int i, float scale) { return scale * (float)((i * 37 + 11) % 97 - 48) / 64.0f; }

static void fill(float* p, int n, int salt, float scale) {
  for (int i = 0; i < n; ++i) p[i] = val(i + salt * 131, scale);
}

/* A GDN layer of the shapes above. */
static void add_gdn(ssmc_trace* t) {
  static float conv_w[CD * DC], a_log[NV], dt_bias[NV], norm_w[VD];
  fill(conv_w, CD * DC, 1, 0.5f);
  for (int i = 0; i < NV; ++i) { a_log[i] = -4.0f + 0.25f * (float)i; dt_bias[i] = -0.5f; }
  for (int i = 0; i < VD; ++i) norm_w[i] = 1.0f + 0.01f * (float)i;
  ssmc_layer_desc d = {NK, NV, KD, VD, DC, 0, 0, 1e-6f};
  EXPECT(ssmc_add_layer(t, &d, conv_w, NULL, a_log, dt_bias, norm_w) == SSMC_OK);
}

static ssmc_trace* open_trace(const char* path) {
  ssmc_trace* t = NULL;
  EXPECT(ssmc_open(path, "trace_capture_c", "c-test", "capi", "f32", &t) == SSMC_OK);
  EXPECT(ssmc_set_pool(t, 2, NULL, 4, 1) == SSMC_OK);
  return t;
}

static ssmc_trace* start(const char* path) {
  ssmc_trace* t = open_trace(path);
  add_gdn(t);
  return t;
}

/* Inputs of a GDN layer. */
static void gdn_inputs(ssmc_trace* t, int entry, int layer, int rows, int salt) {
  float* x = malloc(sizeof(float) * (size_t)(rows * CD));
  float a[16], b[16];
  float* z = malloc(sizeof(float) * (size_t)(rows * NV * VD));
  fill(x, rows * CD, salt, 1.0f);
  fill(a, rows * NV, salt + 1, 2.0f);
  fill(b, rows * NV, salt + 2, 2.0f);
  fill(z, rows * NV * VD, salt + 3, 1.5f);
  EXPECT(ssmc_op_inputs(t, entry, layer, x, a, b, z, SSMC_HOST) == SSMC_OK);
  free(x);
  free(z);
}

static void inputs(ssmc_trace* t, int entry, int rows, int salt) { gdn_inputs(t, entry, 0, rows, salt); }

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
  /* ABI minor 2: an op the engine gave up on is dropped, and the capture goes on */
  EXPECT(ssmc_abi_minor() >= 2);
  EXPECT(ssmc_begin_op(t, "alloc") == SSMC_OK);
  EXPECT(ssmc_drop_op(t) == SSMC_OK);
  EXPECT(ssmc_end_op(t) == SSMC_ERR_ORDER); /* nothing begun any more */
  EXPECT(ssmc_drop_op(t) == SSMC_OK);       /* also when none is begun */
  EXPECT(ssmc_drop_op(NULL) == SSMC_ERR_ARGUMENT);
  EXPECT(ssmc_begin_op(t, "alloc") == SSMC_OK);
  EXPECT(ssmc_trace_version() == SSMC_TRACE_VERSION);
  ssmc_abandon(t);
}


/* ---- Mamba-2 layers (ABI minor 1) ---- */

enum { MAXL = 4, MAXK = 4 };

typedef struct {
  int gdn; /* 1: a GDN layer of the shapes above (its inputs are recorded, its state is not computed here) */
  ssmc_mamba2_layer_desc d;
  int cd, di; /* conv_dim = nh*hp + 2*ng*ns, d_inner = nh*hp */
  float *conv_w, *conv_bias, *A_log, *dt_bias, *D, *norm_w;
} layer_t;

/* One sequence's state at one Mamba-2 layer: live h and conv, checkpoint, verify intermediates. */
typedef struct {
  float *h, *conv, *h_ck, *conv_ck, *h_in[MAXK], *conv_in[MAXK];
} mstate;

typedef struct {
  int n;
  layer_t l[MAXL];
  mstate s[MAXL];
  int has_ck, last_k; /* of sequence 0, the only one */
} model_t;

static float* zeros(int n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }
static int h_elems(const layer_t* L) { return L->d.nh * L->d.hp * L->d.ns; }

static void mamba2_layer(layer_t* L, int nh, int hp, int ns, int ng, int dc, int bias, int norm_before_gate,
                         float dt_min, float dt_max, int salt) {
  ssmc_mamba2_layer_desc d = {nh, hp, ns, ng, dc, bias, norm_before_gate, dt_min, dt_max, 1e-5f};
  memset(L, 0, sizeof *L);
  L->d = d;
  L->cd = nh * hp + 2 * ng * ns;
  L->di = nh * hp;
  L->conv_w = zeros(L->cd * dc);
  fill(L->conv_w, L->cd * dc, salt, 0.5f);
  if (bias) {
    L->conv_bias = zeros(L->cd);
    fill(L->conv_bias, L->cd, salt + 1, 0.25f);
  }
  L->A_log = zeros(nh);
  L->dt_bias = zeros(nh);
  L->D = zeros(nh);
  L->norm_w = zeros(L->di);
  for (int h = 0; h < nh; ++h) {
    L->A_log[h] = -1.0f + 0.5f * (float)h;
    L->dt_bias[h] = -1.5f + 0.75f * (float)h;
    L->D[h] = 1.0f - 0.25f * (float)h;
  }
  for (int j = 0; j < L->di; ++j) L->norm_w[j] = 0.75f + 0.02f * (float)j;
}

static void free_layer(layer_t* L) {
  free(L->conv_w);
  free(L->conv_bias);
  free(L->A_log);
  free(L->dt_bias);
  free(L->D);
  free(L->norm_w);
}

static void add_layers(ssmc_trace* t, model_t* m) {
  for (int l = 0; l < m->n; ++l) {
    layer_t* L = &m->l[l];
    if (L->gdn) {
      add_gdn(t);
      continue;
    }
    EXPECT(ssmc_add_mamba2_layer(t, &L->d, L->conv_w, L->conv_bias, L->A_log, L->dt_bias, L->D, L->norm_w) == SSMC_OK);
    mstate* s = &m->s[l];
    s->h = zeros(h_elems(L));
    s->h_ck = zeros(h_elems(L));
    s->conv = zeros(L->cd * L->d.d_conv);
    s->conv_ck = zeros(L->cd * L->d.d_conv);
    for (int i = 0; i < MAXK; ++i) {
      s->h_in[i] = zeros(h_elems(L));
      s->conv_in[i] = zeros(L->cd * L->d.d_conv);
    }
  }
}

static void free_model(model_t* m) {
  for (int l = 0; l < m->n; ++l) {
    if (m->l[l].gdn) continue;
    mstate* s = &m->s[l];
    free(s->h);
    free(s->h_ck);
    free(s->conv);
    free(s->conv_ck);
    for (int i = 0; i < MAXK; ++i) {
      free(s->h_in[i]);
      free(s->conv_in[i]);
    }
    free_layer(&m->l[l]);
  }
}

static double silu(double v) { return v / (1.0 + exp(-v)); }

/* One token through Mamba-2 layer L as the contract computes it (STATE-MODEL section 3,
 * reference/mamba2_step.cpp), in double: the conv window shifts and takes xBC, silu of bias plus
 * the window; dt = softplus(dt + dt_bias) (linear above 20) clamped to [dt_min, dt_max];
 * per head h = exp(-exp(A_log) dt) h + dt x B^T, stored as float; y = h C + D x from the stored
 * h; then the gated RMS norm per group of nh*hp/ng channels, before or after the gate. */
static void mamba2_step(const layer_t* L, float* h, float* win, const float* xBC, const float* dt, const float* z,
                        float* out) {
  const ssmc_mamba2_layer_desc* d = &L->d;
  const int C = L->cd, W = d->d_conv, di = L->di, hp = d->hp, ns = d->ns, per_group = d->nh / d->ng;
  double* xbc = malloc(sizeof(double) * (size_t)C);
  double* u = malloc(sizeof(double) * (size_t)di);
  for (int c = 0; c < C; ++c) {
    float* w = win + c * W;
    for (int j = 0; j + 1 < W; ++j) w[j] = w[j + 1];
    w[W - 1] = xBC[c];
    double acc = d->conv_bias ? (double)L->conv_bias[c] : 0.0;
    for (int j = 0; j < W; ++j) acc += (double)L->conv_w[c * W + j] * (double)w[j];
    xbc[c] = silu(acc);
  }
  const double dt_max = d->dt_max == 0.0f ? INFINITY : (double)d->dt_max;
  for (int hh = 0; hh < d->nh; ++hh) {
    const double v = (double)dt[hh] + (double)L->dt_bias[hh];
    double sp = v > 20.0 ? v : log1p(exp(v));
    if (sp < (double)d->dt_min) sp = (double)d->dt_min;
    if (sp > dt_max) sp = dt_max;
    const double dA = exp(-exp((double)L->A_log[hh]) * sp);
    const int g = hh / per_group;
    const double* x = xbc + hh * hp;
    const double* B = xbc + di + g * ns;
    const double* Cg = xbc + di + (d->ng + g) * ns;
    for (int p = 0; p < hp; ++p) {
      double y = 0.0;
      for (int n = 0; n < ns; ++n) {
        float* e = h + ((size_t)hh * (size_t)hp + (size_t)p) * (size_t)ns + (size_t)n;
        *e = (float)(dA * (double)*e + sp * x[p] * B[n]);
        y += (double)*e * Cg[n];
      }
      y += (double)L->D[hh] * x[p];
      u[hh * hp + p] = d->norm_before_gate ? y : y * silu((double)z[hh * hp + p]);
    }
  }
  const int group = di / d->ng;
  for (int g = 0; g < d->ng; ++g) {
    double ss = 0.0;
    for (int j = g * group; j < (g + 1) * group; ++j) ss += u[j] * u[j];
    const double r = 1.0 / sqrt(ss / (double)group + (double)d->eps);
    for (int j = g * group; j < (g + 1) * group; ++j)
      out[j] = (float)(u[j] * r * (double)L->norm_w[j] * (d->norm_before_gate ? silu((double)z[j]) : 1.0));
  }
  free(xbc);
  free(u);
}

/* One h-like field of Mamba-2 layer L: as the contract lays it out, or as the engine keeps it
 * (engine_layout: [nh][ns][hp], the last two axes swapped). */
static void put_h(ssmc_trace* t, int l, const layer_t* L, const char* field, int index, const float* h) {
  const int nh = L->d.nh, hp = L->d.hp, ns = L->d.ns;
  float* e = zeros(h_elems(L));
  for (int hh = 0; hh < nh; ++hh)
    for (int p = 0; p < hp; ++p)
      for (int n = 0; n < ns; ++n)
        e[engine_layout ? (hh * ns + n) * hp + p : (hh * hp + p) * ns + n] = h[(hh * hp + p) * ns + n];
  EXPECT(ssmc_state_tensor(t, 0, l, field, index, SSMC_F32, e, SSMC_HOST) == SSMC_OK);
  free(e);
}

/* One conv-like field: d_conv columns, or the engine's newest d_conv-1 (engine_layout). */
static void put_conv(ssmc_trace* t, int l, const layer_t* L, const char* field, int index, const float* conv) {
  const int W = L->d.d_conv, keep = engine_layout ? W - 1 : W;
  float* e = zeros(L->cd * keep);
  for (int c = 0; c < L->cd; ++c)
    for (int j = 0; j < keep; ++j) e[c * keep + j] = conv[c * W + (W - keep) + j];
  EXPECT(ssmc_state_tensor(t, 0, l, field, index, SSMC_F32, e, SSMC_HOST) == SSMC_OK);
  free(e);
}

/* The state of sequence 0 after the op: every layer after alloc (all zero), else the Mamba-2
 * layers (a recorded state may hold any subset of the layers). bad: one h element off. */
static void record_state(ssmc_trace* t, model_t* m, int all_layers, int bad) {
  static float gdn_h[NV * KD * VD], gdn_conv[CD * DC];
  EXPECT(ssmc_state_begin(t, 0, 0, m->last_k) == SSMC_OK);
  for (int l = 0; l < m->n; ++l) {
    const layer_t* L = &m->l[l];
    if (L->gdn) {
      if (!all_layers) continue;
      EXPECT(ssmc_state_tensor(t, 0, l, "h", 0, SSMC_F32, gdn_h, SSMC_HOST) == SSMC_OK);
      EXPECT(ssmc_state_tensor(t, 0, l, "conv", 0, SSMC_F32, gdn_conv, SSMC_HOST) == SSMC_OK);
      continue;
    }
    const mstate* s = &m->s[l];
    float* h = zeros(h_elems(L));
    memcpy(h, s->h, sizeof(float) * (size_t)h_elems(L));
    if (bad) h[3] += 0.25f;
    put_h(t, l, L, "h", 0, h);
    free(h);
    put_conv(t, l, L, "conv", 0, s->conv);
    if (m->has_ck) {
      put_h(t, l, L, "h_checkpoint", 0, s->h_ck);
      put_conv(t, l, L, "conv_checkpoint", 0, s->conv_ck);
    }
    for (int i = 0; i + 1 < m->last_k; ++i) {
      put_h(t, l, L, "h_intermediate", i, s->h_in[i]);
      put_conv(t, l, L, "conv_intermediate", i, s->conv_in[i]);
    }
  }
}

/* Op `text` (on sequence 0, entry 0) run on the model's Mamba-2 layers and recorded: the inputs
 * of every layer, the outputs when every layer is Mamba-2, the state after it (not after
 * release). bad: the state after the first decode has one h element off. */
static void mamba2_op(ssmc_trace* t, model_t* m, const char* text, int salt, int bad) {
  char name[32] = "";
  int n1 = 0, n2 = 0;
  sscanf(text, "%31s %d %d", name, &n1, &n2);
  const int verify = !strcmp(name, "verify"), pad = strstr(text, "pad") != NULL;
  const int rows = !strcmp(name, "prefill") || verify ? n1 : !strcmp(name, "decode") ? 1 : 0;
  int all_mamba = 1;
  for (int l = 0; l < m->n; ++l) all_mamba &= !m->l[l].gdn;
  EXPECT(ssmc_begin_op(t, text) == SSMC_OK);
  for (int l = 0; l < m->n && rows > 0; ++l) {
    const layer_t* L = &m->l[l];
    if (L->gdn) {
      gdn_inputs(t, 0, l, rows, salt + 10 * l);
      if (pad) gdn_inputs(t, 1, l, rows, salt + 10 * l + 5);
      continue;
    }
    mstate* s = &m->s[l];
    float* xBC = zeros(rows * L->cd);
    float* dt = zeros(rows * L->d.nh);
    float* z = zeros(rows * L->di);
    float* out = zeros(rows * L->di);
    fill(xBC, rows * L->cd, salt + 10 * l, 1.0f);
    fill(dt, rows * L->d.nh, salt + 10 * l + 1, 2.0f);
    fill(z, rows * L->di, salt + 10 * l + 2, 1.5f);
    EXPECT(ssmc_op_inputs(t, 0, l, xBC, dt, NULL, z, SSMC_HOST) == SSMC_OK); /* x = xBC, a = dt, b = NULL */
    for (int r = 0; r < rows; ++r) {
      mamba2_step(L, s->h, s->conv, xBC + r * L->cd, dt + r * L->d.nh, z + r * L->di, out + r * L->di);
      if (verify && r + 1 < rows) { /* intermediate r: the state after row r */
        memcpy(s->h_in[r], s->h, sizeof(float) * (size_t)h_elems(L));
        memcpy(s->conv_in[r], s->conv, sizeof(float) * (size_t)(L->cd * L->d.d_conv));
      }
    }
    if (all_mamba) EXPECT(ssmc_op_outputs(t, 0, l, out, SSMC_HOST) == SSMC_OK);
    /* a padding row (entry 1) runs on the dummy slot; its inputs are recorded too */
    if (pad) EXPECT(ssmc_op_inputs(t, 1, l, xBC, dt, NULL, z, SSMC_HOST) == SSMC_OK);
    free(xBC);
    free(dt);
    free(z);
    free(out);
  }
  if (verify) m->last_k = rows;
  for (int l = 0; l < m->n; ++l) {
    const layer_t* L = &m->l[l];
    mstate* s = &m->s[l];
    if (L->gdn) continue;
    const size_t hb = sizeof(float) * (size_t)h_elems(L), cb = sizeof(float) * (size_t)(L->cd * L->d.d_conv);
    if (!strcmp(name, "checkpoint")) {
      memcpy(s->h_ck, s->h, hb);
      memcpy(s->conv_ck, s->conv, cb);
    } else if (!strcmp(name, "commit") && n1 < n2) {
      memcpy(s->h, s->h_in[n1 - 1], hb);
      memcpy(s->conv, s->conv_in[n1 - 1], cb);
    }
  }
  if (!strcmp(name, "checkpoint")) m->has_ck = 1;
  if (strcmp(name, "release")) record_state(t, m, !strcmp(name, "alloc"), bad && !strcmp(name, "decode"));
  EXPECT(ssmc_end_op(t) == SSMC_OK);
}

/* layers: "M" the first Mamba-2 layer (conv bias, norm after the gate, no dt limits), "m" the
 * second (no conv bias, norm before the gate, dt clamped to [0.05, 0.5], d_conv 3), "G" GDN. */
static void write_mamba2_trace(const char* path, const char* layers, const char* const* ops, int bad) {
  model_t m;
  memset(&m, 0, sizeof m);
  for (const char* c = layers; *c && m.n < MAXL; ++c, ++m.n) {
    if (*c == 'G') m.l[m.n].gdn = 1;
    else if (*c == 'M') mamba2_layer(&m.l[m.n], 4, 6, 10, 2, 4, 1, 0, 0.0f, 0.0f, 7 + m.n);
    else mamba2_layer(&m.l[m.n], 3, 5, 7, 1, 3, 0, 1, 0.05f, 0.5f, 7 + m.n);
  }
  ssmc_trace* t = open_trace(path);
  add_layers(t, &m);
  for (int l = 0; l < m.n && engine_layout; ++l) {
    EXPECT(ssmc_set_layer_convention(t, l, "conv_window", "d_conv-1") == SSMC_OK);
    EXPECT(ssmc_set_layer_convention(t, l, "h_layout", "nv,vd,kd") == SSMC_OK);
    if (m.l[l].gdn) EXPECT(ssmc_set_layer_convention(t, l, "gates", "torch") == SSMC_OK);
  }
  int n = 0;
  for (; ops[n]; ++n) mamba2_op(t, &m, ops[n], 3 * n + 1, bad);
  EXPECT(ssmc_op_count(t) == n);
  EXPECT(ssmc_close(t) == SSMC_OK);
  free_model(&m);
}

static void misuse_mamba2(const char* path) {
  ssmc_trace* t = open_trace(path);
  layer_t L;
  mamba2_layer(&L, 4, 6, 10, 2, 4, 1, 0, 0.0f, 0.0f, 5);
  ssmc_mamba2_layer_desc d = L.d;
#define ADD(desc, bias, D) ssmc_add_mamba2_layer(t, desc, L.conv_w, bias, L.A_log, L.dt_bias, D, L.norm_w)
  EXPECT_MSG(ADD(NULL, L.conv_bias, L.D) == SSMC_ERR_ARGUMENT, "desc is null");
  d.ng = 3;
  EXPECT_MSG(ADD(&d, L.conv_bias, L.D) == SSMC_ERR_ARGUMENT, "layer 0: mamba2(nh=4,hp=6,ns=10,ng=3,d_conv=4): nh must be a multiple of ng");
  d = L.d;
  d.dt_min = 0.5f;
  d.dt_max = 0.1f;
  EXPECT_MSG(ADD(&d, L.conv_bias, L.D) == SSMC_ERR_ARGUMENT, "dt limits must satisfy 0 <= dt_min < dt_max");
  d = L.d;
  d.eps = 0.0f;
  EXPECT_MSG(ADD(&d, L.conv_bias, L.D) == SSMC_ERR_ARGUMENT, "eps must be finite and > 0");
  d = L.d;
  d.ns = 300;
  EXPECT_MSG(ADD(&d, L.conv_bias, L.D) == SSMC_ERR_ARGUMENT, "hp and ns must be <= 256");
  EXPECT_MSG(ADD(&L.d, NULL, L.D) == SSMC_ERR_ARGUMENT, "desc says conv_bias but the pointer is null");
  d = L.d;
  d.conv_bias = 0;
  EXPECT_MSG(ADD(&d, L.conv_bias, L.D) == SSMC_ERR_ARGUMENT, "a conv_bias pointer was given but desc.conv_bias is 0");
  EXPECT_MSG(ADD(&L.d, L.conv_bias, NULL) == SSMC_ERR_ARGUMENT, "layer 0 weight D [4]: null pointer");
  L.A_log[2] = NAN;
  EXPECT_MSG(ADD(&L.d, L.conv_bias, L.D) == SSMC_ERR_ARGUMENT, "layer 0 weight A_log [4]: non-finite value nan at element 2");
  L.A_log[2] = 0.0f;
  /* none of the refused calls added a layer: GDN is layer 0, this Mamba-2 layer 1, and there is no layer 2 */
  add_gdn(t);
  EXPECT(ADD(&L.d, L.conv_bias, L.D) == SSMC_OK);
  float* xBC = zeros(L.cd);
  float dt[4] = {0}, b[4] = {0};
  float* z = zeros(L.di);
  float* out = zeros(L.di);
  EXPECT_MSG(ssmc_begin_op(t, "decode") == SSMC_OK && ssmc_op_inputs(t, 0, 2, xBC, dt, NULL, z, SSMC_HOST) == SSMC_ERR_ARGUMENT,
             "layer 2 outside 0..1");
  EXPECT(ssmc_begin_op(t, "decode") == SSMC_OK);
  EXPECT_MSG(ssmc_op_inputs(t, 0, 1, xBC, dt, b, z, SSMC_HOST) == SSMC_ERR_ARGUMENT,
             "entry 0 layer 1 is a mamba2 layer, mamba2(nh=4,hp=6,ns=10,ng=2,d_conv=4): it takes xBC (as x), dt (as a), z; b must be NULL");
  EXPECT(ssmc_begin_op(t, "decode") == SSMC_OK); /* the refusal dropped the op */
  EXPECT_MSG(ssmc_op_inputs(t, 0, 1, NULL, dt, NULL, z, SSMC_HOST) == SSMC_ERR_ARGUMENT,
             "entry 0 layer 1 xBC [rows][64] (parameter x): null pointer");
  EXPECT(ssmc_begin_op(t, "decode") == SSMC_OK);
  EXPECT_MSG(ssmc_op_inputs(t, 0, 1, xBC, NULL, NULL, z, SSMC_HOST) == SSMC_ERR_ARGUMENT, "dt [rows][4] (parameter a): null pointer");
  EXPECT(ssmc_begin_op(t, "decode") == SSMC_OK);
  gdn_inputs(t, 0, 0, 1, 3);
  dt[1] = NAN;
  EXPECT(ssmc_op_inputs(t, 0, 1, xBC, dt, NULL, z, SSMC_HOST) == SSMC_OK);
  EXPECT_MSG(ssmc_end_op(t) == SSMC_ERR_INVALID, "/ops/000000/inputs/entry0/layer1/dt: non-finite value nan at (0, 1)");
  dt[1] = 0.0f;
  EXPECT(ssmc_begin_op(t, "decode") == SSMC_OK);
  gdn_inputs(t, 0, 0, 1, 3);
  EXPECT(ssmc_end_op(t) == SSMC_ERR_INVALID); /* the Mamba-2 layer's inputs are missing */
  EXPECT(ssmc_begin_op(t, "decode") == SSMC_OK);
  gdn_inputs(t, 0, 0, 1, 3);
  EXPECT(ssmc_op_inputs(t, 0, 1, xBC, dt, NULL, z, SSMC_HOST) == SSMC_OK);
  EXPECT(ssmc_op_outputs(t, 0, 1, out, SSMC_HOST) == SSMC_OK);
  EXPECT(ssmc_end_op(t) == SSMC_ERR_INVALID); /* outputs of one layer of two */
  EXPECT(ssmc_begin_op(t, "alloc") == SSMC_OK);
  EXPECT(ssmc_end_op(t) == SSMC_OK);
  EXPECT(ssmc_begin_op(t, "decode") == SSMC_OK);
  gdn_inputs(t, 0, 0, 1, 3);
  EXPECT(ssmc_op_inputs(t, 0, 1, xBC, dt, NULL, z, SSMC_HOST) == SSMC_OK);
  EXPECT(ssmc_end_op(t) == SSMC_OK);
  EXPECT_MSG(ADD(&L.d, L.conv_bias, L.D) == SSMC_ERR_ORDER, "ssmc_add_mamba2_layer after the first op");
  EXPECT(ssmc_begin_op(t, "checkpoint") == SSMC_OK);
  EXPECT(ssmc_state_begin(t, 0, 0, 0) == SSMC_OK);
  EXPECT(ssmc_state_tensor(t, 0, 1, "conv", 0, SSMC_F16, xBC, SSMC_HOST) == SSMC_ERR_ARGUMENT); /* conv is f32 */
  EXPECT(ssmc_begin_op(t, "checkpoint") == SSMC_OK);
  EXPECT(ssmc_state_begin(t, 0, 0, 0) == SSMC_OK);
  EXPECT(ssmc_state_tensor(t, 0, 1, "conv", 0, SSMC_F32, L.conv_w, SSMC_HOST) == SSMC_OK);
  EXPECT_MSG(ssmc_end_op(t) == SSMC_ERR_INVALID, "state of seq 0 layer 1: fields given but no \"h\"");
  EXPECT(ssmc_op_count(t) == 2);
#undef ADD
  EXPECT(ssmc_abi_minor() == SSMC_ABI_MINOR);
  EXPECT(SSMC_ABI_MINOR >= 1);
  free(xBC);
  free(z);
  free(out);
  free_layer(&L);
  ssmc_abandon(t);
}

/* The PLE carry (ABI minor 3): a GDN layer declared hosting one, its inputs, outputs and state
 * fields, and what is refused (naming the call and the field). */
static void misuse_ple(const char* path) {
  ssmc_trace* t = start(path);
  enum { C = 3, K = 2 };
  float ple_w[C * K];
  fill(ple_w, C * K, 7, 0.5f);
  ssmc_ple_desc bad = {0, 3, K, 2, 1};
  EXPECT_MSG(ssmc_set_layer_ple(t, 0, &bad, ple_w) == SSMC_ERR_ARGUMENT, "channels");
  ssmc_ple_desc d = {C, 3, K, 2, 1};
  EXPECT_MSG(ssmc_set_layer_ple(t, 4, &d, ple_w) == SSMC_ERR_ARGUMENT, "layer 4");
  EXPECT(ssmc_set_layer_ple(t, 0, &d, ple_w) == SSMC_OK);
  EXPECT_MSG(ssmc_set_layer_ple(t, 0, &d, ple_w) == SSMC_ERR_ORDER, "already hosts");
  int32_t tokens[2] = {5, 1};
  float x[2 * C], out[2 * C] = {0};
  fill(x, 2 * C, 3, 1.0f);
  EXPECT(ssmc_begin_op(t, "alloc") == SSMC_OK);
  EXPECT(ssmc_end_op(t) == SSMC_OK);
  EXPECT_MSG(ssmc_set_layer_ple(t, 0, &d, ple_w) == SSMC_ERR_ORDER, "after the first ssmc_begin_op");
  /* the layer's own inputs without its PLE inputs: the op is refused at its end, naming the field */
  EXPECT(ssmc_begin_op(t, "prefill 2") == SSMC_OK);
  inputs(t, 0, 2, 5);
  EXPECT_MSG(ssmc_end_op(t) == SSMC_ERR_INVALID, "ple_tokens");
  /* a token id out of range */
  EXPECT(ssmc_begin_op(t, "prefill 2") == SSMC_OK);
  int32_t neg[2] = {3, -1};
  EXPECT_MSG(ssmc_op_ple_inputs(t, 0, 0, neg, x, SSMC_HOST) == SSMC_ERR_ARGUMENT, "row 1 holds -1");
  /* the full op, with outputs: the PLE outputs are required with the layer's */
  EXPECT(ssmc_begin_op(t, "prefill 2") == SSMC_OK);
  inputs(t, 0, 2, 5);
  EXPECT(ssmc_op_ple_inputs(t, 0, 0, tokens, x, SSMC_HOST) == SSMC_OK);
  EXPECT_MSG(ssmc_op_ple_inputs(t, 0, 0, tokens, x, SSMC_HOST) == SSMC_ERR_ORDER, "given twice");
  EXPECT(ssmc_begin_op(t, "prefill 2") == SSMC_OK);
  inputs(t, 0, 2, 5);
  EXPECT(ssmc_op_ple_inputs(t, 0, 0, tokens, x, SSMC_HOST) == SSMC_OK);
  {
    float* y = calloc((size_t)(2 * NV * VD), sizeof(float));
    EXPECT(ssmc_op_outputs(t, 0, 0, y, SSMC_HOST) == SSMC_OK);
    free(y);
  }
  EXPECT_MSG(ssmc_end_op(t) == SSMC_ERR_INVALID, "ple_layer0");
  /* state: a PLE field with the wrong dtype, a history without its conv, snapshots required */
  EXPECT(ssmc_begin_op(t, "prefill 2") == SSMC_OK);
  inputs(t, 0, 2, 5);
  EXPECT(ssmc_op_ple_inputs(t, 0, 0, tokens, x, SSMC_HOST) == SSMC_OK);
  EXPECT(ssmc_state_begin(t, 0, 0, 0) == SSMC_OK);
  {
    static float h[NV * KD * VD], conv[CD * DC];
    EXPECT(ssmc_state_tensor(t, 0, 0, "h", 0, SSMC_F32, h, SSMC_HOST) == SSMC_OK);
    EXPECT(ssmc_state_tensor(t, 0, 0, "conv", 0, SSMC_F32, conv, SSMC_HOST) == SSMC_OK);
  }
  int32_t hist[2] = {1, 5};
  EXPECT(ssmc_state_tensor(t, 0, 0, "ple_history", 0, SSMC_I32, hist, SSMC_HOST) == SSMC_OK);
  EXPECT_MSG(ssmc_end_op(t) == SSMC_ERR_INVALID, "come together");
  EXPECT(ssmc_begin_op(t, "decode") == SSMC_OK);
  EXPECT(ssmc_state_begin(t, 0, 0, 0) == SSMC_OK);
  EXPECT_MSG(ssmc_state_tensor(t, 0, 0, "ple_conv", 0, SSMC_I32, out, SSMC_HOST) == SSMC_ERR_ARGUMENT, "is f32");
  EXPECT(ssmc_begin_op(t, "decode") == SSMC_OK);
  EXPECT(ssmc_state_begin(t, 0, 0, 0) == SSMC_OK);
  EXPECT_MSG(ssmc_state_tensor(t, 0, 0, "ple_frob", 0, SSMC_F32, out, SSMC_HOST) == SSMC_ERR_ARGUMENT, "unknown PLE field");
  EXPECT(ssmc_abi_minor() >= 3);
  ssmc_abandon(t);
}

/* The refusals of ssmc_set_layer_convention and the shapes ssmc_state_field_shape reports. */
static void misuse_conventions(const char* path) {
  ssmc_trace* t = open_trace(path);
  add_gdn(t);
  int64_t d[4] = {0, 0, 0, 0};
  EXPECT(ssmc_state_field_shape(t, 0, "h", d) == 3 && d[0] == NV && d[1] == KD && d[2] == VD);
  EXPECT_MSG(ssmc_set_layer_convention(t, 0, "gate", "torch") == SSMC_ERR_ARGUMENT,
             "ssmc_set_layer_convention: layer 0: unknown convention 'gate' (known: gates, f16_store, f16_rows, "
             "conv_window, h_layout, norm_groups); did you mean gates?");
  EXPECT_MSG(ssmc_set_layer_convention(t, 0, "f16_store", "overflow") == SSMC_ERR_ARGUMENT,
             "f16 store 'overflow': expected saturate or inf");
  EXPECT_MSG(ssmc_set_layer_convention(t, 1, "gates", "torch") == SSMC_ERR_ARGUMENT, "layer 1 outside 0..0");
  EXPECT_MSG(ssmc_set_layer_convention(t, 0, NULL, "torch") == SSMC_ERR_ARGUMENT, "name or value is null");
  EXPECT_MSG(ssmc_set_layer_convention(t, 0, "norm_groups", "1") == SSMC_ERR_ARGUMENT,
             "norm_groups is a Mamba-2 layer's");
  EXPECT(ssmc_set_layer_convention(t, 0, "h_layout", "nv,vd,kd") == SSMC_OK);
  EXPECT(ssmc_set_layer_convention(t, 0, "conv_window", "d_conv-1") == SSMC_OK);
  EXPECT(ssmc_state_field_shape(t, 0, "h_intermediate", d) == 3 && d[0] == NV && d[1] == VD && d[2] == KD);
  EXPECT(ssmc_state_field_shape(t, 0, "conv_checkpoint", d) == 2 && d[0] == CD && d[1] == DC - 1);
  EXPECT_MSG(ssmc_state_field_shape(t, 0, "hh", d) == -1, "unknown field 'hh'");
  EXPECT(ssmc_begin_op(t, "alloc") == SSMC_OK);
  EXPECT_MSG(ssmc_set_layer_convention(t, 0, "gates", "torch") == SSMC_ERR_ORDER, "after the first ssmc_begin_op");
  EXPECT(ssmc_abi_minor() >= 4);
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
  /* Mamba-2 layers, alone and mixed with GDN */
  static const char* const mamba_ops[] = {"alloc", "prefill 3", "decode", "checkpoint", "verify 3",
                                          "commit 2 3", "decode @0,pad", "release", NULL};
  static const char* const mixed_ops[] = {"alloc", "prefill 2", "verify 2", "commit 1 2", "decode @0,pad", NULL};
  snprintf(p, sizeof p, "%s/capi_mamba2.h5", argv[1]);
  write_mamba2_trace(p, "Mm", mamba_ops, 0);
  snprintf(p, sizeof p, "%s/capi_mamba2_bad.h5", argv[1]);
  write_mamba2_trace(p, "Mm", mamba_ops, 1);
  snprintf(p, sizeof p, "%s/capi_mixed.h5", argv[1]);
  write_mamba2_trace(p, "GMGm", mixed_ops, 0);
  snprintf(p, sizeof p, "%s/misuse_mamba2.h5", argv[1]);
  misuse_mamba2(p);
  snprintf(p, sizeof p, "%s/misuse_ple.h5", argv[1]);
  misuse_ple(p);
  /* the same models from an engine with its own conventions (ABI minor 4) */
  engine_layout = 1;
  snprintf(p, sizeof p, "%s/capi_mamba2_engine.h5", argv[1]);
  write_mamba2_trace(p, "Mm", mamba_ops, 0);
  snprintf(p, sizeof p, "%s/capi_mixed_engine.h5", argv[1]);
  write_mamba2_trace(p, "GMGm", mixed_ops, 0);
  engine_layout = 0;
  snprintf(p, sizeof p, "%s/misuse_conventions.h5", argv[1]);
  misuse_conventions(p);
  if (failures) fprintf(stderr, "%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
