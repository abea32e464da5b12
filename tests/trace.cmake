# State traces (issue 6): the format (round trips, byte identity, crash safety, a catalogue of
# bad files), replay of the golden and faulty fixtures, the Python example, record, the gate, and
# the C ABI through nothing but capture/ssmcheck_capture.h. cpu label; trace_gpu_test: gpu.
# Replay.PythonExampleTraceReplays runs python/examples/write_trace.py with this tree's package.
ssmcheck_test(trace_test LABEL cpu TIMEOUT 900
  SOURCES trace_format_test.cpp trace_replay_test.cpp
  LIBS ssmcheck_replay ssmcheck_compare ssmcheck_formats ssmcheck_reference ssmcheck_fixtures
  ENV "PYTHONPATH=${PROJECT_SOURCE_DIR}/python")
target_compile_definitions(trace_test PRIVATE
  SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>"
  SSMCHECK_MUTANTS_BIN="$<TARGET_FILE:ssmcheck-mutants>"
  SSMCHECK_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
add_dependencies(trace_test ssmcheck ssmcheck-mutants)

# Replay memory bounded by the live state (issue 44 item 5): peak RSS of `ssmcheck replay` on a
# 1,008-op and a 10,008-op trace (one recorded cycle repeated by hard links) within a derived bound.
ssmcheck_test(trace_bounded_test LABEL cpu TIMEOUT 300
  SOURCES trace_bounded_test.cpp
  LIBS ssmcheck_formats)
target_compile_definitions(trace_bounded_test PRIVATE SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>")
add_dependencies(trace_bounded_test ssmcheck)

# The C ABI from C: trace_capture_c records three traces (a good one, one with a wrong state, an
# abandoned capture) and checks error codes; ssmcheck must replay them with exit 0, 1 and 0. Then
# Mamba-2 (ABI minor 1): a Mamba-2 model whose states and outputs the test computes (exit 0), the
# same with one h element off (exit 1, naming layer and tensor), and a model mixing GDN and
# Mamba-2 layers (exit 0). Conventions (ABI minor 4): both again from an engine with a d_conv-1
# conv window, h [nh][ns][hp] and torch gates on its GDN layers (exit 0, the GDN layers named gates=torch).
add_executable(trace_capture_c trace_capture_c.c)
target_link_libraries(trace_capture_c PRIVATE ssmcheck_capture m)
set_target_properties(trace_capture_c PROPERTIES C_STANDARD 99)
add_test(NAME trace_capture_c
  COMMAND sh -c "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; \"$1\" \"$d\"; \"$2\" replay \"$d/capi.h5\"; \
\"$2\" replay \"$d/capi_partial.h5\" | grep -q 'capture did not finish: 2 ops recovered'; \
rc=0; \"$2\" replay \"$d/capi_bad.h5\" || rc=$?; test $rc -eq 1; \
\"$2\" replay \"$d/capi_mamba2.h5\" | tee \"$d/m.log\"; grep -q 'AGREE: 8 ops' \"$d/m.log\"; \
\"$2\" replay \"$d/capi_mixed.h5\" | tee \"$d/x.log\"; grep -q 'AGREE: 5 ops' \"$d/x.log\"; \
rc=0; \"$2\" replay \"$d/capi_mamba2_bad.h5\" > \"$d/b.log\" || rc=$?; cat \"$d/b.log\"; test $rc -eq 1; \
grep -q 'op 2 .decode.*layer 0.*h' \"$d/b.log\"; \
\"$2\" replay \"$d/capi_mamba2_engine.h5\" | tee \"$d/me.log\"; grep -q 'AGREE: 8 ops' \"$d/me.log\"; \
\"$2\" replay \"$d/capi_mixed_engine.h5\" | tee \"$d/xe.log\"; grep -q 'AGREE: 5 ops' \"$d/xe.log\"; \
grep -q 'gates=torch' \"$d/xe.log\"; echo 'C ABI traces replayed as expected'"
    sh $<TARGET_FILE:trace_capture_c> $<TARGET_FILE:ssmcheck>)
set_tests_properties(trace_capture_c PROPERTIES LABELS cpu TIMEOUT 120)
add_dependencies(trace_capture_c ssmcheck)

# The Python trace writer (python/ssmcheck/capture.py) with Mamba-2 layers, mixed models and PLE carries:
# reference traces written again through it replay bit for bit and round-trip exactly (h5py);
# misuse is refused naming op, entry, layer and field. Skipped (77) without python3-h5py.
add_test(NAME python_capture COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/python/tests/test_capture.py)
set_tests_properties(python_capture PROPERTIES LABELS cpu TIMEOUT 300 SKIP_RETURN_CODE 77
  ENVIRONMENT "SSMCHECK=$<TARGET_FILE:ssmcheck>;PYTHONPATH=${PROJECT_SOURCE_DIR}/python;PYTHONDONTWRITEBYTECODE=1")

# Recording from Hugging Face transformers (python/ssmcheck/hf_capture.py, issue 44 item 2): tiny
# random-weight Qwen3-Next and Nemotron-H models run a speculative loop; the traces replay on the
# reference and, with a GPU, on CUDA. The python3 on PATH (the one with torch and transformers);
# skipped (77) without them.
add_test(NAME python_hf_capture COMMAND /usr/bin/env python3 ${PROJECT_SOURCE_DIR}/python/tests/test_hf_capture.py)
set_tests_properties(python_hf_capture PROPERTIES LABELS gpu TIMEOUT 900 SKIP_RETURN_CODE 77
  ENVIRONMENT "SSMCHECK=$<TARGET_FILE:ssmcheck>;PYTHONPATH=${PROJECT_SOURCE_DIR}/python;PYTHONDONTWRITEBYTECODE=1")

# Undefined attributes refused by name (a misspelt convention, one on the wrong group) in traces
# and dumps; the defined conventions read back; every bundled trace still reads.
ssmcheck_test(format_attrs_test LABEL cpu TIMEOUT 120
  SOURCES format_attrs_test.cpp
  LIBS ssmcheck_formats)
target_compile_definitions(format_attrs_test PRIVATE SSMCHECK_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

if(TARGET ssmcheck_cuda)
  ssmcheck_test(trace_gpu_test LABEL gpu TIMEOUT 900
    SOURCES trace_gpu_test.cpp
    LIBS ssmcheck_replay ssmcheck_compare ssmcheck_formats ssmcheck_cuda ssmcheck_reference ssmcheck_fixtures)
endif()
if(TARGET ssmcheck_cuda)
  target_compile_definitions(trace_test PRIVATE SSMCHECK_TEST_HAVE_CUDA=1)
endif()

# The hostile-input campaign: corrupted traces and dumps, malformed scripts and flags (issue 14).
# (the capture library and the plug-in wire: their bounds on what a caller or a peer announces)
ssmcheck_test(hostile_input_test LABEL cpu TIMEOUT 600
  SOURCES hostile_input_test.cpp
  LIBS ssmcheck_formats ssmcheck_capture ssmcheck_plugin_host)
target_compile_definitions(hostile_input_test PRIVATE SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>"
  SSMCHECK_MUTANTS_BIN="$<TARGET_FILE:ssmcheck-mutants>" SSMCHECK_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
add_dependencies(hostile_input_test ssmcheck ssmcheck-mutants)

# libFuzzer targets (scripts/fuzz.sh: clang, ASan/UBSan), each bounded by a fixed number of inputs
# and a fixed seed so the run is the same on any machine; skipped (exit 77) where clang has no
# libFuzzer. The op-script parser runs 300,000 inputs (~25 s); the trace and dump readers, whose
# every read forks a crash probe, 300 (~15 exec/s, plus ~45 s to build).
add_test(NAME libfuzzer.op_script COMMAND ${PROJECT_SOURCE_DIR}/scripts/fuzz.sh 0 1)
set_tests_properties(libfuzzer.op_script PROPERTIES LABELS cpu TIMEOUT 600 SKIP_RETURN_CODE 77
  ENVIRONMENT "BUILD_DIR=${PROJECT_BINARY_DIR};FUZZ_RUNS=300000;FUZZ_TARGET=op_script")
add_test(NAME libfuzzer.file_reader COMMAND ${PROJECT_SOURCE_DIR}/scripts/fuzz.sh 0 1)
set_tests_properties(libfuzzer.file_reader PROPERTIES LABELS cpu TIMEOUT 600 SKIP_RETURN_CODE 77
  ENVIRONMENT "BUILD_DIR=${PROJECT_BINARY_DIR};FUZZ_RUNS=300;FUZZ_TARGET=file_reader")

# Bits across rebuilds: backends' numerics ids, bitwise replay by numerics, `ssmcheck approve`, and
# the digest script (cmake/numerics_digest.cmake) on a small tree.
ssmcheck_test(numerics_id_test LABEL cpu TIMEOUT 300
  SOURCES numerics_id_test.cpp
  LIBS ssmcheck_replay ssmcheck_compare ssmcheck_formats ssmcheck_reference)
target_compile_definitions(numerics_id_test PRIVATE SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>"
  SSMCHECK_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
add_dependencies(numerics_id_test ssmcheck)
