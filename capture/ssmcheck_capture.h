/* ssmcheck_capture: a C ABI for recording state traces from an inference engine (any language
 * with a C FFI). Link libssmcheck_capture.so. The file format is docs/trace-format.md; this
 * library writes it crash-safely: every op is durable once ssmc_end_op returns, and a process
 * that dies before ssmc_close leaves PATH.partial/, which `ssmcheck replay PATH` recovers.
 *
 * Call order:
 *   ssmc_open -> ssmc_set_pool -> per recurrent layer, in model order (a model may mix kinds):
 *     ssmc_add_layer_by_name -> ssmc_set_layer_weight (each weight)  (ABI minor 6, any kind), or
 *     ssmc_add_layer / ssmc_add_mamba2_layer (the per-kind calls of minors 0 and 1)
 *   then per op: ssmc_begin_op -> [ssmc_op_input ... / ssmc_op_inputs] [ssmc_op_output ... /
 *                ssmc_op_outputs] [ssmc_op_refused] [ssmc_state_begin -> ssmc_state_tensor ...]
 *                -> ssmc_end_op
 *   ssmc_close (or ssmc_abandon).
 *
 * By name (ABI minor 6): a layer is described by the trace format's /model/layer<l> attributes
 * (docs/trace-format.md), its weights, per-token inputs, outputs and state fields by their names in
 * the trace, and their shapes are the library's answer (ssmc_layer_fields, ssmc_layer_field), so a
 * caller restates no formula and a new layer kind needs no new call. The layouts below are what
 * those calls report for today's kinds.
 * The first ssmc_begin_op writes the header (model, weights, pool); no layer may be added after.
 *
 * Every function returns SSMC_OK (0) or an error code; ssmc_last_error() then describes the
 * failure (thread-local, valid until the next call on the same thread). After an error inside
 * an op (between begin_op and end_op) the op is dropped: call ssmc_begin_op again.
 *
 * One writer per trace: the first ssmc_begin_op locks PATH.partial/ (flock) until ssmc_close or
 * ssmc_abandon; a second live capture of the same PATH, in this process or another, gets
 * SSMC_ERR_INVALID naming PATH there (a crashed capture's lock died with it: it is moved aside).
 * Threads: a handle may be shared; its calls are serialised, and an op begun by one thread is
 * built and ended by that thread (another thread's op calls meanwhile: SSMC_ERR_ORDER).
 *
 * Layouts (all row-major, last index fastest), per layer:
 *   GDN (ssmc_add_layer), with nk, nv, kd, vd, d_conv, conv_dim = 2*nk*kd + nv*vd:
 *     inputs of T tokens: x [T][conv_dim] (channels Q | K | V), a [T][nv], b [T][nv], z [T][nv*vd]
 *     outputs of T tokens: [T][nv*vd]
 *     h [nv][kd][vd] (f32, or f16 bits when the state is FP16)
 *   Mamba-2 (ssmc_add_mamba2_layer), with nh, hp, ns, ng, d_conv, conv_dim = nh*hp + 2*ng*ns:
 *     inputs of T tokens, through the same ssmc_op_inputs parameters: x = xBC [T][conv_dim]
 *     (pre-conv channels x | B | C), a = dt [T][nh] (before dt_bias), b = NULL, z [T][nh*hp]
 *     outputs of T tokens: [T][nh*hp]
 *     h [nh][hp][ns], ns fastest (f32, or f16 bits when the state is FP16)
 *   both kinds: conv [conv_dim][d_conv] f32 (column 0 oldest), h_prefill_stage [max over layers
 *   of the layer's h elements] f32.
 *   A GDN layer hosting a PLE carry (ssmc_set_layer_ple, ABI minor 3), with C channels, H =
 *   ngram_size - 1, R = (k_size - 1) * dilation: inputs tokens [T] (int32 ids) and x [T][C]
 *   (ssmc_op_ple_inputs), outputs [T][C] (ssmc_op_ple_outputs), state ple_history [H] (token ids,
 *   SSMC_I32 or SSMC_F32), ple_conv [R][C] f32, their _checkpoint copies and per-row _snapshot t.
 * Memory: SSMC_HOST pointers are read directly; SSMC_DEVICE pointers are copied with
 * cudaMemcpy when the library was built with CUDA (otherwise SSMC_ERR_DEVICE).
 *
 * Asynchronous capture (ABI minor 5; docs/trace-format.md "Asynchronous capture"): after
 * ssmc_set_async, no call waits for the GPU or for the file. Each data call records its pointer;
 * host bytes are copied at the call, so the engine may reuse them at once. At ssmc_end_op the op's
 * device arrays are copied on the library's own side stream into a bounded pinned staging pool,
 * after an event recorded on the engine's stream (ssmc_op_stream), and the engine's stream waits on
 * the device (cudaStreamWaitEvent, never a host sync) for those copies before its later work, so the
 * engine may overwrite the arrays with work enqueued after ssmc_end_op. A background thread waits
 * for the copies, checks the op and writes it. Durability: an op is durable once ssmc_flush or
 * ssmc_close returns (ssmc_end_op only queues it); a crash loses at most the queued ops, and
 * PATH.partial/ holds every op written before, recovered as above. Back-pressure, chosen at
 * ssmc_set_async, when an op does not fit in the pool's free bytes: SSMC_BLOCK waits in ssmc_end_op
 * until the writer frees enough; SSMC_DROP_STATES drops the op's states (never its inputs, outputs or
 * refusal: those wait as under SSMC_BLOCK), marks the op @states_dropped in the trace (replay then
 * knows why they are absent) and counts it (ssmc_states_dropped). An op larger than the whole pool
 * is refused by ssmc_end_op under SSMC_BLOCK (SSMC_ERR_INVALID, naming both sizes) and loses its
 * states under SSMC_DROP_STATES. Errors: what needs no data (order, layer, entry, field names) is
 * refused at the call as before; what needs the data (shapes given twice, non-finite inputs, token
 * ids) or the file is found by the writer, whose failed op is left out of the trace, and is reported
 * by the next ssmc_begin_op (which then begins nothing), by ssmc_flush, and by ssmc_close (which
 * still finishes the trace with the other ops).
 */
#ifndef SSMCHECK_CAPTURE_H
#define SSMCHECK_CAPTURE_H

#include <stdint.h>

#if defined(SSMC_BUILDING)
#define SSMC_API __attribute__((visibility("default")))
#else
#define SSMC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define SSMC_TRACE_VERSION 1 /* the trace format version this header writes */
/* Additions to the ABI that keep every earlier call as it was (the library's SOVERSION stays 1):
 *   0: GDN layers (ssmc_add_layer) -- the first ABI, which has no ssmc_abi_minor();
 *   1: Mamba-2 layers (ssmc_mamba2_layer_desc, ssmc_add_mamba2_layer) and ssmc_abi_minor();
 *   2: ssmc_drop_op (an op the engine gave up on is dropped, and the capture goes on);
 *   3: the PLE carry (ssmc_ple_desc, ssmc_set_layer_ple, ssmc_op_ple_inputs, ssmc_op_ple_outputs,
 *      the ple_* fields of ssmc_state_tensor, SSMC_I32);
 *   4: a layer's conventions by name (ssmc_set_layer_convention: gates, f16_store, f16_rows,
 *      conv_window, h_layout, norm_groups) and the shape a state field is read in
 *      (ssmc_state_field_shape);
 *   5: asynchronous capture (ssmc_set_async, ssmc_op_stream, ssmc_flush, ssmc_states_dropped,
 *      SSMC_BLOCK, SSMC_DROP_STATES) and the trace's op attribute @states_dropped;
 *   6: everything by name, any layer kind (ssmc_add_layer_by_name, ssmc_set_layer_weight,
 *      ssmc_op_input, ssmc_op_output) and the layer's geometry (ssmc_layer_fields,
 *      ssmc_layer_field); ssmc_state_field_shape also answers the ple_* fields;
 *   7: device staging for asynchronous captures (ssmc_set_device_staging, ssmc_device_staged).
 * A caller that needs a minor looks ssmc_abi_minor up (dlsym) and compares; a library without the
 * symbol is minor 0. */
#define SSMC_ABI_MINOR 7

typedef struct ssmc_trace ssmc_trace;

typedef enum {
  SSMC_OK = 0,
  SSMC_ERR_ARGUMENT = 1, /* a bad argument: null pointer, unknown name, index out of range */
  SSMC_ERR_ORDER = 2,    /* call out of order (an op input outside begin_op/end_op, ...) */
  SSMC_ERR_INVALID = 3,  /* the op or state does not fit the model (shapes, counts, dtypes) */
  SSMC_ERR_IO = 4,       /* writing the file failed */
  SSMC_ERR_DEVICE = 5    /* a device pointer could not be read (or no CUDA in this build) */
} ssmc_status;

typedef enum { SSMC_HOST = 0, SSMC_DEVICE = 1 } ssmc_memory;
typedef enum { SSMC_F32 = 0, SSMC_F16 = 1, SSMC_I32 = 2 /* token ids (minor 3) */ } ssmc_dtype;

typedef struct {
  int nk, nv, kd, vd, d_conv;
  int conv_bias;      /* 1: the layer has conv_bias [conv_dim] */
  int sigmoid_gate;   /* 0: out *= silu(z) (Qwen); 1: out *= sigmoid(z) */
  float eps;          /* rms_norm_eps of the output norm, e.g. 1e-6 */
} ssmc_layer_desc;

/* A Mamba-2 layer (ABI minor 1). Zero-initialise it and set what applies: dt_min 0 and dt_max 0
 * (or INFINITY) clamp nothing. */
typedef struct {
  int nh, hp, ns, ng; /* heads, head dim, state size, groups (head h reads group h / (nh/ng)) */
  int d_conv;
  int conv_bias;        /* 1: the layer has conv_bias [conv_dim] (Mamba-2 layers usually do) */
  int norm_before_gate; /* 0: out = rms_norm(y * silu(z)) (Nemotron-H); 1: rms_norm(y) * silu(z) */
  float dt_min, dt_max; /* dt after softplus clamped to [dt_min, dt_max] (time_step_limit) */
  float eps;            /* eps of the gated group RMS norm, e.g. 1e-5 */
} ssmc_mamba2_layer_desc;

/* The PLE carry a GDN layer hosts (ABI minor 3; docs/state-model.md "PLE carry"). */
typedef struct {
  int channels;   /* C */
  int ngram_size; /* the history keeps ngram_size - 1 token ids */
  int k_size;     /* conv taps; tap j reads the row (k_size-1-j)*dilation rows back */
  int dilation;
  int eos_id;     /* the token id a fresh history is filled with */
} ssmc_ple_desc;

/* The message of the last failed call on this thread ("" when none). */
SSMC_API const char* ssmc_last_error(void);
/* SSMC_TRACE_VERSION of the library (compare with the header's to detect a mismatch). */
SSMC_API int ssmc_trace_version(void);
/* SSMC_ABI_MINOR of the library (absent from libraries of minor 0). */
SSMC_API int ssmc_abi_minor(void);
/* 1 when the library can read device pointers (built with CUDA), else 0. */
SSMC_API int ssmc_device_support(void);

/* Starts a capture of PATH (in PATH.partial/ until ssmc_close). producer: the engine's name and
 * version; backend: what produces the states (may equal producer); h_mode: "f32", "f16" or
 * "f16-pool". model_name may be NULL. */
SSMC_API ssmc_status ssmc_open(const char* path, const char* producer, const char* backend, const char* model_name,
                               const char* h_mode, ssmc_trace** out);
/* The pool the ops ran on. h_capacity: max_slots entries (h intermediates per slot), or NULL for
 * conv_capacity everywhere. */
SSMC_API ssmc_status ssmc_set_pool(ssmc_trace* t, int max_slots, const int* h_capacity, int conv_capacity,
                                   int snapshot_slots);
/* One GDN layer and its weights (host pointers, f32): conv_w [conv_dim][d_conv],
 * conv_bias [conv_dim] (NULL unless desc->conv_bias), A_log [nv], dt_bias [nv], norm_w [vd]. */
SSMC_API ssmc_status ssmc_add_layer(ssmc_trace* t, const ssmc_layer_desc* desc, const float* conv_w,
                                    const float* conv_bias, const float* A_log, const float* dt_bias,
                                    const float* norm_w);
/* One Mamba-2 layer and its weights (host pointers, f32, finite), ABI minor 1: conv_w
 * [conv_dim][d_conv], conv_bias [conv_dim] (non-NULL iff desc->conv_bias), A_log [nh],
 * dt_bias [nh], D [nh], norm_w [nh*hp]. nh must be a multiple of ng; limits as the trace reader's
 * (core/layer_spec.h). A refused call adds nothing. */
SSMC_API ssmc_status ssmc_add_mamba2_layer(ssmc_trace* t, const ssmc_mamba2_layer_desc* desc, const float* conv_w,
                                           const float* conv_bias, const float* A_log, const float* dt_bias,
                                           const float* D, const float* norm_w);

/* Layer `layer` (a GDN layer already added) hosts a PLE carry (ABI minor 3): its geometry and
 * weights ple_w [C][k_size] (host, f32, finite). Before the first ssmc_begin_op; once per layer. A
 * refused call changes nothing. */
SSMC_API ssmc_status ssmc_set_layer_ple(ssmc_trace* t, int layer, const ssmc_ple_desc* desc, const float* ple_w);

/* A convention of layer `layer` (already added), ABI minor 4: the engine's numerics, written into
 * the trace for replay to compute with, or the layout the engine keeps its state in, converted by
 * the library to the contract's as each state tensor arrives (docs/trace-format.md, "Conventions").
 * By name (absent: the contract's, the first value):
 *   "gates"       "clamped" | "torch"      softplus linear above 20, A = exp(A_log), no clamps (GDN)
 *   "f16_store"   "saturate" | "inf"       FP16 stores overflow to inf, NaN stays NaN
 *   "f16_rows"    "stored" | "carried"     FP16 state carried in FP32 across the rows of one op
 *   "conv_window" "d_conv" | "d_conv-1"    conv fields are [conv_dim][d_conv-1], the newest column
 *                                          last (causal_conv1d's state): the trace marks the oldest
 *                                          column absent and replay does not compare it
 *   "h_layout"    "nv,kd,vd" | "nv,vd,kd"  h fields are [nv][vd][kd] (Mamba-2 [nh][ns][hp])
 *   "norm_groups" "0" | "1" | N            a Mamba-2 layer's output norm groups: 0 ng (Nemotron-H),
 *                                          1 the whole width (Hugging Face's Mamba2); N divides nh*hp
 * Before the first ssmc_begin_op; a later call for the same name replaces the value. An unknown
 * name or value is SSMC_ERR_ARGUMENT naming it; a refused call changes nothing. */
SSMC_API ssmc_status ssmc_set_layer_convention(ssmc_trace* t, int layer, const char* name, const char* value);
/* The shape ssmc_state_tensor reads `field` of layer `layer` in, under the layer's conventions
 * (minor 4): "h", "conv", their "_checkpoint" and "_intermediate" (one intermediate); from minor 6
 * also a PLE host's ple_* fields (one snapshot). Writes the
 * dims to dims[0..3] and returns how many there are, or -1 (ssmc_last_error() says why). */
SSMC_API int ssmc_state_field_shape(ssmc_trace* t, int layer, const char* field, int64_t dims[4]);

/* A layer of any kind by its attributes (ABI minor 6): kind "gdn" | "mamba2", and n_attrs
 * name/value pairs as text, the names and values of the trace format's /model/layer<l> attributes
 * (docs/trace-format.md "Model"; core/layer_attrs.h): GDN nk, nv, kd, vd, output_gate; Mamba-2 nh,
 * hp, ns, ng, norm_before_gate, norm_groups, dt_min, dt_max ("inf": none); both d_conv, conv_bias
 * ("0" | "1"), eps, gates, f16_store, f16_rows; a GDN layer hosting a PLE carry all of ple_channels,
 * ple_ngram_size, ple_k_size, ple_dilation, ple_eos_id; and, optional, name (the printed identity a
 * trace writes, e.g. "gdn(nk=1,nv=2,kd=8,vd=12,d_conv=4)": it must be the layer's). Required: the
 * shape parameters, d_conv, conv_bias, eps; the rest default to the contract's. Integers in decimal, floats as decimal text
 * (read as the nearest FP32). The numerics conventions given here are the same setting as
 * ssmc_set_layer_convention's (a later call replaces them); the layouts (conv_window, h_layout) are
 * not attributes and go through ssmc_set_layer_convention. An unknown, doubled, missing or malformed
 * attribute is SSMC_ERR_ARGUMENT naming it; a refused call adds nothing. *layer (may be NULL): the
 * new layer's index. The layer's weights are then given by ssmc_set_layer_weight, every one before
 * the first ssmc_begin_op (which refuses naming the first missing, SSMC_ERR_ORDER). */
SSMC_API ssmc_status ssmc_add_layer_by_name(ssmc_trace* t, const char* kind, int n_attrs, const char* const* names,
                                            const char* const* values, int* layer);
/* Weight `name` of layer `layer` (minor 6; a layer added either way; before the first
 * ssmc_begin_op): host f32 values, finite, count = the product of its shape (ssmc_layer_field
 * "weights": GDN conv_w, conv_bias (a layer with conv_bias 1), A_log, dt_bias, norm_w; Mamba-2
 * conv_w, conv_bias, A_log, dt_bias, D, norm_w; a PLE host's ple_w). A later call for the same name
 * replaces the values. An unknown name is SSMC_ERR_ARGUMENT listing the layer's weights, a wrong
 * count names both counts; a refused call changes nothing. */
SSMC_API ssmc_status ssmc_set_layer_weight(ssmc_trace* t, int layer, const char* name, const float* data,
                                           int64_t count);
/* How many fields layer `layer` has in `group` (minor 6): "inputs" (per token), "weights",
 * "outputs" (per token), "state" (as ssmc_state_tensor reads them); -1 on error (ssmc_last_error()). */
SSMC_API int ssmc_layer_fields(ssmc_trace* t, int layer, const char* group);
/* Field i (0..ssmc_layer_fields-1, in the trace's order) of `group`: its name (a static string,
 * valid while the library is loaded), rank and dims[0..rank-1]. inputs and outputs: rank 1, [width]
 * per token (GDN x [conv_dim], a [nv], b [nv], z [nv*vd]; Mamba-2 xBC [conv_dim], dt [nh],
 * z [nh*hp]; a PLE host's ple_tokens [1], ple_x [C]; outputs out [out_dim] and a PLE host's
 * ple_out [C]); weights their shapes; state the shapes ssmc_state_tensor reads under the layer's
 * conventions, as ssmc_state_field_shape answers: h, conv, h_checkpoint, conv_checkpoint,
 * h_intermediate, conv_intermediate and a PLE host's ple_history, ple_conv, their _checkpoint and
 * _snapshot. A field whose name ends in _intermediate or _snapshot is indexed (one tensor per t,
 * ssmc_state_tensor's index); h_prefill_stage, the trace's, is no layer's. */
SSMC_API ssmc_status ssmc_layer_field(ssmc_trace* t, int layer, const char* group, int i, const char** name, int* rank,
                                      int64_t dims[4]);

/* Starts op number ssmc_op_count(): `op` in ssmcheck's printable form, e.g. "prefill 17",
 * "verify 4 @0,2,pad", "commit 2 4 @1" (selector = logical sequences; see docs/trace-format.md). */
SSMC_API ssmc_status ssmc_begin_op(ssmc_trace* t, const char* op);
/* Inputs of selector entry `entry` (0-based) and one layer, T = the op's token rows. Required for
 * every layer of every non-padding entry of prefill/decode/verify, unless the op is refused.
 * GDN layer: x, a, b, z. Mamba-2 layer: x = xBC, a = dt, b = NULL (anything else is
 * SSMC_ERR_ARGUMENT), z. Values must be finite (checked by ssmc_end_op). */
SSMC_API ssmc_status ssmc_op_inputs(ssmc_trace* t, int entry, int layer, const float* x, const float* a,
                                    const float* b, const float* z, ssmc_memory mem);
/* The PLE inputs of one entry and one layer hosting a carry (minor 3): tokens [T] int32 token ids
 * in 0..2^24-1, x [T][C] f32. Required, as ssmc_op_inputs, on every hosting layer. */
SSMC_API ssmc_status ssmc_op_ple_inputs(ssmc_trace* t, int entry, int layer, const int32_t* tokens, const float* x,
                                        ssmc_memory mem);
/* Outputs of one entry and layer, [T][nv*vd] (GDN) or [T][nh*hp] (Mamba-2) f32 (optional; all layers of an entry, or none). */
SSMC_API ssmc_status ssmc_op_outputs(ssmc_trace* t, int entry, int layer, const float* out, ssmc_memory mem);
/* The PLE outputs [T][C] f32 of one entry and one hosting layer (minor 3): required on every
 * hosting layer of an entry whose outputs are given. */
SSMC_API ssmc_status ssmc_op_ple_outputs(ssmc_trace* t, int entry, int layer, const float* out, ssmc_memory mem);
/* One input of one entry and layer by its name (minor 6; ssmc_layer_field "inputs"): [T][width]
 * SSMC_F32; token ids (ple_tokens) SSMC_I32 or SSMC_F32, integers in 0..2^24-1. The same rule as
 * ssmc_op_inputs: every input of every layer of every non-padding entry of prefill/decode/verify
 * (checked by ssmc_end_op), each once; a layer's inputs may come by name, by ssmc_op_inputs /
 * ssmc_op_ple_inputs, or both, for layers added either way, synchronous or asynchronous. An unknown
 * name is SSMC_ERR_ARGUMENT listing the layer's inputs (the op is dropped, as on any error). */
SSMC_API ssmc_status ssmc_op_input(ssmc_trace* t, int entry, int layer, const char* name, ssmc_dtype dtype,
                                   const void* data, ssmc_memory mem);
/* One output of one entry and layer by its name (minor 6; ssmc_layer_field "outputs"): "out"
 * [T][out_dim], and on a layer hosting a PLE carry "ple_out" [T][C], f32. As ssmc_op_outputs: an
 * entry's outputs are every output of every layer, or none. */
SSMC_API ssmc_status ssmc_op_output(ssmc_trace* t, int entry, int layer, const char* name, const float* data,
                                    ssmc_memory mem);
/* The engine refused the op; kind is an ssmcheck error kind name ("commit_zero", "capacity", ...). */
SSMC_API ssmc_status ssmc_op_refused(ssmc_trace* t, const char* kind);
/* Starts the recorded state of logical sequence `seq` after this op. slot: the engine's slot (or
 * -1); last_verify_k: K of the sequence's last verify (0: none), which fixes how many
 * intermediates are valid (K-1). */
SSMC_API ssmc_status ssmc_state_begin(ssmc_trace* t, int seq, int slot, int last_verify_k);
/* One tensor of the state of `seq` (begun with ssmc_state_begin) at `layer`. field: "h", "conv",
 * "h_checkpoint", "conv_checkpoint", "h_intermediate", "conv_intermediate" (index = t, 0..K-2),
 * "h_prefill_stage" (layer and index ignored). h fields may be SSMC_F16 (raw IEEE half bits);
 * conv fields and the stage are SSMC_F32. A layer hosting a PLE carry (minor 3) also takes
 * "ple_history", "ple_conv", "ple_history_checkpoint", "ple_conv_checkpoint", "ple_history_snapshot"
 * and "ple_conv_snapshot" (index = t, 0..last_verify_k-1: the carry after t rows of the last
 * verify); history fields SSMC_I32 or SSMC_F32 (token ids), conv fields SSMC_F32; each history
 * comes with its conv, the live carry only once it exists, and all last_verify_k snapshots. The shapes are the layer's (see Layouts above). A layer is recorded once its "h" is given; it then needs
 * conv and all K-1 intermediates of both kinds. */
SSMC_API ssmc_status ssmc_state_tensor(ssmc_trace* t, int seq, int layer, const char* field, int index,
                                       ssmc_dtype dtype, const void* data, ssmc_memory mem);
/* Validates the op and writes it durably. */
SSMC_API ssmc_status ssmc_end_op(ssmc_trace* t);
/* Drops the op begun with ssmc_begin_op, writing nothing of it (the engine gave up on the op, e.g.
 * an exception in its step); the next ssmc_begin_op and ssmc_close then work as if it had never
 * begun. SSMC_OK also when no op is begun (a failed call may already have dropped it). Minor 2. */
SSMC_API ssmc_status ssmc_drop_op(ssmc_trace* t);
/* Ops written so far (an asynchronous capture: written or queued, less those the writer failed). */
SSMC_API int ssmc_op_count(const ssmc_trace* t);

/* Makes the capture asynchronous (ABI minor 5; see "Asynchronous capture" above): before the first
 * ssmc_begin_op. staging_bytes: the pinned staging pool (4096..2^40; 0: 1 GiB), which bounds the
 * bytes of the ops queued and being written, every op's bytes (host and device) counted; policy:
 * SSMC_BLOCK or SSMC_DROP_STATES, what ssmc_end_op does when the op does not fit. Starts the writer
 * thread. */
#define SSMC_BLOCK 0
#define SSMC_DROP_STATES 1
SSMC_API ssmc_status ssmc_set_async(ssmc_trace* t, int64_t staging_bytes, int policy);
/* Device staging for an asynchronous capture (minor 7): after ssmc_set_async, before the first
 * ssmc_begin_op; allocates `bytes` (4096..2^40) on the current CUDA device. An op's device arrays are
 * then copied device-to-device into this ring on a stream of the library's, and the engine's stream
 * waits (on the device) for that copy only; the device-to-host copy into the pinned pool follows on
 * the side stream while the engine goes on. Without it the engine's stream waits for the
 * device-to-host copy itself. Back-pressure: a copy into a range of the ring that an earlier op still
 * holds waits, on the device, for that op's device-to-host copy (the copy engine's pace, never the
 * writer's; the engine's thread never waits for the device); an op larger than the whole ring is
 * copied the direct way. What reaches the trace is the same either way. Size it for the largest state
 * an op captures plus what the following steps capture while that state drains to the host
 * (docs/trace-format.md, "A ring that holds the state"). SSMC_ERR_DEVICE when the build has no CUDA or the allocation
 * fails (the capture stays without device staging). */
SSMC_API ssmc_status ssmc_set_device_staging(ssmc_trace* t, int64_t bytes);
/* Ops whose device arrays went through the device staging so far (minor 7; the others were copied
 * the direct way: no device staging, or larger than its ring). */
SSMC_API int64_t ssmc_device_staged(const ssmc_trace* t);
/* The CUDA stream (a cudaStream_t, passed as void*) that produces the op's device arrays (minor 5,
 * asynchronous captures only; between ssmc_begin_op and ssmc_end_op). The copies start after the work
 * enqueued on it before ssmc_end_op, and its work enqueued after ssmc_end_op starts after the copies.
 * Not given: the legacy default stream (0). */
SSMC_API ssmc_status ssmc_op_stream(ssmc_trace* t, void* stream);
/* Waits until every op ssmc_end_op queued is written (durable); reports the writer's failures not
 * reported yet. SSMC_OK at once for a synchronous capture (every op is durable already). Minor 5. */
SSMC_API ssmc_status ssmc_flush(ssmc_trace* t);
/* Ops whose states SSMC_DROP_STATES left out so far (minor 5). */
SSMC_API int64_t ssmc_states_dropped(const ssmc_trace* t);

/* Finishes PATH (merged from PATH.partial/, which is removed) and frees t, also on error (the
 * partial directory then stays). An asynchronous capture writes its queued ops first, and fails
 * (naming the count and the first) when the writer failed any op during the capture. */
SSMC_API ssmc_status ssmc_close(ssmc_trace* t);
/* Frees t without finishing: PATH.partial/ stays, as after a crash (an asynchronous capture: the op
 * being written is finished, the queued ones are lost). */
SSMC_API void ssmc_abandon(ssmc_trace* t);

#ifdef __cplusplus
}
#endif

#endif /* SSMCHECK_CAPTURE_H */
