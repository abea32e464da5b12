/* ssmcheck_plugin: the C ABI through which ssmcheck drives an implementation it did not build
 * (any language with a C FFI: C, C++, Rust, Zig; a Python class through python/ssmcheck, whose
 * bridge speaks this ABI from a host process: plugin/hosted_plugin.cpp). A
 * plug-in is a shared library exporting one function, ssmcheck_plugin(), that returns a table of
 * function pointers. `--backend plugin:PATH.so[,key=value...]` makes it the system under test of
 * run, check, fuzz, replay and gate; `ssmcheck backends plugin:PATH.so` loads it and says what it
 * declares. docs/plugins.md is the guide; plugin/reference_plugin.cpp is a complete example.
 *
 * The plug-in implements the state transitions of docs/state-model.md on its own memory. ssmcheck
 * gives it the model (layers and FP32 weights) and the pool once (create_pool), the inputs of
 * every op, and reads the state back through export_state into buffers ssmcheck owns.
 *
 * Rules of the boundary:
 * - Only C types cross it. Every pointer ssmcheck passes is valid during the call only: copy what
 *   you keep (weights in create_pool, inputs in an op).
 * - No exception and no longjmp crosses it. A call returns SSMP_OK, SSMP_REFUSED (the op breaks
 *   the contract: err->kind names ssmcheck's error kind, e.g. "capacity", "commit_zero"; the
 *   state must be unchanged) or SSMP_ERROR (anything else; err->message says what).
 * - A refusal is compared with ssmcheck's own legality decision only when the plug-in sets
 *   SSMP_OWN_LEGALITY. Without it ssmcheck refuses illegal ops itself and the plug-in never sees
 *   one (a plug-in that refuses a legal op is still reported).
 * - The plug-in runs in a process of its own (ssmcheck-plugin-host, plugin/host_server.h), which
 *   ssmcheck starts: an exit, a crash (abort, segfault, stack overflow), a hang past
 *   --call-timeout, or a write past an output buffer (fenced by an inaccessible page, canary bytes
 *   up to it) fails the call it happened in, naming it; output to stdout/stderr is kept apart.
 *   `plugin-in-process:PATH.so` loads it into ssmcheck's process instead (for a debugger): there a
 *   crash ends ssmcheck with exit 2 and a message naming the call.
 * - Calls come from one thread, in op order. Slots are the plug-in's own pool indexes
 *   (0..max_slots-1); SSMP_PAD_ROW marks a padding row of a batch, which the plug-in runs on a
 *   slot of its own (the dummy slot) and whose outputs are not compared.
 *
 * Layouts (row-major, last index fastest), per GDN layer with conv_dim = 2*nk*kd + nv*vd, unless a
 * convention flag below says otherwise:
 *   x [rows][conv_dim] (channels Q | K | V), a [rows][nv], b [rows][nv], z [rows][nv*vd],
 *   out [rows][nv*vd]; h [nv][kd][vd] (FP32, or raw IEEE binary16 bits when FP16);
 *   conv [conv_dim][d_conv] FP32, column 0 oldest; h_prefill_stage [stage_elems] FP32 where
 *   stage_elems = max over layers of the h elements.
 * A Mamba-2 layer (kind SSMP_LAYER_MAMBA2, only for a plug-in that declares SSMP_MAMBA2; its shape
 * in ssmp_config.mamba2[l]) has conv_dim = nh*hp + 2*ng*ns and
 *   x [rows][conv_dim] (xBC before the conv: channels x | B | C), a [rows][nh] (dt before
 *   dt_bias), b NULL, z [rows][nh*hp], out [rows][nh*hp]; h [nh][hp][ns], ns fastest;
 *   weights A_log, dt_bias [nh], norm_w [nh*hp], D [nh] (ssmp_mamba2.D); nk, nv, kd, vd are 0.
 * A layer hosting a PLE carry (only for a plug-in that declares SSMP_PLE; its shape and weight in
 * ssmp_config.ple[l]) takes per row a token id and C channels and gives C (ssmp_ple_io):
 *   tokens [rows] (integers held exactly in FP32, the same on every hosting layer),
 *   x [rows][C], out [rows][C]; weight w [C][k_size]; carry history [ngram_size-1] FP32 token
 *   ids, oldest first, and conv [(k_size-1)*dilation][C] FP32, row 0 oldest (ssmp_ple_carry).
 *
 * By name (SSMP_BY_NAME, docs/plugins.md "By name"): the same model, inputs, outputs and state, each
 * named as the trace format names it (docs/trace-format.md) instead of a struct member per layer
 * kind: ssmp_config.layer_descs gives every layer's kind, attributes and weights by name, rows()
 * takes an op's inputs and outputs by name, export_fields() is asked for the state field by field.
 * The layouts above hold; the names are the trace's: inputs x, a, b, z (GDN) or xBC, dt, z
 * (Mamba-2), then ple_tokens, ple_x on a layer hosting a PLE carry; outputs out, and ple_out there;
 * weights conv_w, conv_bias, A_log, dt_bias, norm_w (GDN), D (Mamba-2), ple_w; state fields h, conv,
 * h_checkpoint, conv_checkpoint, h_intermediate, conv_intermediate, ple_history, ple_conv,
 * ple_history_checkpoint, ple_conv_checkpoint, ple_history_snapshot, ple_conv_snapshot, and
 * h_prefill_stage (of no layer). A plug-in that looks each name up in what it is given, and refuses
 * one it does not know, runs a layer kind added later without a new struct.
 */
#ifndef SSMCHECK_PLUGIN_H
#define SSMCHECK_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SSMP_ABI_VERSION 1 /* bumped on any incompatible change of this header */
#define SSMP_PAD_ROW (-1)  /* a padding row of a batch op */

typedef enum { SSMP_OK = 0, SSMP_REFUSED = 1, SSMP_ERROR = 2 } ssmp_status;

/* Filled by the plug-in when a call does not return SSMP_OK (NUL-terminated, truncated to fit). */
typedef struct {
  char kind[64];       /* SSMP_REFUSED: an ssmcheck error kind name (docs/state-model.md) */
  char message[1024];  /* what went wrong, naming the slot, layer and limit where it can */
} ssmp_error;

typedef enum { SSMP_H_F32 = 0, SSMP_H_F16 = 1, SSMP_H_F16_POOL = 2 } ssmp_h_mode;
/* Mamba-2 layers reach only a plug-in that declares SSMP_MAMBA2 (ABI 1, ssmp_config.mamba2). */
typedef enum { SSMP_LAYER_GDN = 0, SSMP_LAYER_MAMBA2 = 1 } ssmp_layer_kind;
typedef enum { SSMP_ARM_EXACT = 0, SSMP_ARM_WY = 1 } ssmp_verify_arm;

/* What a plug-in declares (ssmp_plugin.flags). */
enum {
  /* The plug-in makes its own legality decisions: ssmcheck passes every op through and compares
   * its refusals (SSMP_REFUSED and the kind) with the contract's. */
  SSMP_OWN_LEGALITY = 1u << 0,
  /* The plug-in promises ssmcheck's reference bit for bit: it is judged bitwise instead of under
   * the tolerance classes (docs/tolerances.md). */
  SSMP_BITWISE = 1u << 1,
  /* Conventions (docs/plugins.md, "Convention profiles"): the layouts the plug-in exports in,
   * adapted by ssmcheck to the contract's before comparing.
   * The conv window keeps d_conv-1 columns, the newest last (causal_conv1d's state in vLLM and
   * SGLang): every conv buffer of export_state is [conv_dim][d_conv-1]; the contract's column 0,
   * which no later step reads, is not compared. */
  SSMP_CONV_WINDOW_D_CONV_MINUS_1 = 1u << 2,
  /* h-like buffers are [nv][vd][kd], kd fastest (the transposed layout of some kernels). */
  SSMP_H_VD_KD = 1u << 3,
  /* The engine keeps no FP32 prefill staging blob in f16-pool mode (it widens FP16 state in
   * registers, as vLLM's and fla's kernels do): h_prefill_stage is not compared and export_state
   * leaves has_prefill_stage 0. */
  SSMP_NO_PREFILL_STAGE = 1u << 4,
  /* The plug-in's gates saturate as torch's do (Hugging Face transformers' Qwen3-Next, vLLM's
   * fused_gdn_gating, fla): dt = x > 20 ? x : softplus(x), A = exp(A_log), g = exp(-A dt), no
   * clamps. The model it is checked on then uses them (--gates torch) instead of the contract's
   * clamped gates. */
  SSMP_GATES_TORCH = 1u << 5,
  /* The plug-in's kernels store FP16 state with triton's / torch's conversion (round to nearest
   * even, overflow to inf, NaN stays NaN) instead of the contract's saturating store (clamp to
   * +-65504, NaN -> -65504): the model it is checked on then does too (--f16-store inf). */
  SSMP_F16_STORE_INF = 1u << 6,
  /* With FP16 state, the rows of one decode or verify carry the state in FP32 (registers): each
   * row's output reads the unrounded state and only the stores round (vLLM's and fla's kernels),
   * instead of the contract's rows that read the stored FP16 state (--f16-rows carried). */
  SSMP_F16_ROWS_CARRIED = 1u << 7,
  /* The plug-in runs Mamba-2 layers too (ssmp_config.mamba2, the layouts above); without it
   * ssmcheck gives it models of GDN layers only, and its campaigns draw no Mamba-2 preset.
   * SSMP_H_VD_KD then means h [nh][ns][hp] for a Mamba-2 layer (the last two axes swapped). */
  SSMP_MAMBA2 = 1u << 8,
  /* The plug-in runs the PLE carries of the layers that host one (docs/state-model.md "PLE
   * carry"): their shapes and weights come in ssmp_config.ple, a model with a carry runs through
   * prefill_ple, decode_ple and verify_ple (instead of prefill, decode and verify), and the carry
   * is exported through ssmp_state.ple. Without it ssmcheck gives it no model with a carry, and
   * its campaigns draw no PLE preset. */
  SSMP_PLE = 1u << 9,
  /* The plug-in takes ops and exports state by name (ssmp_plugin.rows and export_fields, which its
   * table must then have); prefill, decode, verify, export_state and the *_ple members may be NULL,
   * and are never called. Without it ssmcheck calls those, as before. ssmp_config.layer_descs
   * reaches every plug-in (one without the flag may read it too). */
  SSMP_BY_NAME = 1u << 10,
};

/* The op of a by-name rows() call. */
typedef enum { SSMP_OP_PREFILL = 0, SSMP_OP_DECODE = 1, SSMP_OP_VERIFY = 2 } ssmp_op;

/* What a plug-in runs beyond its layer kinds and PLE carry (docs/plugins.md, "Capabilities"): a
 * plug-in that runs part of the contract says which part, and ssmcheck's campaigns draw only inside
 * it, replay and the gate skip the rest with a reason (counted in every summary), and the coverage
 * check asks only for what it runs. Optional: ssmp_plugin.capabilities NULL (or a table that ends
 * before it) runs every h mode, every optional transition, both verify arms and padding rows, with
 * no limit. Fill it with designated initialisers:
 *   static const ssmp_capabilities caps = {.struct_size = sizeof caps, .h_modes = SSMP_RUNS_F32,
 *                                          .transitions = SSMP_T_ALL & ~SSMP_T_SNAPSHOTS};     */
enum {
  /* ssmp_capabilities.h_modes: the pool modes it runs (at least one; to_f16 comes with f16). */
  SSMP_RUNS_F32 = 1u << SSMP_H_F32,
  SSMP_RUNS_F16 = 1u << SSMP_H_F16,
  SSMP_RUNS_F16_POOL = 1u << SSMP_H_F16_POOL,
  SSMP_RUNS_ALL_H_MODES = SSMP_RUNS_F32 | SSMP_RUNS_F16 | SSMP_RUNS_F16_POOL,
};
enum {
  /* ssmp_capabilities.transitions: the optional transitions it implements (alloc, release,
   * prefill, decode, verify, checkpoint, commit, rollback and export_state it always does). */
  SSMP_T_CHECKPOINT_ASYNC = 1u << 0,              /* checkpoint(async = 1) */
  SSMP_T_ROLLBACK_AND_CHECKPOINT_ASYNC = 1u << 1, /* rollback(and_checkpoint = 1) */
  SSMP_T_SNAPSHOTS = 1u << 2,                     /* snapshot_save, snapshot_restore */
  SSMP_T_VERIFY_EXACT = 1u << 3,                  /* verify arm SSMP_ARM_EXACT */
  SSMP_T_VERIFY_WY = 1u << 4,                     /* verify arm SSMP_ARM_WY */
  SSMP_T_PAD_ROWS = 1u << 5,                      /* decode/verify entries of SSMP_PAD_ROW */
  SSMP_T_ALL = (1u << 6) - 1,
};
typedef struct {
  uint32_t struct_size; /* sizeof(ssmp_capabilities) of the plug-in's header */
  uint32_t h_modes;     /* SSMP_RUNS_... */
  uint32_t transitions; /* SSMP_T_...; at least one verify arm */
  int max_batch;        /* entries of one decode or verify, padding rows included; 0: no limit */
  int max_verify_k;     /* a verify's K; 0: no limit */
  int max_slots;        /* slots of a pool; 0: no limit */
} ssmp_capabilities;

/* One recurrent layer and its weights (FP32 host arrays, valid during create_pool only). */
typedef struct {
  int kind; /* ssmp_layer_kind */
  int nk, nv, kd, vd, d_conv;
  int sigmoid_gate; /* 0: out *= silu(z) (Qwen); 1: out *= sigmoid(z) */
  float eps;        /* rms_norm_eps of the output norm */
  const float* conv_w;    /* [conv_dim][d_conv] */
  const float* conv_bias; /* [conv_dim], or NULL when the layer has none */
  const float* A_log;     /* [nv] */
  const float* dt_bias;   /* [nv] */
  const float* norm_w;    /* [vd] */
} ssmp_layer;

/* The Mamba-2 shape and options of one layer (state-model.md, "Mamba-2"). */
typedef struct {
  int nh, hp, ns, ng;     /* heads, head dim, state size, groups (head h reads group h / (nh/ng)) */
  int norm_before_gate;   /* 0 (Nemotron-H): normalise y*silu(z) per group; 1: normalise y, then *silu(z) */
  float dt_min, dt_max;   /* dt limits after softplus (0 and +inf: none) */
  const float* D;         /* [nh] */
} ssmp_mamba2;

/* The PLE carry layer l hosts (ssmp_config.ple[l], SSMP_PLE); channels 0: it hosts none. */
typedef struct {
  int channels;        /* C */
  int ngram_size;      /* the history keeps ngram_size-1 token ids */
  int k_size;          /* conv taps; tap j reads the row (k_size-1-j)*dilation rows back */
  int dilation;
  int eos_id;          /* the token id a new history is filled with */
  const float* w;      /* [C][k_size] */
} ssmp_ple;

/* By name: an attribute of a layer as text, named and written as the trace format's /model/layer<l>
 * attributes (docs/trace-format.md): integers in decimal, floats in the shortest text that reads
 * back as the same FP32 value ("inf" for an unbounded dt_max), conventions by name ("sigmoid",
 * "torch"). A required one is always given, as is a GDN layer's output_gate; another optional one
 * only when it is not its default. */
typedef struct {
  const char* name;  /* e.g. "nv", "d_conv", "eps", "output_gate", "ple_channels" */
  const char* value; /* e.g. "4", "1e-06", "sigmoid" */
} ssmp_attr;

/* By name: a named FP32 array (a weight), row-major with dims[0..rank-1] (the rest 0). */
typedef struct {
  const char* name; /* e.g. "conv_w", "A_log", "D", "ple_w" */
  int rank;
  int64_t dims[4];
  const float* data;
} ssmp_array;

/* By name: one recurrent layer (ssmp_config.layer_descs[l]); valid during create_pool only. */
typedef struct {
  const char* kind; /* "gdn", "mamba2" (the trace's names; a later ssmcheck may add kinds) */
  int n_attrs;
  const ssmp_attr* attrs;
  int n_weights;
  const ssmp_array* weights; /* the layer's weights, in the trace's order */
} ssmp_layer_desc;

/* The model and the pool (create_pool). */
typedef struct {
  size_t struct_size; /* sizeof(ssmp_config) of ssmcheck's header */
  const char* model_name;
  int n_layers;
  const ssmp_layer* layers; /* recurrent layers, in model order */
  int h_mode;               /* ssmp_h_mode */
  int max_slots;
  const int* h_capacity;    /* [max_slots]: h intermediates slot s holds */
  int conv_capacity;        /* conv intermediates of every slot */
  int snapshot_slots;       /* prefix-cache snapshot slots of the pool */
  /* [n_layers]: entry l describes layer l when its kind is SSMP_LAYER_MAMBA2 (zero otherwise);
   * NULL when no layer is. Read it only when struct_size covers it (an older ssmcheck's config
   * ends before it and carries GDN layers only). */
  const ssmp_mamba2* mamba2;
  /* [n_layers]: entry l describes the PLE carry layer l hosts (channels 0: none); NULL when no
   * layer hosts one, and always for a plug-in that does not declare SSMP_PLE. Read it only when
   * struct_size covers it. */
  const ssmp_ple* ple;
  /* [n_layers]: every layer by name (kind, attributes, weights), the same model as `layers`,
   * `mamba2` and `ple` describe; always set by an ssmcheck whose header has it (for every plug-in).
   * Read it only when struct_size covers it. */
  const ssmp_layer_desc* layer_descs;
} ssmp_config;

/* Inputs and outputs of one sequence (one entry of a batch) at one layer; `rows` tokens. */
typedef struct {
  const float* x;
  const float* a;
  const float* b;
  const float* z;
  float* out; /* written by the plug-in */
} ssmp_layer_io;

/* The PLE inputs and output of one sequence at one layer, laid out as ssmp_layer_io (prefill_ple,
 * decode_ple, verify_ple); every pointer NULL at a layer that hosts no carry. */
typedef struct {
  const float* tokens; /* [rows] */
  const float* x;      /* [rows][C] */
  float* out;          /* [rows][C]: x + silu(y), written by the plug-in */
} ssmp_ple_io;

/* The state of one layer of a slot, read back by export_state. The buffers belong to ssmcheck
 * and are sized for FP32 (an FP16 field fills the first half with binary16 bits); the plug-in
 * writes the fields it has and says so in the int members. */
typedef struct {
  void* h;
  float* conv;
  void* h_checkpoint;
  float* conv_checkpoint;
  void* const* h_intermediates;      /* [h_intermediate_room] buffers like h */
  float* const* conv_intermediates;  /* [conv_intermediate_room] buffers like conv */
  int h_intermediate_room, conv_intermediate_room;
  /* set by the plug-in: */
  int h_is_f16;
  int has_h_checkpoint, has_conv_checkpoint;
  int h_checkpoint_is_f16;
  int n_h_intermediates, n_conv_intermediates; /* valid ones: t = 0..K-2 of the last verify */
  int h_intermediates_are_f16;
} ssmp_layer_state;

/* One PLE carry, in buffers ssmcheck owns: history [ngram_size-1], conv [(k_size-1)*dilation][C]. */
typedef struct {
  float* history;
  float* conv;
} ssmp_ple_carry;

/* The PLE carry of one layer of a slot (ssmp_state.ple[l], for a layer that hosts one). */
typedef struct {
  ssmp_ple_carry live, checkpoint;
  /* [snapshot_room]: the last verify's snapshot t is the carry after t of its rows (t = 0: before
   * it), t = 0..K-1; indexed by kept rows, unlike the h intermediates */
  const ssmp_ple_carry* snapshots;
  int snapshot_room;
  /* set by the plug-in: */
  int has_live;       /* 0 from alloc until the first row op creates the carry (EOS, zeros) */
  int has_checkpoint; /* the checkpoint holds a carry (it was present when the checkpoint was taken) */
  int n_snapshots;    /* K of the last verify, 0 when none */
} ssmp_ple_state;

typedef struct {
  size_t struct_size; /* sizeof(ssmp_state) of ssmcheck's header */
  int n_layers;
  ssmp_layer_state* layers;
  float* h_prefill_stage; /* [stage_elems] */
  int64_t stage_elems;
  /* set by the plug-in: */
  int last_verify_k;     /* K of the slot's last verify since alloc, 0 when none */
  int has_prefill_stage; /* f16-pool: the staging blob is part of the state */
  /* [n_layers] for a plug-in that declares SSMP_PLE, when the model hosts a carry (an entry of a
   * layer hosting none is zero); NULL otherwise. Read it only when struct_size covers it. */
  ssmp_ple_state* ple;
} ssmp_state;

/* By name (SSMP_BY_NAME): an input of one entry at one layer, [rows][width] FP32. */
typedef struct {
  const char* name; /* "x", "a", "b", "z" (GDN); "xBC", "dt", "z" (Mamba-2); "ple_tokens", "ple_x" */
  int64_t width;    /* values per row */
  const float* data;
} ssmp_input;

/* By name: an output of one entry at one layer, [rows][width] FP32, written by the plug-in. */
typedef struct {
  const char* name; /* "out"; "ple_out" on a layer hosting a PLE carry */
  int64_t width;
  float* data;
} ssmp_output;

/* By name: the inputs and outputs of one entry at one layer (rows(): [n][n_layers], entry-major).
 * Inputs come in the layer kind's order (the names above), outputs "out" then "ple_out". */
typedef struct {
  int n_inputs;
  const ssmp_input* inputs;
  int n_outputs;
  const ssmp_output* outputs;
} ssmp_rows_io;

/* By name: one field of a slot's state that export_fields is asked for. ssmcheck lists every field
 * the pool can hold: per layer h, conv, their _checkpoint, each h_intermediate and
 * conv_intermediate t of the pool's room, and on a layer hosting a PLE carry ple_history, ple_conv,
 * their _checkpoint and each _snapshot t; then, in f16-pool mode, h_prefill_stage (layer -1). The
 * buffer belongs to ssmcheck and is sized for FP32, dims in the plug-in's layouts (the conventions
 * it declares). The plug-in fills the fields it has and sets present (and is_f16, on an h-like field
 * it holds as binary16 bits in the first half); it changes nothing else. */
typedef struct {
  const char* name; /* "h", "conv_checkpoint", "h_intermediate", "ple_conv_snapshot", ... */
  int layer;        /* 0..n_layers-1; -1 for h_prefill_stage */
  int index;        /* t of an indexed field (_intermediate, _snapshot), else 0 */
  int rank;
  int64_t dims[4];
  void* data;
  /* set by the plug-in: */
  int present; /* h and conv always; an intermediate t only with every t' < t; the rest when held */
  int is_f16;  /* h, h_checkpoint, h_intermediate only (the intermediates all alike) */
} ssmp_field;

/* The table a plug-in returns. Every member up to export_state is required (with SSMP_BY_NAME all
 * but prefill, decode, verify and export_state, and rows and export_fields too); pause_async_copies,
 * async_pending and field_digests are optional; the three *_ple members are required with SSMP_PLE and NULL
 * without it (a table of a header before them ends at async_pending: struct_size says so).
 * `self` is what create returned. Every int-returning member returns an ssmp_status and fills
 * *err unless SSMP_OK. */
typedef struct {
  uint32_t abi_version; /* SSMP_ABI_VERSION of the plug-in's header */
  uint32_t struct_size; /* sizeof(ssmp_plugin) of the plug-in's header */
  const char* name;     /* e.g. "my-engine 0.3 (GDN kernels)" */
  /* SSMP_OWN_LEGALITY | SSMP_BITWISE | SSMP_MAMBA2 | SSMP_PLE | SSMP_BY_NAME | conventions
   * (SSMP_CONV_WINDOW_..., SSMP_H_VD_KD, SSMP_NO_PREFILL_STAGE, SSMP_GATES_TORCH, SSMP_F16_STORE_INF,
   * SSMP_F16_ROWS_CARRIED) */
  uint32_t flags;

  /* options: the key=value,... text after the path in --backend (possibly ""). NULL: failed. */
  void* (*create)(const char* options, ssmp_error* err);
  void (*destroy)(void* self);
  /* Replaces any previous pool; every slot unclaimed, every snapshot empty. */
  int (*create_pool)(void* self, const ssmp_config* config, ssmp_error* err);
  /* Claims a zeroed slot holding at least min_capacity h intermediates; *slot = its index. */
  int (*alloc)(void* self, int min_capacity, int* slot, ssmp_error* err);
  int (*release)(void* self, int slot, ssmp_error* err);
  /* io: [n_layers] */
  int (*prefill)(void* self, int slot, int rows, ssmp_layer_io* io, ssmp_error* err);
  /* io: [n][n_layers], entry-major; one row per entry */
  int (*decode)(void* self, int n, const int* slots, ssmp_layer_io* io, ssmp_error* err);
  /* io: [n][n_layers], k rows per entry; writes intermediates t = 0..k-2 */
  int (*verify)(void* self, int n, const int* slots, int k, int arm, ssmp_layer_io* io, ssmp_error* err);
  int (*checkpoint)(void* self, int slot, int async, ssmp_error* err);
  int (*commit)(void* self, int slot, int n, int k, ssmp_error* err);
  int (*rollback)(void* self, int slot, int n, int and_checkpoint, ssmp_error* err);
  int (*to_f16)(void* self, int slot, ssmp_error* err);
  int (*snapshot_save)(void* self, int slot, int snap, ssmp_error* err);
  int (*snapshot_restore)(void* self, int slot, int snap, ssmp_error* err);
  /* Waits for the slot's outstanding async copies, then writes its state into *out. */
  int (*export_state)(void* self, int slot, ssmp_state* out, ssmp_error* err);

  /* Optional (NULL: no async path). While on, hold every async copy until its reader waits for
   * it; returns 1 when supported. */
  int (*pause_async_copies)(void* self, int on);
  /* 1 while an async copy of the slot is in flight. */
  int (*async_pending)(void* self, int slot);

  /* SSMP_PLE: prefill, decode and verify of a model in which some layer hosts a PLE carry, with
   * that carry's inputs and outputs (ple laid out as io: [n_layers], or [n][n_layers] entry-major).
   * ssmcheck calls these instead of the three above for such a model, and those for any other. */
  int (*prefill_ple)(void* self, int slot, int rows, ssmp_layer_io* io, const ssmp_ple_io* ple, ssmp_error* err);
  int (*decode_ple)(void* self, int n, const int* slots, ssmp_layer_io* io, const ssmp_ple_io* ple, ssmp_error* err);
  int (*verify_ple)(void* self, int n, const int* slots, int k, int arm, ssmp_layer_io* io, const ssmp_ple_io* ple,
                    ssmp_error* err);

  /* Optional: what it runs (above); NULL runs everything. A table of a header before it ends at
   * verify_ple (struct_size says so) and runs everything too. */
  const ssmp_capabilities* capabilities;

  /* Optional (NULL, or a table of a header before it: no such mode). From the next create_pool on,
   * run the implementation's work in a seeded, deliberately unusual schedule (blocks in permuted
   * orders over several waves, copies and events delayed), the same for the same seed and ops, so
   * order- and wave-dependent bugs show on every run; `--backend perturbed:plugin:PATH.so` and the
   * gate's perturbed campaign call it (docs/cuda.md, "Perturbed schedules"). Returns 1 when on. */
  int (*perturb_schedule)(void* self, uint64_t seed);

  /* SSMP_BY_NAME (required with it; a table without the flag may leave them NULL or end before
   * them). One prefill (n 1, k = its rows), decode (k 1) or verify (k = K, arm an ssmp_verify_arm;
   * 0 otherwise) of n entries; io: [n][n_layers] entry-major, every layer of the model (PLE inputs
   * and outputs on the layers hosting a carry). Semantics as prefill, decode and verify. */
  int (*rows)(void* self, int op, int n, const int* slots, int k, int arm, ssmp_rows_io* io, ssmp_error* err);
  /* Waits for the slot's outstanding async copies, then fills the fields it holds (ssmp_field) and
   * *last_verify_k (K of the slot's last verify since alloc, 0 when none). */
  int (*export_fields)(void* self, int slot, int n_fields, ssmp_field* fields, int* last_verify_k, ssmp_error* err);

  /* Optional (NULL, or a table of a header before it: ssmcheck reads back every live sequence's
   * whole state after every op and hashes it itself). The plug-in's own 64-bit digests of the
   * slot's state, field by field, so that ssmcheck reads back only the sequences whose state
   * changed since it last looked (docs/plugins.md, "Field digests"): on a real shape, where an op
   * touches a few sequences of many and an export is tens of megabytes, reading back is most of a
   * campaign's time. `fields` is the list export_fields is asked for (with the same buffers, which
   * this call does not write); the plug-in sets present (and may set is_f16) as export_fields
   * would, and digests[i] for each present field i: equal bits give equal digests, different bits
   * different digests up to a collision (any 64-bit hash of the field's bytes and dtype). digests
   * has n_fields + 1 entries: digests[n_fields] is a digest of the rest of what an export reports,
   * last_verify_k and the fields' dtypes (writing last_verify_k there is enough when the field
   * digests cover their dtypes). ssmcheck compares a digest only with the same instance's earlier
   * digests of the same slot and field. Waits for the slot's outstanding async copies, as
   * export_state does. */
  int (*field_digests)(void* self, int slot, int n_fields, ssmp_field* fields, uint64_t* digests, ssmp_error* err);
} ssmp_plugin;

/* The one symbol a plug-in exports. */
#if defined(__GNUC__)
#define SSMP_EXPORT __attribute__((visibility("default")))
#else
#define SSMP_EXPORT
#endif
SSMP_EXPORT const ssmp_plugin* ssmcheck_plugin(void);
typedef const ssmp_plugin* (*ssmp_entry_fn)(void);
#define SSMP_ENTRY_SYMBOL "ssmcheck_plugin"

#ifdef __cplusplus
}
#endif

#endif /* SSMCHECK_PLUGIN_H */
