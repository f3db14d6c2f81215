#!/usr/bin/env bash
# Run eval suites in-process, then over HTTP against a server on the same state dir, and check the
# quality numbers are identical. Full reports and HTML go to $WORK (a new temporary directory
# unless set), the two summaries to $OUT (default: $WORK; never the checkout unless you say so).
#
#   flock /tmp/ragline-bench.lock bench/evals_both_modes.sh [SUITE...]   (default: the shipped three)
#   OUT=bench/results flock /tmp/ragline-bench.lock bench/evals_both_modes.sh   (to record a run)
#
# Uses the configured settings (RAGLINE_* / RAGLINE_CONFIG): the state dir and database the suites
# are indexed into. Exit: 0 identical, 1 differences or a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
SUITES=("${@:-xquad-en clapnq scifact}")
read -r -a SUITES <<< "${SUITES[*]}"
WORK=${WORK:-$(mktemp -d /tmp/ragline-evals.XXXXXX)}
RESULTS=${OUT:-$WORK}
STAMP=$(date -u +%Y-%m-%d)
NAME=$(IFS=-; echo "${SUITES[*]}")
RAGLINE=.venv/bin/ragline
PY=.venv/bin/python
mkdir -p "$RESULTS"
echo "work dir: $WORK; summaries: $RESULTS"

$RAGLINE eval run "${SUITES[@]}" --json --out "$WORK/in-process.json" --html "$WORK/in-process.html" \
  > "$RESULTS/evals-$NAME-in-process-$STAMP.json"
echo "in-process: exit $?"

$RAGLINE eval prepare "${SUITES[@]}" --json > "$WORK/prepare.json" || exit 1
KEYS=$($PY -c 'import json, sys
print(" ".join("--key %s=%s" % (r["suite"], r["key"]) for r in json.load(open(sys.argv[1]))))' \
  "$WORK/prepare.json")
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
setsid $RAGLINE serve --port "$PORT" > "$WORK/serve.log" 2>&1 &
SERVER=$!
trap 'kill -- -$SERVER 2>/dev/null' EXIT
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$PORT/readyz" > /dev/null && break
  sleep 1
done
# shellcheck disable=SC2086
$RAGLINE eval run "${SUITES[@]}" --url "http://127.0.0.1:$PORT" $KEYS --json \
  --out "$WORK/http.json" --html "$WORK/http.html" > "$RESULTS/evals-$NAME-http-$STAMP.json"
echo "http: exit $?"
kill -- -$SERVER 2>/dev/null
wait $SERVER 2>/dev/null
trap - EXIT

$PY -m evals.compare "$WORK/in-process.json" "$WORK/http.json" | tee "$WORK/compare.txt"
exit "${PIPESTATUS[0]}"
