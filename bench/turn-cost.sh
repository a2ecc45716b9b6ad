#!/usr/bin/env bash
# Where a 130–156 KB session turn's time goes (bench/RESULTS.md "The cost of a request (issue 30)"): one built
# checkout's `ear serve --policy ear` in front of the canned upstream, `big_turns.mjs N` against it and against the
# upstream directly, and around the measured turns each thread's utime+stime and minor faults (/proc/PID/task/*/stat)
# and the gateway's own histograms (features, waiting for the route worker, the routing decision), per EAR turn.
# WARM=K first sends K turns of other sessions whose text is not the measured turns' (a gateway that has served a
# while: its heaps and the index grown to their working size); without it the gateway is fresh.
# usage: bench/turn-cost.sh CHECKOUT [N]   env: WARM (0), EAR_FLAGS (e.g. --prefix-index-warm), EAR_NODE_OPTIONS
#   (NODE_OPTIONS for the gateway only, e.g. --max-semi-space-size=64), EAR_LOG (a file for the gateway's output),
#   BENCH_TOOLS, PORT (29800)
set -u
DIR=${1:?checkout}; N=${2:-300}; B=${PORT:-29800}; T=${BENCH_TOOLS:-/work/shared/bench-tools}; E_PORT=$((B + 1))
W=$(mktemp -d); cd "$DIR" || exit 2
node "$T/canned_upstream.mjs" $B & U=$!
# shellcheck disable=SC2086
# One data-plane thread unless EAR_FLAGS says (the figures in RESULTS are of one), if the build has the flag at all.
TH=; node dist/src/cli/ear.js serve --help | grep -q -- --http-threads && [[ "${EAR_FLAGS:-}" != *--http-threads* ]] && TH="--http-threads 1"
env NODE_OPTIONS="${EAR_NODE_OPTIONS:-}" node dist/src/cli/ear.js serve --port $E_PORT --policy ear $TH ${EAR_FLAGS:-} --backend http://127.0.0.1:$B,id=u >"${EAR_LOG:-$W/ear.log}" 2>&1 & E=$!
for k in $(seq 1 60); do curl -sf localhost:$E_PORT/health >/dev/null && break; sleep 0.5; done
sleep 2
if [ "${WARM:-0}" -gt 0 ]; then
  # Sessions of 20 turns: a ~120 KB system prompt of their own words and a tail growing ~2 KB a turn.
  node -e '
    const http = require("node:http"); const [n, port] = process.argv.slice(1).map(Number);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const words = "warm gateway sessions carry other words than the measured turns so nothing they send is cached".split(" ");
    let seed = 99; const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const text = (k) => Array.from({ length: k }, () => words[Math.floor(rnd() * words.length)]).join(" ");
    const post = (body, sid) => new Promise((resolve, reject) => {
      const req = http.request({ host: "127.0.0.1", port, path: "/v1/chat/completions", method: "POST", agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), "x-session-id": sid } },
      (res) => { res.resume(); res.on("end", resolve); });
      req.on("error", reject); req.end(body);
    });
    (async () => {
      let system = ""; let tail = "";
      for (let i = 0; i < n; i++) {
        if (i % 20 === 0) { system = text(20000); tail = ""; }
        tail += " " + text(300);
        await post(JSON.stringify({ model: "m", max_tokens: 2, messages: [{ role: "system", content: system }, { role: "user", content: tail }] }), `warm-${Math.floor(i / 20)}`);
      }
      agent.destroy();
    })();' "$WARM" $E_PORT
fi
snap () { for t in /proc/$E/task/*; do echo "$(basename "$t") $(awk '{print $14 + $15, $10}' "$t/stat")"; done | sort; }
metric () { curl -s localhost:$E_PORT/metrics | awk -v m="$1" '$1 ~ "^"m"(\\{[^}]*\\})?$" { s += $2 } END { print s + 0 }'; }
sums () { for m in ear_request_features_seconds_sum ear_queue_wait_seconds_sum ear_routing_decision_seconds_sum ear_request_features_seconds_count; do metric $m; done | tr '\n' ' '; }
read -r F0 Q0 R0 C0 <<<"$(sums)"
snap >"$W/a"
# big_turns' second target is reported as "nginx": here it is EAR.
node "$T/big_turns.mjs" "$N" $B $E_PORT | sed 's/^nginx/ear  /'
snap >"$W/b"
read -r F1 Q1 R1 C1 <<<"$(sums)"
RSS=$(awk '/VmRSS/ {print $2}' /proc/$E/status)
kill -INT $E; wait $E 2>/dev/null; kill $U; wait 2>/dev/null
TURNS=$((C1 - C0))
join "$W/a" "$W/b" | awk -v n="$TURNS" '
  { x = $4 - $2; f = $5 - $3; if (x > 0) { printf "  thread %-8s %5.2f ms CPU %6.1f minor faults a turn\n", $1, x * 10 / n, f / n; all += x } }
  END { printf "  all threads %.2f ms CPU a turn (%d EAR turns)\n", all * 10 / n, n }'
awk -v n="$TURNS" -v f="$F1" -v f0="$F0" -v q="$Q1" -v q0="$Q0" -v r="$R1" -v r0="$R0" 'BEGIN {
  printf "  a turn: features %.2f ms (waiting for the route worker %.2f), routing decision %.2f ms\n", (f - f0) * 1000 / n, (q - q0) * 1000 / n, (r - r0) * 1000 / n }'
echo "  RSS $RSS kB; load average $(cut -d' ' -f1-3 /proc/loadavg); warm-up turns ${WARM:-0}"
rm -rf "$W"
