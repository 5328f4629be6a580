#!/usr/bin/env bash
# The safety nets, run by `scripts/test.sh --sanitize` after the suite (dependencies installed):
#   1. the suite under AddressSanitizer + UndefinedBehaviorSanitizer (clang, build-asan/; leaks
#      checked; the first report fails the test), and every fuzz harness's seeds and regressions;
#   2. the threaded code under ThreadSanitizer (clang, build-tsan/): the thread pool (core), the
#      CPU backend's parallel ops (backend), the decoder driven by the server's scheduler thread
#      and the server's concurrent, cancel and load tests (server);
#   3. each fuzz harness (tests/fuzz) for DSV4_FUZZ_SECONDS (default 30) from its seed corpus.
# The sanitized suite leaves out the second registration of the model and speculative suites on
# the reference backend (the `reference` label: the same tests again, 5x slower; the reference
# ops run under the sanitizers in the backend op comparisons), and the two statistical re-runs
# the reference registration leaves out too (the chi-square through draft depth 3 and the
# re-check of every verification row by fresh passes: 3 min each under ASan; the paths they take
# are the other speculative tests' paths; the DSpark drafter's 420-token greedy sweep likewise: its
# mixed-batch, bit-exact, chunked and grammar tests run here), the greedy-equality sweeps on the random-weight `spec_*`
# configurations (drafts almost always rejected: the path of the other configurations' rejections)
# the tokenizer's conformance run against Hugging Face (its time is Node's; the tokenizer harness
# fuzzes ours) and the 1000-case structured-output fuzz (its decoding paths are the grammar
# decoding tests', which run here; the grammar harness fuzzes the compilers). That keeps CI near 30 minutes on 2 cores. Arguments go to both ctest runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc)
seconds=${DSV4_FUZZ_SECONDS:-30}
san_common="-O1 -gline-tables-only -fno-omit-frame-pointer"
configure() {  # dir, flags, extra cmake args
  local dir=$1 flags=$2
  shift 2
  cmake -S . -B "$dir" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Sanitize \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" -DDSV4_BUILD_BENCH=OFF \
    "$@" >/dev/null
}
symbolizer=$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer || true)
export ASAN_SYMBOLIZER_PATH=$symbolizer
export ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer: build-asan"
configure build-asan "$san_common -fsanitize=address,undefined -fno-sanitize-recover=all" -DDSV4_FUZZ=ON
cmake --build build-asan -j"$jobs"
heavy='JointDistributionThroughDraftDepthThreeIsTheTargets|VerificationAndDraftLogitsAreBitExact'
heavy+='|SpeculativeGreedyTest\..*/spec_|script\.tokenizer_conformance|script\.structured_output_fuzz'
heavy+='|DSparkSpeculation\.GreedyEqualsPlainForEveryDraftLengthAndAuto'
(cd build-asan && ctest --output-on-failure -j"$jobs" -LE reference -E "$heavy" "$@")

echo "== ThreadSanitizer: build-tsan"
configure build-tsan "$san_common -fsanitize=thread"
cmake --build build-tsan -j"$jobs" --target dsv4_cli dsv4_core_tests dsv4_backend_tests dsv4_server_tests
(cd build-tsan && ctest --output-on-failure -j"$jobs" -L '^(core|backend|server)$' "$@")

echo "== fuzzing: ${seconds} s per harness"
artifacts=build-asan/fuzz-artifacts
mkdir -p "$artifacts"
run_harness() {
  local name=$1 corpus=build-asan/fuzz-corpus/$1
  mkdir -p "$corpus"
  cp -n tests/fuzz/corpus/"$name"/* "$corpus"/ 2>/dev/null || true
  if build-asan/tests/fuzz/"$name"_fuzz -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
      -artifact_prefix="$artifacts/$name-" -print_final_stats=1 "$corpus" >"$artifacts/$name.log" 2>&1; then
    echo "$name: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$artifacts/$name.log" | grep -o '[0-9]*$') executions," \
         "corpus $(ls "$corpus" | wc -l) inputs"
  else
    echo "$name: FAILED (input and report in $artifacts/)"; tail -n 40 "$artifacts/$name.log"; return 1
  fi
}
harnesses=$(cd tests/fuzz && ls *_fuzz.cc | sed 's/_fuzz\.cc$//')
failed=0
# Two at a time on two cores; each harness is single-threaded.
printf '%s\n' $harnesses | xargs -P "$jobs" -I{} bash -c "$(declare -f run_harness); artifacts=$artifacts seconds=$seconds run_harness {}" || failed=1
exit $failed
