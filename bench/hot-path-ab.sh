#!/usr/bin/env bash
# The hot path, old against new in one run (bench/RESULTS.md "The hot path, measured before and after"): built EAR
# checkouts and nginx (1 worker, keep-alive upstream) in front of one canned upstream, alternated round by round.
#   short: autocannon -c $C for $D s per target and round: req/s and the server's CPU per request (utime+stime of
#          the whole process, every thread, from /proc), which a shared machine's load moves far less than req/s;
#   big:   with BIG=N, $BIG agentic-sized turns per target (big_turns.mjs: 130-156 KB chat bodies, x-session-id,
#          the tail growing ~2k tokens a turn, one connection), p50/p99 and the added latency over direct.
# usage: bench/hot-path-ab.sh CHECKOUT[@FLAG,VALUE,...]... (each built: dist/src/cli/ear.js; after @, more `ear serve`
#        flags for that target, commas for spaces: `. .@--http-threads,2` runs one checkout both ways; a target with no
#        --http-threads runs its build's default: one thread before 7c277c6, one per core since)   env: R rounds (3), D, C (50),
#        POLICY (round-robin; big turns use BIG_POLICY, default ear), SHORT (completion: {"prompt":"hi"} on
#        /v1/completions; chat: one user message "hi" on /v1/chat/completions), BODY_FILE (a chat body to send
#        instead), SESSION (an x-session-id for every request), BENCH_TOOLS (../shared/bench-tools
#        scripts), PORT (base port, 29500). Run from a checkout with node_modules (autocannon, uWebSockets.js).
#        Ends with each target's median CPU µs per request and its ratio to nginx's, and the load average.
set -u
T=${BENCH_TOOLS:-/work/shared/bench-tools}; D=${D:-5}; C=${C:-50}; R=${R:-3}; B=${PORT:-29500}; W=$(mktemp -d)
DIRS=("$@"); ROOT=$(pwd)
[ ${#DIRS[@]} -ge 1 ] || { echo "usage: $0 CHECKOUT..." >&2; exit 2; }
command -v nginx >/dev/null || { echo "nginx not found (apt-get install -y nginx)" >&2; exit 2; }
node "$T/canned_upstream.mjs" $B & U=$!
printf 'worker_processes 1; daemon off; error_log %s/ng.err; pid %s/ng.pid;\nevents { worker_connections 4096; }\nhttp { access_log off; upstream up { server 127.0.0.1:%s; keepalive 64; }\n client_body_buffer_size 1m; client_max_body_size 64m;\n server { listen 127.0.0.1:%s; location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; } } }\n' "$W" "$W" $B $((B+9)) > "$W/nginx.conf"
nginx -c "$W/nginx.conf" -p "$W" & N=$!
start () { # $1 policy: one EAR per checkout on B+1, B+2, ...
  P=(); for i in "${!DIRS[@]}"; do local d=${DIRS[$i]%%@*} x=; [[ ${DIRS[$i]} == *@* ]] && x=${DIRS[$i]#*@}
    (cd "$d" && exec node dist/src/cli/ear.js serve --port $((B+1+i)) --policy "$1" --backend http://127.0.0.1:$B,id=u ${x//,/ } >"$W/e$i.log" 2>&1) & P+=($!); done
  for i in "${!DIRS[@]}"; do for k in $(seq 1 60); do curl -sf localhost:$((B+1+i))/health >/dev/null && break; sleep 0.5; done; done
}
stop () { kill -INT "${P[@]}" 2>/dev/null; wait "${P[@]}" 2>/dev/null; }
cpu () { awk '{print $14+$15}' /proc/$1/stat; }
if [ -n "${BODY_FILE:-}" ]; then SPATH=/v1/chat/completions; SBODY=$(cat "$BODY_FILE")
elif [ "${SHORT:-completion}" = chat ]; then SPATH=/v1/chat/completions; SBODY='{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":2}'
else SPATH=/v1/completions; SBODY='{"model":"m","prompt":"hi","max_tokens":2}'; fi
SH=(); [ -n "${SESSION:-}" ] && SH=(-H "x-session-id=$SESSION")
cannon () { node "$ROOT/node_modules/.bin/autocannon" -j -c "$C" -d "$D" -m POST -H content-type=application/json "${SH[@]}" -b "$SBODY" "http://127.0.0.1:$1$SPATH" 2>/dev/null |
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);console.log(Math.round(j.requests.average), j.requests.total, j.non2xx+j.errors)})'; }
one () { local c0; c0=$(cpu "$2"); read -r rps tot bad <<<"$(cannon "$1")"; local c1; c1=$(cpu "$2"); echo "$rps $(( (c1-c0)*10000/(tot>0?tot:1) )) $bad"; }
start "${POLICY:-round-robin}"
sleep 1; NGW=$(pgrep -P "$(cat "$W/ng.pid")" | head -1)
for i in "${!DIRS[@]}"; do cannon $((B+1+i)) >/dev/null; done  # warm-up
echo "short requests ($SPATH), autocannon -c $C -d $D, $R rounds (req/s, server CPU µs per request); load average $(cut -d' ' -f1-3 /proc/loadavg):"
declare -A CPUS; med () { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
for r in $(seq 1 "$R"); do
  line="round $r:"
  for i in "${!DIRS[@]}"; do read -r a c bad <<<"$(one $((B+1+i)) "${P[$i]}")"; line="$line ${DIRS[$i]} $a req/s ${c} µs bad $bad |"; CPUS[$i]="${CPUS[$i]:-} $c"; done
  read -r a c _ <<<"$(one $((B+9)) "$NGW")"; echo "$line nginx $a req/s ${c} µs"; CPUS[n]="${CPUS[n]:-} $c"
done
NM=$(med "${CPUS[n]}")
for i in "${!DIRS[@]}"; do M=$(med "${CPUS[$i]}"); echo "median CPU µs/request: ${DIRS[$i]} $M (${M}/${NM} = $(awk "BEGIN{printf \"%.1f\", $M/($NM>0?$NM:1)}")× nginx)"; done
echo "median CPU µs/request: nginx $NM; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
stop
if [ -n "${BIG:-}" ]; then
  start "${BIG_POLICY:-ear}"
  for r in $(seq 1 "$R"); do
    for i in "${!DIRS[@]}"; do echo "big turns, round $r, ${DIRS[$i]} (direct, nginx, ear):"; (cd "$ROOT" && node "$T/big_turns.mjs" "$BIG" $B $((B+9)) $((B+1+i))); done
  done
  stop
fi
kill $U $N 2>/dev/null; wait 2>/dev/null; rm -rf "$W"
