#!/usr/bin/env bash
# CPU per request of each thread of one `ear serve` (bench/RESULTS.md "N data-plane threads"): the built checkout
# in front of the canned upstream, autocannon -c $C for $D s (after 3 s of warm-up) with the short chat body, and
# each thread's utime+stime from /proc/PID/task/*/stat before and after, divided by the requests served. Threads
# are listed by id (Node names none of its threads: the first is the main thread, the V8 helpers follow it, then
# the kv-events thread; the data-plane threads are the busiest).
# usage: bench/per-thread-cpu.sh CHECKOUT HTTP_THREADS   env: C (64), D (10), POLICY (ear), BENCH_TOOLS, PORT (29700),
#   EAR_NODE_OPTIONS (NODE_OPTIONS for the gateway only, e.g. --max-semi-space-size=64)
set -u
DIR=${1:?checkout}; N=${2:-1}; C=${C:-64}; D=${D:-10}; B=${PORT:-29700}; T=${BENCH_TOOLS:-/work/shared/bench-tools}
W=$(mktemp -d); cd "$DIR" || exit 2
node "$T/canned_upstream.mjs" $B & U=$!
env NODE_OPTIONS="${EAR_NODE_OPTIONS:-}" node dist/src/cli/ear.js serve --port $((B+1)) --policy "${POLICY:-ear}" --backend http://127.0.0.1:$B,id=u --http-threads "$N" >"$W/ear.log" 2>&1 & E=$!
for k in $(seq 1 60); do curl -sf localhost:$((B+1))/health >/dev/null && break; sleep 0.5; done
BODY='{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":2}'
cannon () { node node_modules/.bin/autocannon -j -c "$C" -d "$1" -m POST -H content-type=application/json -b "$BODY" "http://127.0.0.1:$((B+1))/v1/chat/completions" 2>/dev/null; }
snap () { for t in /proc/$E/task/*; do echo "$(basename "$t") $(awk '{print $14+$15}' "$t/stat")"; done | sort; }
cannon 3 >/dev/null
snap >"$W/a"
read -r REQS P50 P99 <<<"$(cannon "$D" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);console.log(j.requests.total,j.latency.p50,j.latency.p99)})')"
snap >"$W/b"
RSS=$(awk '/VmRSS/ {print $2}' /proc/$E/status); kill -INT $E; wait $E 2>/dev/null; kill $U; wait 2>/dev/null
join "$W/a" "$W/b" | awk -v n="$REQS" -v d="$D" -v p50="$P50" -v p99="$P99" '
  { x = $3 - $2; if (x > 0) { printf "thread %-8s %6.1f µs/request\n", $1, x * 10000 / n; all += x } }
  END { printf "all threads %.1f µs/request; %d requests (%.0f req/s), p50 %s ms, p99 %s ms; load average %s; RSS %s kB\n", all * 10000 / n, n, n / d, p50, p99, "'"$(cut -d' ' -f1-3 /proc/loadavg)"'", "'"$RSS"'" }'
rm -rf "$W"
